/*
 * test_schema6.c - the IPv6 records (NAT66 and NAT64) as a specification:
 * their wire and JSON forms byte for byte, their keys, batches that mix
 * them with IPv4 records, and every input a decoder must refuse
 * (schema/FORMAT.md, "Session records for IPv6"). No servers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nst_session.h"

#define IP(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static void v6(const char *text, uint8_t out[16])
{
	cr_assert_eq(inet_pton(AF_INET6, text, out), 1, "%s", text);
}

/* NAT66 TCP [2001:db8::1]:40000 -> [2001:db8:1::2]:443 translated to
 * [2001:db8:ff::7]:1025, the IPv4 example's header values. */
static struct ns_rec known_nat66(void)
{
	struct ns_rec r = {.s = nst_session(6, NS_EV_CREATE, 7, 3, 30000,
					    1700000000123456789ull)};

	r.s.family = NS_FAMILY_NAT66;
	r.s.orig.sport = 40000;
	r.s.orig.dport = 443;
	r.s.xlat.sport = 1025;
	r.s.xlat.dport = 443;
	v6("2001:db8::1", r.v6.orig_saddr);
	v6("2001:db8:1::2", r.v6.orig_daddr);
	v6("2001:db8:ff::7", r.v6.xlat_saddr);
	v6("2001:db8:1::2", r.v6.xlat_daddr);
	return r;
}

/* NAT64 TCP [2001:db8::1]:40000 -> [64:ff9b::5db8:d822]:443 translated to
 * 198.51.100.7:1025 -> 93.184.216.34:443 under 64:ff9b::/96. */
static struct ns_rec known_nat64(void)
{
	struct ns_rec r = {.s = nst_session(6, NS_EV_CREATE, 7, 3, 30000,
					    1700000000123456789ull)};

	r.s.family = NS_FAMILY_NAT64;
	r.s.orig.sport = 40000;
	r.s.orig.dport = 443;
	r.s.xlat = (struct ns_tuple){IP(198, 51, 100, 7), IP(93, 184, 216, 34),
				     1025, 443};
	v6("2001:db8::1", r.v6.orig_saddr);
	v6("64:ff9b::5db8:d822", r.v6.orig_daddr);
	r.v6.prefix_len = 96;
	return r;
}

static const uint8_t nat66_wire[NS_RECORD_V1_NAT66_LEN] = {
	0x01, 0x06, 0x06, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x03,
	0x00, 0x00, 0x75, 0x30, 0x17, 0x97, 0x9c, 0xfe, 0x3d, 0x85, 0xcd, 0x15,
	0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x01, 0xbb,
	0x20, 0x01, 0x0d, 0xb8, 0x00, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x07, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x01, 0x01, 0xbb,
};

static const uint8_t nat64_wire[NS_RECORD_V1_NAT64_LEN] = {
	0x01, 0x40, 0x06, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
	0x03, 0x00, 0x00, 0x75, 0x30, 0x17, 0x97, 0x9c, 0xfe, 0x3d, 0x85,
	0xcd, 0x15, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x64, 0xff, 0x9b,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5d, 0xb8, 0xd8,
	0x22, 0x9c, 0x40, 0x01, 0xbb, 0xc6, 0x33, 0x64, 0x07, 0x5d, 0xb8,
	0xd8, 0x22, 0x04, 0x01, 0x01, 0xbb, 0x60, 0x00, 0x00, 0x00,
};

Test(record6, nat66_encodes_the_documented_bytes)
{
	struct ns_rec r = known_nat66();
	uint8_t buf[NS_RECORD_MAX_LEN];

	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), 96);
	cr_assert_arr_eq(buf, nat66_wire, sizeof(nat66_wire));
}

Test(record6, nat64_encodes_the_documented_bytes)
{
	struct ns_rec r = known_nat64();
	uint8_t buf[NS_RECORD_MAX_LEN];

	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), 76);
	cr_assert_arr_eq(buf, nat64_wire, sizeof(nat64_wire));
}

static void assert_round_trip(const struct ns_rec *r, const uint8_t *wire,
			      size_t len)
{
	struct ns_rec d;
	uint8_t buf[NS_RECORD_MAX_LEN + 5];

	memset(&d, 0x5a, sizeof(d));
	memcpy(buf, wire, len);
	memset(buf + len, 0xaa, 5); /* what follows is not its business */
	cr_assert_eq(ns_record_decode_rec(buf, len + 5, &d), (int)len);
	cr_assert(ns_session_equal_state(&d.s, &r->s));
	cr_assert_eq(d.s.event, r->s.event);
	cr_assert_arr_eq(&d, r, sizeof(d)); /* reserved and spare bytes 0 */
	cr_assert(ns_session_same_flow(&d.s, &r->s));
}

Test(record6, both_families_decode_to_what_was_encoded)
{
	struct ns_rec a = known_nat66(), b = known_nat64();

	assert_round_trip(&a, nat66_wire, sizeof(nat66_wire));
	assert_round_trip(&b, nat64_wire, sizeof(nat64_wire));
}

Test(record6, every_nat64_prefix_length_round_trips)
{
	/* RFC 6052 section 2.4's examples of 192.0.2.33 under 2001:db8::/n */
	static const struct {
		uint8_t len;
		const char *addr;
	} ex[] = {{32, "2001:db8:c000:221::"},
		  {40, "2001:db8:1c0:2:21::"},
		  {48, "2001:db8:122:c000:2:2100::"},
		  {56, "2001:db8:122:3c0:0:221::"},
		  {64, "2001:db8:122:344:c0:2:2100:0"},
		  {96, "2001:db8:122:344::192.0.2.33"}};

	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
		struct ns_rec r = known_nat64(), d;
		uint8_t buf[NS_RECORD_MAX_LEN];

		r.s.xlat.daddr = IP(192, 0, 2, 33);
		r.v6.prefix_len = ex[i].len;
		v6(ex[i].addr, r.v6.orig_daddr);
		cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), 76,
			     "/%u", ex[i].len);
		cr_assert_eq(ns_record_decode_rec(buf, 76, &d), 76);
		cr_assert_arr_eq(&d, &r, sizeof(d));
	}
}

Test(record6, every_truncation_is_emsgsize)
{
	struct ns_rec d;

	for (size_t len = 2; len < sizeof(nat66_wire); len++)
		cr_assert_eq(ns_record_decode_rec(nat66_wire, len, &d),
			     -EMSGSIZE, "NAT66 length %zu", len);
	for (size_t len = 2; len < sizeof(nat64_wire); len++)
		cr_assert_eq(ns_record_decode_rec(nat64_wire, len, &d),
			     -EMSGSIZE, "NAT64 length %zu", len);
}

/* The record wire[0..len) with byte at set to value is refused with err
 * by both decoders, and the output is left as it was. */
static void assert_refused(const uint8_t *wire, size_t len, size_t at,
			   uint8_t value, int err)
{
	uint8_t buf[NS_RECORD_MAX_LEN];
	struct ns_rec d, before;
	struct ns_session one;

	memcpy(buf, wire, len);
	buf[at] = value;
	memset(&d, 0x5a, sizeof(d));
	before = d;
	cr_assert_eq(ns_record_decode_rec(buf, len, &d), err, "byte %zu = %u",
		     at, value);
	cr_assert_arr_eq(&d, &before, sizeof(d));
	cr_assert_eq(ns_record_decode(buf, len, &one), err);
}

Test(record6, bad_header_fields_are_refused_as_in_ipv4)
{
	const uint8_t *w[] = {nat66_wire, nat64_wire};
	const size_t n[] = {sizeof(nat66_wire), sizeof(nat64_wire)};

	for (int i = 0; i < 2; i++) {
		assert_refused(w[i], n[i], 0, 2, -EPROTO);
		assert_refused(w[i], n[i], 2, 0, -EINVAL);
		assert_refused(w[i], n[i], 3, 0, -EINVAL);
		assert_refused(w[i], n[i], 3, 4, -EINVAL);
	}
}

Test(record6, nat64_bad_prefix_length_is_einval)
{
	static const uint8_t bad[] = {0, 8, 31, 33, 72, 80, 95, 97, 128, 255};

	for (size_t i = 0; i < sizeof(bad); i++)
		assert_refused(nat64_wire, sizeof(nat64_wire), 72, bad[i],
			       -EINVAL);
}

Test(record6, nat64_destination_not_embedding_xlat_daddr_is_einval)
{
	/* the embedded address's last byte, xlat_daddr's last byte, a
	 * prefix byte under /96 is free: that one is no error */
	assert_refused(nat64_wire, sizeof(nat64_wire), 55, 0x23, -EINVAL);
	assert_refused(nat64_wire, sizeof(nat64_wire), 67, 0x23, -EINVAL);
}

Test(record6, nat64_nonzero_u_octet_or_suffix_is_einval)
{
	struct ns_rec r = known_nat64(), d;
	uint8_t buf[NS_RECORD_MAX_LEN];

	/* /64: byte 8 (the u octet) and the suffix after the IPv4 address */
	r.v6.prefix_len = 64;
	v6("64:ff9b::5d:b8d8:2200:0", r.v6.orig_daddr);
	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), 76);
	cr_assert_eq(ns_record_decode_rec(buf, 76, &d), 76);
	assert_refused(buf, 76, 40 + 8, 1, -EINVAL);
	assert_refused(buf, 76, 40 + 15, 1, -EINVAL);
}

Test(record6, nat64_reserved_bytes_must_be_zero)
{
	for (size_t at = 73; at < 76; at++)
		assert_refused(nat64_wire, sizeof(nat64_wire), at, 1, -EINVAL);
}

Test(record6, one_line_reader_refuses_ipv6_with_eafnosupport)
{
	struct ns_session one;

	memset(&one, 0x5a, sizeof(one));
	cr_assert_eq(ns_record_decode(nat66_wire, sizeof(nat66_wire), &one),
		     -EAFNOSUPPORT);
	cr_assert_eq(ns_record_decode(nat64_wire, sizeof(nat64_wire), &one),
		     -EAFNOSUPPORT);
	cr_assert_eq(one.version, 0x5a);
}

Test(record6, encode_refuses_what_decode_would)
{
	struct ns_rec r = known_nat64();
	uint8_t buf[NS_RECORD_MAX_LEN];

	cr_assert_eq(ns_record_encode(&r.s, buf, 75), -ENOSPC);
	r.v6.prefix_len = 80;
	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), -EINVAL);
	r = known_nat64();
	r.s.xlat.daddr++;
	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), -EINVAL);
	r = known_nat64();
	r.v6.zero[3] = 1;
	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), -EINVAL);
	r = known_nat66();
	cr_assert_eq(ns_record_encode(&r.s, buf, 95), -ENOSPC);
	r.s.proto = 0;
	cr_assert_eq(ns_record_encode(&r.s, buf, sizeof(buf)), -EINVAL);
}

Test(record6, json_forms)
{
	struct ns_rec a = known_nat66(), b = known_nat64();
	char js[512];

	cr_assert_gt(ns_record_to_json(&b.s, js, sizeof(js)), 0);
	cr_assert_str_eq(
		js,
		"{\"version\":1,\"family\":64,\"event\":\"create\",\"proto\":6,"
		"\"gateway_id\":7,\"epoch\":3,\"timeout_ms\":30000,"
		"\"timestamp_ns\":1700000000123456789,"
		"\"orig_saddr\":\"2001:db8::1\","
		"\"orig_daddr\":\"64:ff9b::5db8:d822\",\"orig_sport\":40000,"
		"\"orig_dport\":443,\"new_saddr\":\"198.51.100.7\","
		"\"new_daddr\":\"93.184.216.34\",\"new_sport\":1025,"
		"\"new_dport\":443,\"prefix\":\"64:ff9b::/96\"}");
	cr_assert_gt(ns_record_to_json(&a.s, js, sizeof(js)), 0);
	cr_assert(strstr(js, "\"family\":6,") != NULL);
	cr_assert(strstr(js, "\"new_saddr\":\"2001:db8:ff::7\",\"new_daddr\":"
			     "\"2001:db8:1::2\",\"new_sport\":1025,"
			     "\"new_dport\":443}") != NULL);
}

Test(key6, key_of_an_ipv6_session_is_the_documented_40_bytes)
{
	static const uint8_t want[NS_KEY_V6_LEN] = {
		0x6e, 0x73, 0x3a, 0x06, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x9c, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0xbb};
	struct ns_rec a = known_nat66(), b = known_nat64();
	uint8_t key[NS_KEY_MAX], kb[NS_KEY_MAX], saddr[16], daddr[16], proto;
	uint16_t sport, dport;

	cr_assert_eq(ns_key_of(&a.s, key), NS_KEY_V6_LEN);
	cr_assert_arr_eq(key, want, NS_KEY_V6_LEN);
	cr_assert_eq(ns_key_parse_v6(key, NS_KEY_V6_LEN, &proto, saddr, &sport,
				     daddr, &dport),
		     0);
	cr_assert_eq(proto, 6);
	cr_assert_arr_eq(saddr, a.v6.orig_saddr, 16);
	cr_assert_arr_eq(daddr, a.v6.orig_daddr, 16);
	cr_assert_eq(sport, 40000);
	cr_assert_eq(dport, 443);
	/* a NAT64 session keys by its inside tuple the same way */
	cr_assert_eq(ns_key_of(&b.s, kb), NS_KEY_V6_LEN);
	cr_assert_arr_eq(kb, key, 20);
}

Test(key6, parse_refuses_what_is_not_an_ipv6_session_key)
{
	struct ns_rec a = known_nat66();
	uint8_t key[NS_KEY_MAX + 1], saddr[16], daddr[16], proto;
	uint16_t sport, dport;

	ns_key_of(&a.s, key);
	cr_assert_eq(
		ns_key_parse_v6(key, 39, &proto, saddr, &sport, daddr, &dport),
		-EINVAL);
	cr_assert_eq(
		ns_key_parse_v6(key, 41, &proto, saddr, &sport, daddr, &dport),
		-EINVAL);
	cr_assert_eq(ns_key_parse_v6(key, NS_KEY_LEN, &proto, saddr, &sport,
				     daddr, &dport),
		     -EINVAL);
	key[3] = 0;
	cr_assert_eq(
		ns_key_parse_v6(key, 40, &proto, saddr, &sport, daddr, &dport),
		-EINVAL);
	key[3] = 6;
	key[2] = ';';
	cr_assert_eq(
		ns_key_parse_v6(key, 40, &proto, saddr, &sport, daddr, &dport),
		-EINVAL);
}

Test(key6, ipv4_key_of_is_the_16_byte_key)
{
	struct ns_session s = nst_session(17, NS_EV_CREATE, 1, 1, 1000, 1);
	uint8_t key[NS_KEY_MAX], want[NS_KEY_LEN];

	nst_session_snat(&s, IP(10, 0, 0, 1), 1000, IP(192, 0, 2, 1), 53,
			 IP(198, 51, 100, 1), 2000);
	ns_key_build(s.proto, &s.orig, want);
	cr_assert_eq(ns_key_of(&s, key), NS_KEY_LEN);
	cr_assert_arr_eq(key, want, NS_KEY_LEN);
}

/* A batch of IPv4, NAT66 and NAT64 records in turn, n records. */
static size_t build_mixed(uint8_t *buf, uint16_t n, uint8_t flags)
{
	struct ns_batch_hdr h = {.publisher_id = 1,
				 .gateway_id = 7,
				 .epoch = 3,
				 .count = n,
				 .seq = 1,
				 .flags = flags,
				 .channel_slot = 5,
				 .sent_ns = 2};
	size_t off = NS_BATCH_HDR_LEN;

	for (uint16_t i = 0; i < n; i++) {
		struct ns_rec r = i % 3 == 0 ? known_nat66() : known_nat64();
		int len;

		if (i % 3 == 2) {
			r.s = nst_session(17, NS_EV_REFRESH, 7, 3, 1000, 9);
			nst_session_snat(&r.s, IP(10, 0, 0, 1), i,
					 IP(192, 0, 2, 1), 53,
					 IP(198, 51, 100, 1), i);
		}
		r.s.orig.sport = i;
		len = ns_record_encode(&r.s, buf + off, NS_BATCH_MAX_LEN - off);
		cr_assert_gt(len, 0);
		off += (size_t)len;
	}
	h.body_len = (uint32_t)(off - NS_BATCH_HDR_LEN);
	ns_batch_hdr_encode(&h, buf);
	return off;
}

static uint8_t batch[NS_BATCH_MAX_LEN + 64];

Test(batch6, a_mixed_batch_decodes_and_iterates_every_family)
{
	size_t len = build_mixed(batch, 300, 0);
	struct ns_batch_hdr h;
	const uint8_t *body;
	struct ns_batch_iter it;
	struct ns_rec r;
	unsigned int i = 0;

	cr_assert_eq(len, NS_BATCH_HDR_LEN + 100 * (96 + 76 + 48));
	cr_assert_eq(ns_batch_decode(batch, len, &h, &body), 0);
	cr_assert_eq(h.count, 300);
	ns_batch_iter_init(&it, body, h.body_len);
	while (ns_batch_iter_next_rec(&it, &r) == 1) {
		static const uint8_t fam[] = {NS_FAMILY_NAT66, NS_FAMILY_NAT64,
					      NS_FAMILY_IPV4};

		cr_assert_eq(r.s.family, fam[i % 3]);
		cr_assert_eq(r.s.orig.sport, i);
		i++;
	}
	cr_assert_eq(i, 300);
	/* a one-line reader stops at the first IPv6 record */
	ns_batch_iter_init(&it, body, h.body_len);
	cr_assert_eq(ns_batch_iter_next(&it, &r.s), -EAFNOSUPPORT);
}

Test(batch6, a_batch_of_4096_nat66_records_is_the_largest)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t off = NS_BATCH_HDR_LEN;
	struct ns_batch_hdr hdr = {.count = NS_BATCH_MAX_RECORDS,
				   .flags = NS_BATCH_F_HMAC,
				   .seq = 1};
	struct ns_rec r = known_nat66();
	static const uint8_t key[] = "k";

	for (int i = 0; i < NS_BATCH_MAX_RECORDS; i++)
		off += (size_t)ns_record_encode(&r.s, batch + off, 96);
	hdr.body_len = (uint32_t)(off - NS_BATCH_HDR_LEN);
	ns_batch_hdr_encode(&hdr, batch);
	cr_assert_eq(ns_batch_mac(key, 1, batch, off, batch + off), 0);
	off += NS_BATCH_MAC_LEN;
	cr_assert_eq(off, 393296);
	cr_assert_eq(NS_BATCH_MAX_LEN, 393296);
	cr_assert_eq(ns_batch_decode(batch, off, &h, &body), 0);
	cr_assert_eq(ns_batch_verify(batch, off, key, 1), 0);
	batch[NS_BATCH_HDR_LEN + 30] ^= 1; /* a signed address changed */
	cr_assert_eq(ns_batch_verify(batch, off, key, 1), -EACCES);
	cr_assert_eq(ns_batch_decode(batch, off + 1, &h, &body), -EMSGSIZE);
}

Test(batch6, every_truncation_of_a_mixed_batch_is_emsgsize)
{
	size_t len = build_mixed(batch, 7, 0);
	struct ns_batch_hdr h;
	const uint8_t *body;

	for (size_t cut = 0; cut < len; cut++)
		cr_assert_eq(ns_batch_decode(batch, cut, &h, &body), -EMSGSIZE,
			     "cut %zu", cut);
}

Test(batch6, a_bad_ipv6_record_fails_the_whole_batch)
{
	size_t len = build_mixed(batch, 3, 0);
	struct ns_batch_hdr h;
	const uint8_t *body;

	/* record 1 is NAT64 at 48 + 96: its prefix length */
	batch[NS_BATCH_HDR_LEN + 96 + 72] = 80;
	cr_assert_eq(ns_batch_decode(batch, len, &h, &body), -EINVAL);
	len = build_mixed(batch, 3, 0);
	/* NAT66's family byte made NAT64: lengths no longer add up */
	batch[NS_BATCH_HDR_LEN + 1] = NS_FAMILY_NAT64;
	cr_assert_eq(ns_batch_decode(batch, len, &h, &body), -EINVAL);
	len = build_mixed(batch, 3, 0);
	batch[NS_BATCH_HDR_LEN + 1] = 5; /* unknown family */
	cr_assert_eq(ns_batch_decode(batch, len, &h, &body), -EINVAL);
}
