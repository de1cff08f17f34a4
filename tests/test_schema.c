/*
 * test_schema.c - the schema module as a specification: record, key,
 * channel and batch formats, byte for byte, and every input a decoder must
 * refuse. No servers; the slot functions are checked against a real
 * cluster in test_slot_keyslot.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nst_crc16.h"
#include "nst_session.h"

#define IP(a, b, c, d) \
	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* A TCP session from 10.0.0.1:40000 to 93.184.216.34:443, translated to
 * 198.51.100.7:1025. */
static struct ns_session known_session(void)
{
	struct ns_session s = nst_session(6, NS_EV_CREATE, 7, 3, 30000,
					  1700000000123456789ull);

	s.orig = (struct ns_tuple){IP(10, 0, 0, 1), IP(93, 184, 216, 34), 40000,
				   443};
	s.xlat = (struct ns_tuple){IP(198, 51, 100, 7), IP(93, 184, 216, 34),
				   1025, 443};
	return s;
}

static const uint8_t known_wire[NS_RECORD_V1_IPV4_LEN] = {
	0x01, 0x04, 0x06, 0x01, /* v, fam, proto, ev */
	0x00, 0x00, 0x00, 0x07, /* gateway_id */
	0x00, 0x00, 0x00, 0x03, /* epoch */
	0x00, 0x00, 0x75, 0x30, /* timeout_ms */
	0x17, 0x97, 0x9c, 0xfe, 0x3d, 0x85, 0xcd, 0x15, /* timestamp_ns */
	10,   0,    0,	  1, /* orig saddr */
	93,   184,  216,  34, /* orig daddr */
	0x9c, 0x40, 0x01, 0xbb, /* orig ports */
	198,  51,   100,  7, /* xlat saddr */
	93,   184,  216,  34, /* xlat daddr */
	0x04, 0x01, 0x01, 0xbb, /* xlat ports */
};

static void assert_sessions_equal(const struct ns_session *a,
				  const struct ns_session *b)
{
	cr_assert(ns_session_equal_state(a, b));
	cr_assert_eq(a->event, b->event);
}

/* ---- record ---- */

Test(record, encode_writes_the_documented_bytes)
{
	struct ns_session s = known_session();
	uint8_t buf[64];

	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)),
		     NS_RECORD_V1_IPV4_LEN);
	cr_assert_arr_eq(buf, known_wire, sizeof(known_wire));
}

Test(record, decode_of_encode_round_trips_every_event)
{
	for (uint8_t ev = NS_EV_CREATE; ev <= NS_EV_DELETE; ev++) {
		struct ns_session s = known_session(), d;
		uint8_t buf[NS_RECORD_MAX_LEN];

		s.event = ev;
		s.timestamp_ns = UINT64_MAX - ev;
		s.orig.sport = 0xffff;
		cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)),
			     NS_RECORD_V1_IPV4_LEN);
		cr_assert_eq(ns_record_decode(buf, sizeof(buf), &d),
			     NS_RECORD_V1_IPV4_LEN);
		assert_sessions_equal(&s, &d);
	}
}

Test(record, decode_zeroes_reserved_and_ignores_trailing_bytes)
{
	struct ns_session d;
	uint8_t buf[NS_RECORD_V1_IPV4_LEN + 5];

	memcpy(buf, known_wire, sizeof(known_wire));
	memset(buf + NS_RECORD_V1_IPV4_LEN, 0xaa, 5);
	memset(&d, 0x55, sizeof(d));
	cr_assert_eq(ns_record_decode(buf, sizeof(buf), &d),
		     NS_RECORD_V1_IPV4_LEN);
	for (size_t i = 0; i < sizeof(d.reserved); i++)
		cr_assert_eq(d.reserved[i], 0);
}

/* The standby's decode (both lines): an IPv4 record sets the head and
 * leaves its reserved bytes and the unused second line zero, whatever the
 * buffer held before. */
Test(record, decode_rec_of_ipv4_zeroes_reserved_and_the_second_line)
{
	static const uint8_t zero[sizeof(struct ns_session_v6)];
	struct ns_session want;
	struct ns_rec d;

	memset(&d, 0x55, sizeof(d));
	cr_assert_eq(ns_record_decode(known_wire, sizeof(known_wire), &want),
		     NS_RECORD_V1_IPV4_LEN);
	cr_assert_eq(ns_record_decode_rec(known_wire, sizeof(known_wire), &d),
		     NS_RECORD_V1_IPV4_LEN);
	cr_assert_arr_eq(&d.s, &want, sizeof(want));
	for (size_t i = 0; i < sizeof(d.s.reserved); i++)
		cr_assert_eq(d.s.reserved[i], 0);
	cr_assert_arr_eq(&d.v6, zero, sizeof(zero));
}

Test(record, encode_rejects_small_buffer)
{
	struct ns_session s = known_session();
	uint8_t buf[NS_RECORD_V1_IPV4_LEN];

	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf) - 1), -ENOSPC);
	cr_assert_eq(ns_record_encode(&s, buf, 0), -ENOSPC);
}

Test(record, encode_rejects_what_decode_would_refuse)
{
	struct ns_session s;
	uint8_t buf[64];

	s = known_session();
	s.version = 2;
	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)), -EINVAL);
	s = known_session();
	s.family = 5;
	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)), -EINVAL);
	s = known_session();
	s.event = 0;
	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)), -EINVAL);
	s.event = 4;
	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)), -EINVAL);
	s = known_session();
	s.proto = 0;
	cr_assert_eq(ns_record_encode(&s, buf, sizeof(buf)), -EINVAL);
}

Test(record, decode_rejects_every_truncation)
{
	struct ns_session d;

	for (size_t len = 0; len < NS_RECORD_V1_IPV4_LEN; len++)
		cr_assert_eq(ns_record_decode(known_wire, len, &d), -EMSGSIZE,
			     "length %zu", len);
}

/* Assert that the known record with byte at changed to each of values[0..n)
 * does not decode, with err. */
static void assert_decode_fails(size_t at, const uint8_t *values, size_t n,
				int err)
{
	uint8_t buf[NS_RECORD_V1_IPV4_LEN];
	struct ns_session d;

	memcpy(buf, known_wire, sizeof(buf));
	for (size_t i = 0; i < n; i++) {
		buf[at] = values[i];
		cr_assert_eq(ns_record_decode(buf, sizeof(buf), &d), err,
			     "byte %zu = %u", at, values[i]);
	}
}

Test(record, decode_rejects_wrong_version)
{
	assert_decode_fails(0, (const uint8_t[]){0, 2}, 2, -EPROTO);
}

Test(record, decode_rejects_unknown_family)
{
	assert_decode_fails(1, (const uint8_t[]){0, 5, 46, 65, 0xff}, 5,
			    -EAFNOSUPPORT);
}

Test(record, decode_rejects_bad_event)
{
	assert_decode_fails(3, (const uint8_t[]){0, 4, 0xff}, 3, -EINVAL);
}

Test(record, decode_rejects_zero_proto)
{
	assert_decode_fails(2, (const uint8_t[]){0}, 1, -EINVAL);
}

Test(record, decode_leaves_output_untouched_on_error)
{
	struct ns_session d, before;
	uint8_t buf[NS_RECORD_V1_IPV4_LEN];

	memcpy(buf, known_wire, sizeof(buf));
	buf[3] = 9;
	memset(&d, 0x5a, sizeof(d));
	before = d;
	cr_assert_lt(ns_record_decode(buf, sizeof(buf), &d), 0);
	cr_assert_arr_eq(&d, &before, sizeof(d));
}

Test(record, wire_len_is_known_for_ipv4_nat66_and_nat64_only)
{
	cr_assert_eq(ns_record_wire_len(NS_FAMILY_IPV4), 48);
	cr_assert_eq(ns_record_wire_len(NS_FAMILY_NAT66), 96);
	cr_assert_eq(ns_record_wire_len(NS_FAMILY_NAT64), 76);
	cr_assert_eq(ns_record_wire_len(0), 0);
	cr_assert_eq(ns_record_wire_len(5), 0);
	cr_assert_eq(ns_record_wire_len(46), 0);
}

Test(record, event_names)
{
	cr_assert_str_eq(ns_event_name(NS_EV_CREATE), "create");
	cr_assert_str_eq(ns_event_name(NS_EV_REFRESH), "refresh");
	cr_assert_str_eq(ns_event_name(NS_EV_DELETE), "delete");
	cr_assert_null(ns_event_name(0));
	cr_assert_null(ns_event_name(4));
}

static const char known_json[] =
	"{\"version\":1,\"family\":4,\"event\":\"create\",\"proto\":6,"
	"\"gateway_id\":7,\"epoch\":3,\"timeout_ms\":30000,"
	"\"timestamp_ns\":1700000000123456789,"
	"\"orig_saddr\":\"10.0.0.1\",\"orig_daddr\":\"93.184.216.34\","
	"\"orig_sport\":40000,\"orig_dport\":443,"
	"\"new_saddr\":\"198.51.100.7\",\"new_daddr\":\"93.184.216.34\","
	"\"new_sport\":1025,\"new_dport\":443}";

Test(record, json_of_known_record_is_exact)
{
	struct ns_session s = known_session();
	char buf[512];

	cr_assert_eq(ns_record_to_json(&s, buf, sizeof(buf)),
		     (int)strlen(known_json));
	cr_assert_str_eq(buf, known_json);
}

Test(record, json_rejects_small_buffer)
{
	struct ns_session s = known_session();
	char buf[512];
	size_t need = strlen(known_json);

	cr_assert_eq(ns_record_to_json(&s, buf, need), -ENOSPC);
	cr_assert_eq(ns_record_to_json(&s, buf, need + 1), (int)need);
}

Test(record, json_shows_unknown_event_as_number)
{
	struct ns_session s = known_session();
	char buf[512];

	s.event = 9;
	cr_assert_gt(ns_record_to_json(&s, buf, sizeof(buf)), 0);
	cr_assert_not_null(strstr(buf, "\"event\":9,"));
}

Test(record, same_flow_compares_proto_and_orig_only)
{
	struct ns_session a = known_session(), b = known_session();

	b.event = NS_EV_DELETE;
	b.xlat.sport = 2000;
	b.epoch = 99;
	cr_assert(ns_session_same_flow(&a, &b));
	b.orig.dport = 80;
	cr_assert_not(ns_session_same_flow(&a, &b));
	b = known_session();
	b.proto = 17;
	cr_assert_not(ns_session_same_flow(&a, &b));
}

Test(record, equal_state_ignores_event_but_not_timestamp)
{
	struct ns_session a = known_session(), b = known_session();

	b.event = NS_EV_REFRESH;
	b.reserved[0] = 1;
	cr_assert(ns_session_equal_state(&a, &b));
	b.timestamp_ns++;
	cr_assert_not(ns_session_equal_state(&a, &b));
	b = known_session();
	b.timeout_ms = 1;
	cr_assert_not(ns_session_equal_state(&a, &b));
	b = known_session();
	b.gateway_id = 8;
	cr_assert_not(ns_session_equal_state(&a, &b));
	b = known_session();
	b.xlat.saddr++;
	cr_assert_not(ns_session_equal_state(&a, &b));
}

/* ---- slots, keys, channels ---- */

static uint16_t slot_of(const char *key)
{
	return ns_key_slot(key, strlen(key));
}

Test(slot, crc16_matches_xmodem_vectors)
{
	cr_assert_eq(ns_crc16("123456789", 9), 0x31c3);
	cr_assert_eq(ns_crc16("", 0), 0);
	cr_assert_eq(ns_crc16("A", 1), 0x58e5);
}

/* Eight bytes at a time must give what one at a time gives, at every
 * length (the 8-byte steps and the tail) and alignment. */
Test(slot, crc16_by_eight_matches_the_polynomial)
{
	uint8_t buf[136];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len + off <= 128; len++)
			cr_assert_eq(ns_crc16(buf + off, len),
				     nst_crc16_bitwise(buf + off, len),
				     "offset %zu length %zu", off, len);
	memset(buf, 0xff, sizeof(buf));
	cr_assert_eq(ns_crc16(buf, 64), nst_crc16_bitwise(buf, 64));
}

Test(slot, key_slot_matches_cluster_spec_examples)
{
	/* Values from CLUSTER KEYSLOT. */
	cr_assert_eq(slot_of("foo"), 12182);
	cr_assert_eq(slot_of("bar"), 5061);
	cr_assert_eq(slot_of("somekey"), 11058);
	cr_assert_eq(slot_of(""), 0);
}

Test(slot, hash_tag_puts_keys_in_one_slot)
{
	cr_assert_eq(slot_of("{user1000}.following"),
		     slot_of("{user1000}.followers"));
	cr_assert_eq(slot_of("{user1000}.following"), slot_of("user1000"));
	cr_assert_eq(slot_of("x{user1000}y{z}"), slot_of("user1000"));
}

Test(slot, empty_hash_tag_hashes_whole_key)
{
	cr_assert_eq(slot_of("foo{}{bar}"),
		     ns_crc16("foo{}{bar}", 10) & (NS_SLOTS - 1));
	cr_assert_eq(slot_of("{}"), ns_crc16("{}", 2) & (NS_SLOTS - 1));
}

Test(slot, hash_tag_ends_at_first_closing_brace)
{
	cr_assert_eq(slot_of("foo{{bar}}zap"), slot_of("{bar"));
	cr_assert_eq(slot_of("foo{{bar}}zap"),
		     ns_crc16("{bar", 4) & (NS_SLOTS - 1));
	cr_assert_eq(slot_of("foo{bar}{zap}"), slot_of("bar"));
}

Test(slot, unclosed_brace_hashes_whole_key)
{
	cr_assert_eq(slot_of("foo{bar"), ns_crc16("foo{bar", 7) & 16383);
	cr_assert_eq(slot_of("}foo{bar"), ns_crc16("}foo{bar", 8) & 16383);
}

Test(slot, key_slot_handles_binary_keys)
{
	const uint8_t key[] = {'a', 0, '{', 0, 0xff, '}', 'b'};
	const uint8_t tag[] = {0, 0xff};

	cr_assert_eq(ns_key_slot(key, sizeof(key)),
		     ns_crc16(tag, sizeof(tag)) & 16383);
}

Test(key, build_writes_prefix_proto_and_tuple_in_network_order)
{
	struct ns_tuple t = {IP(10, 0, 0, 1), IP(93, 184, 216, 34), 40000, 443};
	const uint8_t want[NS_KEY_LEN] = {'n', 's', ':',  6,	10, 0,
					  0,   1,   0x9c, 0x40, 93, 184,
					  216, 34,  0x01, 0xbb};
	uint8_t key[NS_KEY_LEN];

	ns_key_build(6, &t, key);
	cr_assert_arr_eq(key, want, NS_KEY_LEN);
}

Test(key, parse_of_build_round_trips)
{
	uint32_t x = 12345;

	for (int i = 0; i < 1000; i++) {
		struct ns_tuple t, p;
		uint8_t key[NS_KEY_LEN], proto;

		x = x * 1103515245u + 12345u;
		t.saddr = x;
		t.daddr = x * 2654435761u;
		t.sport = (uint16_t)(x >> 7);
		t.dport = (uint16_t)(x >> 13);
		ns_key_build((uint8_t)(1 + i % 255), &t, key);
		cr_assert_eq(ns_key_parse(key, sizeof(key), &proto, &p), 0);
		cr_assert_eq(proto, 1 + i % 255);
		cr_assert_eq(p.saddr, t.saddr);
		cr_assert_eq(p.daddr, t.daddr);
		cr_assert_eq(p.sport, t.sport);
		cr_assert_eq(p.dport, t.dport);
	}
}

Test(key, parse_rejects_foreign_keys)
{
	struct ns_tuple t = {1, 2, 3, 4}, p;
	uint8_t key[NS_KEY_LEN + 1], proto;

	ns_key_build(17, &t, key);
	cr_assert_eq(ns_key_parse(key, NS_KEY_LEN - 1, &proto, &p), -EINVAL);
	cr_assert_eq(ns_key_parse(key, NS_KEY_LEN + 1, &proto, &p), -EINVAL);
	cr_assert_eq(ns_key_parse("ns:b:{0}", 8, &proto, &p), -EINVAL);
	key[0] = 'N';
	cr_assert_eq(ns_key_parse(key, NS_KEY_LEN, &proto, &p), -EINVAL);
	key[0] = 'n';
	key[3] = 0;
	cr_assert_eq(ns_key_parse(key, NS_KEY_LEN, &proto, &p), -EINVAL);
}

Test(channel, every_slot_has_a_channel_in_that_slot)
{
	char buf[NS_CHANNEL_MAX];

	for (uint32_t slot = 0; slot < NS_SLOTS; slot++) {
		int n = ns_channel_for_slot((uint16_t)slot, buf);

		cr_assert_gt(n, 0);
		cr_assert_lt(n, NS_CHANNEL_MAX);
		cr_assert_eq((size_t)n, strlen(buf));
		cr_assert_eq(strncmp(buf, "ns:b:{", 6), 0, "%s", buf);
		cr_assert_eq(ns_key_slot(buf, (size_t)n), slot, "%s", buf);
	}
}

Test(channel, channel_number_is_the_smallest_for_its_slot)
{
	char buf[NS_CHANNEL_MAX], num[16];

	for (uint32_t slot = 0; slot < NS_SLOTS; slot += 97) {
		unsigned int n;

		ns_channel_for_slot((uint16_t)slot, buf);
		cr_assert_eq(sscanf(buf, "ns:b:{%u}", &n), 1);
		for (unsigned int m = 0; m < n; m++) {
			int len = snprintf(num, sizeof(num), "%u", m);

			cr_assert_neq(ns_crc16(num, (size_t)len) % NS_SLOTS,
				      slot, "%u < %u has slot %u", m, n, slot);
		}
	}
	/* "0" is the first number tried, so its slot maps to it. */
	ns_channel_for_slot(ns_crc16("0", 1) % NS_SLOTS, buf);
	cr_assert_str_eq(buf, "ns:b:{0}");
}

Test(channel, rejects_slot_out_of_range)
{
	char buf[NS_CHANNEL_MAX];

	cr_assert_eq(ns_channel_for_slot(NS_SLOTS, buf), -EINVAL);
	cr_assert_eq(ns_channel_for_slot(UINT16_MAX, buf), -EINVAL);
}

/* ---- batch ---- */

/* Build a valid batch of version v (0: the current one) and count records
 * into buf; returns its length. */
static size_t build_batch_v(uint8_t *buf, uint16_t count, uint64_t seq,
			    uint8_t v)
{
	struct ns_batch_hdr h = {
		.publisher_id = 0x01020304,
		.gateway_id = 7,
		.epoch = 3,
		.count = count,
		.seq = seq,
		.version = v,
		.channel_slot = v == NS_BATCH_V1 ? 0 : 0x1234,
		.sent_ns = v == NS_BATCH_V1 ? 0 : 1700000000123456789ull};
	const size_t hdr_len = ns_batch_hdr_len(v);
	size_t off = hdr_len;

	for (uint16_t i = 0; i < count; i++) {
		struct ns_session s = known_session();

		s.orig.sport = (uint16_t)(1000 + i);
		s.event = (uint8_t)(NS_EV_CREATE + i % 3);
		off += (size_t)ns_record_encode(&s, buf + off,
						NS_BATCH_MAX_LEN - off);
	}
	h.body_len = (uint32_t)(off - hdr_len);
	cr_assert_eq(ns_batch_hdr_encode(&h, buf), hdr_len);
	return off;
}

static size_t build_batch(uint8_t *buf, uint16_t count, uint64_t seq)
{
	return build_batch_v(buf, count, seq, 0);
}

static uint8_t batch_buf[NS_BATCH_MAX_LEN + 64];

Test(batch, header_encodes_the_documented_bytes)
{
	const uint8_t want[NS_BATCH_HDR_LEN] = {
		0x4e, 0x53, 0x42, 0x31, 0x02, 0x00, 0x00, 0x02, 0x01, 0x02,
		0x03, 0x04, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x03,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00,
		0x00, 0x60, 0x17, 0x97, 0x9c, 0xfe, 0x3d, 0x85, 0xcd, 0x15,
		0x12, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

	cr_assert_eq(build_batch(batch_buf, 2, 0x100000009ull),
		     NS_BATCH_HDR_LEN + 2 * NS_RECORD_V1_IPV4_LEN);
	cr_assert_arr_eq(batch_buf, want, NS_BATCH_HDR_LEN);
}

Test(batch, version_1_header_encodes_the_documented_bytes)
{
	const uint8_t want[NS_BATCH_V1_HDR_LEN] = {
		0x4e, 0x53, 0x42, 0x31, 0x01, 0x00, 0x00, 0x02,
		0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x07,
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x60};

	cr_assert_eq(build_batch_v(batch_buf, 2, 0x100000009ull, NS_BATCH_V1),
		     NS_BATCH_V1_HDR_LEN + 2 * NS_RECORD_V1_IPV4_LEN);
	cr_assert_arr_eq(batch_buf, want, NS_BATCH_V1_HDR_LEN);
}

/* Every prefix of the len bytes of batch_buf is refused as truncated. */
static void assert_every_truncation_refused(size_t len)
{
	struct ns_batch_hdr h;
	const uint8_t *body;

	for (size_t cut = 0; cut < len; cut++)
		cr_assert_eq(ns_batch_decode(batch_buf, cut, &h, &body),
			     -EMSGSIZE, "length %zu of %zu", cut, len);
}

Test(batch, version_1_still_decodes_without_channel_or_time)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch_v(batch_buf, 3, 5, NS_BATCH_V1);

	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	cr_assert_eq(h.version, NS_BATCH_V1);
	cr_assert_eq(h.count, 3);
	cr_assert_eq(h.seq, 5);
	cr_assert_eq(h.channel_slot, 0);
	cr_assert_eq(h.sent_ns, 0);
	cr_assert_eq(body, batch_buf + NS_BATCH_V1_HDR_LEN);
	assert_every_truncation_refused(len);
}

Test(batch, decode_rejects_reserved_bytes)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 1, 1);

	for (size_t i = 42; i < NS_BATCH_HDR_LEN; i++) {
		batch_buf[i] = 1;
		cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body),
			     -EPROTO, "reserved byte %zu", i);
		batch_buf[i] = 0;
	}
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
}

Test(batch, decode_and_iterate_round_trip)
{
	struct ns_batch_hdr h;
	struct ns_batch_iter it;
	struct ns_session s;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 100, 42);
	int n = 0, rc;

	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	cr_assert_eq(h.publisher_id, 0x01020304);
	cr_assert_eq(h.gateway_id, 7);
	cr_assert_eq(h.epoch, 3);
	cr_assert_eq(h.count, 100);
	cr_assert_eq(h.flags, 0);
	cr_assert_eq(h.seq, 42);
	cr_assert_eq(h.body_len, 100 * NS_RECORD_V1_IPV4_LEN);
	cr_assert_eq(h.version, NS_BATCH_VERSION);
	cr_assert_eq(h.channel_slot, 0x1234);
	cr_assert_eq(h.sent_ns, 1700000000123456789ull);
	cr_assert_eq(body, batch_buf + NS_BATCH_HDR_LEN);

	ns_batch_iter_init(&it, body, h.body_len);
	while ((rc = ns_batch_iter_next(&it, &s)) == 1) {
		cr_assert_eq(s.orig.sport, 1000 + n);
		cr_assert_eq(s.event, NS_EV_CREATE + n % 3);
		n++;
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(n, 100);
	cr_assert_eq(ns_batch_iter_next(&it, &s), 0);
}

Test(batch, decode_accepts_empty_and_full_batches)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len;

	len = build_batch(batch_buf, 0, 1);
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	cr_assert_eq(h.count, 0);
	len = build_batch(batch_buf, NS_BATCH_MAX_RECORDS, 2);
	cr_assert_eq(len, NS_BATCH_HDR_LEN +
				  NS_BATCH_MAX_RECORDS * NS_RECORD_V1_IPV4_LEN);
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	cr_assert_eq(h.count, NS_BATCH_MAX_RECORDS);
}

Test(batch, decode_rejects_every_truncation)
{
	size_t len = build_batch(batch_buf, 3, 1);

	assert_every_truncation_refused(len);
}

Test(batch, decode_rejects_trailing_bytes)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 3, 1);

	batch_buf[len] = 0;
	cr_assert_eq(ns_batch_decode(batch_buf, len + 1, &h, &body), -EINVAL);
	cr_assert_eq(ns_batch_decode(batch_buf, len + NS_RECORD_V1_IPV4_LEN, &h,
				     &body),
		     -EINVAL);
}

Test(batch, decode_rejects_wrong_magic)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 1, 1);

	batch_buf[3] = '2';
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EBADMSG);
}

Test(batch, decode_rejects_wrong_version_and_unknown_flags)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 1, 1);

	batch_buf[4] = 3;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EPROTO);
	batch_buf[4] = 0;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EPROTO);
	batch_buf[4] = NS_BATCH_VERSION;
	batch_buf[5] = 0x10;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EPROTO);
	/* A rewrite is neither a correction nor a resync request. */
	batch_buf[5] = NS_BATCH_F_REWRITE | NS_BATCH_F_STORE;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EPROTO);
	batch_buf[5] = NS_BATCH_F_REWRITE;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	/* RESYNC carries no records. */
	batch_buf[5] = NS_BATCH_F_RESYNC;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EPROTO);
	/* The HMAC flag without its trailer: the body looks truncated. */
	batch_buf[5] = NS_BATCH_F_HMAC;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EMSGSIZE);
}

/* Sign a batch built by build_batch() in place: set the flag, append the
 * trailer; returns the new length. */
static size_t sign_batch(uint8_t *buf, size_t len, const char *key)
{
	buf[5] |= NS_BATCH_F_HMAC;
	cr_assert_eq(ns_batch_mac((const uint8_t *)key, strlen(key), buf, len,
				  buf + len),
		     0);
	return len + NS_BATCH_MAC_LEN;
}

Test(batch, signed_batch_decodes_and_verifies_with_its_key_only)
{
	static const char key[] = "a shared batch key";
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = sign_batch(batch_buf, build_batch(batch_buf, 5, 9), key);

	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
	cr_assert_eq(h.count, 5);
	cr_assert_eq(h.flags, NS_BATCH_F_HMAC);
	cr_assert_eq(h.body_len, len - NS_BATCH_HDR_LEN - NS_BATCH_MAC_LEN);
	cr_assert_eq(ns_batch_verify(batch_buf, len, (const uint8_t *)key,
				     strlen(key)),
		     0);
	cr_assert_eq(ns_batch_verify(batch_buf, len,
				     (const uint8_t *)"another key", 11),
		     -EACCES);
}

Test(batch, verify_rejects_altered_and_unsigned_batches)
{
	static const char key[] = "k";
	size_t plain = build_batch(batch_buf, 3, 1);
	size_t len;

	cr_assert_eq(ns_batch_verify(batch_buf, plain, (const uint8_t *)key, 1),
		     -EACCES, "an unsigned batch does not verify");
	len = sign_batch(batch_buf, plain, key);
	for (size_t i = 0; i < len; i++) {
		batch_buf[i] ^= 0x40;
		cr_assert_eq(ns_batch_verify(batch_buf, len,
					     (const uint8_t *)key, 1),
			     -EACCES, "byte %zu altered", i);
		batch_buf[i] ^= 0x40;
	}
	cr_assert_eq(ns_batch_verify(batch_buf, len, (const uint8_t *)key, 1),
		     0);
	cr_assert_eq(ns_batch_mac(NULL, 0, batch_buf, plain, batch_buf),
		     -EINVAL);
}

Test(batch, decode_rejects_oversized_count)
{
	struct ns_batch_hdr h = {.count = NS_BATCH_MAX_RECORDS + 1};
	const uint8_t *body;

	ns_batch_hdr_encode(&h, batch_buf);
	cr_assert_eq(ns_batch_decode(batch_buf, NS_BATCH_HDR_LEN, &h, &body),
		     -EMSGSIZE);
}

Test(batch, decode_rejects_oversized_batch)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, NS_BATCH_MAX_RECORDS, 1);

	/* One more record than the maximum, with a consistent header. */
	memcpy(batch_buf + len, batch_buf + NS_BATCH_HDR_LEN,
	       NS_RECORD_V1_IPV4_LEN);
	h = (struct ns_batch_hdr){.count = NS_BATCH_MAX_RECORDS + 1,
				  .body_len = (uint32_t)(len +
							 NS_RECORD_V1_IPV4_LEN -
							 NS_BATCH_HDR_LEN)};
	ns_batch_hdr_encode(&h, batch_buf);
	cr_assert_eq(ns_batch_decode(batch_buf, len + NS_RECORD_V1_IPV4_LEN, &h,
				     &body),
		     -EMSGSIZE);
	/* More bytes than the largest batch (4096 NAT66 records, signed). */
	cr_assert_eq(
		ns_batch_decode(batch_buf, NS_BATCH_MAX_LEN + 1, &h, &body),
		-EMSGSIZE);
}

static void set_count(uint8_t *buf, uint16_t count)
{
	buf[6] = (uint8_t)(count >> 8);
	buf[7] = (uint8_t)count;
}

static void set_body_len(uint8_t *buf, uint32_t body_len)
{
	buf[28] = (uint8_t)(body_len >> 24);
	buf[29] = (uint8_t)(body_len >> 16);
	buf[30] = (uint8_t)(body_len >> 8);
	buf[31] = (uint8_t)body_len;
}

Test(batch, decode_rejects_count_that_disagrees_with_body)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 3, 1);

	set_count(batch_buf, 2);
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
	set_count(batch_buf, 4);
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
	set_count(batch_buf, 0);
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
}

Test(batch, decode_rejects_body_len_that_cuts_a_record)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 3, 1);

	/* Header and length agree, but the last record is cut short. */
	set_body_len(batch_buf, (uint32_t)(len - NS_BATCH_HDR_LEN - 1));
	cr_assert_eq(ns_batch_decode(batch_buf, len - 1, &h, &body), -EINVAL);
	/* body_len larger than what was received. */
	set_body_len(batch_buf, (uint32_t)(len - NS_BATCH_HDR_LEN + 1));
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EMSGSIZE);
}

Test(batch, decode_rejects_a_bad_record)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	size_t len = build_batch(batch_buf, 3, 1);
	uint8_t *second = batch_buf + NS_BATCH_HDR_LEN + NS_RECORD_V1_IPV4_LEN;

	second[3] = 0; /* bad event */
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
	second[3] = NS_EV_CREATE;
	second[0] = 2; /* unknown record version */
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
	second[0] = NS_RECORD_VERSION;
	second[1] = 6; /* unknown family */
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), -EINVAL);
	second[1] = NS_FAMILY_IPV4;
	cr_assert_eq(ns_batch_decode(batch_buf, len, &h, &body), 0);
}

Test(batch, iterator_reports_a_bad_record)
{
	struct ns_batch_iter it;
	struct ns_session s;
	size_t len = build_batch(batch_buf, 2, 1);

	batch_buf[NS_BATCH_HDR_LEN + NS_RECORD_V1_IPV4_LEN + 2] = 0;
	ns_batch_iter_init(&it, batch_buf + NS_BATCH_HDR_LEN,
			   (uint32_t)(len - NS_BATCH_HDR_LEN));
	cr_assert_eq(ns_batch_iter_next(&it, &s), 1);
	cr_assert_eq(ns_batch_iter_next(&it, &s), -EINVAL);
}
