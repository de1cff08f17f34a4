/*
 * ns_record.c - the session record's wire form (v1) and its JSON form.
 *
 * The wire form is fixed-size per (version, family) and in network byte
 * order, so a record can be copied, compared and stored without parsing;
 * schema/FORMAT.md documents every byte. Encoding runs once per record on
 * the agent's hot path (a million records a second), so it does no
 * allocation and no formatting, only bounds checks and byte stores.
 *
 * Invariants: encode never writes a record decode would refuse; decode
 * validates every field it can before it writes *out, so a caller never
 * sees a half-decoded session.
 *
 * Not here: keys and slots (ns_slot.c), batches (ns_batch.c), any policy
 * about which record wins (the standby's table decides with gateway id and
 * epoch).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ns_record.h"
#include "ns_wire.h"

/* Byte offsets of the v1 IPv4 wire form. */
enum {
	OFF_VERSION = 0,
	OFF_FAMILY = 1,
	OFF_PROTO = 2,
	OFF_EVENT = 3,
	OFF_GATEWAY_ID = 4,
	OFF_EPOCH = 8,
	OFF_TIMEOUT_MS = 12,
	OFF_TIMESTAMP_NS = 16,
	OFF_ORIG = 24,
	OFF_XLAT = 36,
	/* within a tuple */
	TUP_SADDR = 0,
	TUP_DADDR = 4,
	TUP_SPORT = 8,
	TUP_DPORT = 10,
};

_Static_assert(OFF_XLAT + 12 == NS_RECORD_V1_IPV4_LEN, "v1 layout");

/* Byte offsets of the IPv6 families after the common 24-byte header. */
enum {
	OFF6_ORIG_SADDR = 24,
	OFF6_ORIG_DADDR = 40,
	OFF6_ORIG_SPORT = 56,
	OFF6_ORIG_DPORT = 58,
	OFF6_XLAT = 60,
	/* NAT66 */
	OFF66_XLAT_SADDR = OFF6_XLAT,
	OFF66_XLAT_DADDR = OFF6_XLAT + 16,
	OFF66_XLAT_SPORT = OFF6_XLAT + 32,
	OFF66_XLAT_DPORT = OFF6_XLAT + 34,
	/* NAT64: an IPv4 tuple as in the IPv4 record, then the prefix */
	OFF64_PREFIX_LEN = OFF6_XLAT + 12,
	OFF64_RESERVED = OFF64_PREFIX_LEN + 1,
	RESERVED64_LEN = 3,
};

_Static_assert(OFF66_XLAT_DPORT + 2 == NS_RECORD_V1_NAT66_LEN, "NAT66");
_Static_assert(OFF64_RESERVED + RESERVED64_LEN == NS_RECORD_V1_NAT64_LEN,
	       "NAT64");

static inline void put_tuple(uint8_t *p, const struct ns_tuple *t)
{
	put32(p + TUP_SADDR, t->saddr);
	put32(p + TUP_DADDR, t->daddr);
	put16(p + TUP_SPORT, t->sport);
	put16(p + TUP_DPORT, t->dport);
}

static inline void get_tuple(const uint8_t *p, struct ns_tuple *t)
{
	t->saddr = get32(p + TUP_SADDR);
	t->daddr = get32(p + TUP_DADDR);
	t->sport = get16(p + TUP_SPORT);
	t->dport = get16(p + TUP_DPORT);
}

static inline int event_known(uint8_t event)
{
	return event >= NS_EV_CREATE && event <= NS_EV_DELETE;
}

size_t ns_record_wire_len(uint8_t family)
{
	switch (family) {
	case NS_FAMILY_IPV4:
		return NS_RECORD_V1_IPV4_LEN;
	case NS_FAMILY_NAT66:
		return NS_RECORD_V1_NAT66_LEN;
	case NS_FAMILY_NAT64:
		return NS_RECORD_V1_NAT64_LEN;
	}
	return 0;
}

/*
 * Where RFC 6052 (section 2.2) puts the IPv4 address in an IPv6 address
 * under a prefix of len bits: byte i of the IPv4 address is at
 * embed_at(len, i); bits 64..71 (byte 8) are skipped. 0 for a length the
 * RFC does not know.
 */
static int prefix_len_known(uint8_t len)
{
	return len == 32 || len == 40 || len == 48 || len == 56 || len == 64 ||
	       len == 96;
}

static unsigned int embed_at(uint8_t len, unsigned int i)
{
	unsigned int at = len / 8u + i;

	return len < 96 && at >= 8 ? at + 1 : at;
}

/* Whether a NAT64 destination embeds daddr4 under a prefix of len bits,
 * with byte 8 (below /96) and the suffix after the address all 0. */
static int nat64_consistent(uint8_t len, const uint8_t daddr6[16],
			    uint32_t daddr4)
{
	uint8_t want[16];
	unsigned int i;

	if (!prefix_len_known(len))
		return 0;
	memcpy(want, daddr6, len / 8u);
	memset(want + len / 8u, 0, 16 - len / 8u);
	for (i = 0; i < 4; i++)
		want[embed_at(len, i)] = (uint8_t)(daddr4 >> (24 - 8 * i));
	return memcmp(want, daddr6, 16) == 0;
}

static int nat64_line_ok(const struct ns_session *s)
{
	const struct ns_session_v6 *v6 = ns_session_v6_of(s);
	static const uint8_t zero[sizeof(v6->zero)];

	return nat64_consistent(v6->prefix_len, v6->orig_daddr,
				s->xlat.daddr) &&
	       memcmp(v6->zero, zero, sizeof(zero)) == 0;
}

static void put_header(uint8_t *buf, const struct ns_session *s)
{
	buf[OFF_VERSION] = s->version;
	buf[OFF_FAMILY] = s->family;
	buf[OFF_PROTO] = s->proto;
	buf[OFF_EVENT] = s->event;
	put32(buf + OFF_GATEWAY_ID, s->gateway_id);
	put32(buf + OFF_EPOCH, s->epoch);
	put32(buf + OFF_TIMEOUT_MS, s->timeout_ms);
	put64(buf + OFF_TIMESTAMP_NS, s->timestamp_ns);
}

static int encode_v6(const struct ns_session *s, uint8_t *buf, size_t cap)
{
	const struct ns_session_v6 *v6 = ns_session_v6_of(s);
	size_t len = ns_record_wire_len(s->family);

	if (s->family == NS_FAMILY_NAT64 && !nat64_line_ok(s))
		return -EINVAL;
	if (cap < len)
		return -ENOSPC;
	put_header(buf, s);
	memcpy(buf + OFF6_ORIG_SADDR, v6->orig_saddr, 16);
	memcpy(buf + OFF6_ORIG_DADDR, v6->orig_daddr, 16);
	put16(buf + OFF6_ORIG_SPORT, s->orig.sport);
	put16(buf + OFF6_ORIG_DPORT, s->orig.dport);
	if (s->family == NS_FAMILY_NAT66) {
		memcpy(buf + OFF66_XLAT_SADDR, v6->xlat_saddr, 16);
		memcpy(buf + OFF66_XLAT_DADDR, v6->xlat_daddr, 16);
		put16(buf + OFF66_XLAT_SPORT, s->xlat.sport);
		put16(buf + OFF66_XLAT_DPORT, s->xlat.dport);
	} else {
		put_tuple(buf + OFF6_XLAT, &s->xlat);
		buf[OFF64_PREFIX_LEN] = v6->prefix_len;
		memset(buf + OFF64_RESERVED, 0, RESERVED64_LEN);
	}
	return (int)len;
}

int ns_record_encode(const struct ns_session *s, uint8_t *buf, size_t cap)
{
	if (s->version != NS_RECORD_VERSION ||
	    ns_record_wire_len(s->family) == 0 || !event_known(s->event) ||
	    s->proto == 0)
		return -EINVAL;
	if (s->family != NS_FAMILY_IPV4)
		return encode_v6(s, buf, cap);
	if (cap < NS_RECORD_V1_IPV4_LEN)
		return -ENOSPC;

	put_header(buf, s);
	put_tuple(buf + OFF_ORIG, &s->orig);
	put_tuple(buf + OFF_XLAT, &s->xlat);
	return NS_RECORD_V1_IPV4_LEN;
}

static void get_header(const uint8_t *buf, struct ns_session *out)
{
	out->version = buf[OFF_VERSION];
	out->family = buf[OFF_FAMILY];
	out->proto = buf[OFF_PROTO];
	out->event = buf[OFF_EVENT];
	out->gateway_id = get32(buf + OFF_GATEWAY_ID);
	out->epoch = get32(buf + OFF_EPOCH);
	out->timeout_ms = get32(buf + OFF_TIMEOUT_MS);
	out->timestamp_ns = get64(buf + OFF_TIMESTAMP_NS);
}

/* The bytes of a record of buf's family are there and valid: decode them
 * into r (both lines). */
static void decode_v6(const uint8_t *buf, struct ns_rec *r)
{
	get_header(buf, &r->s);
	memcpy(r->v6.orig_saddr, buf + OFF6_ORIG_SADDR, 16);
	memcpy(r->v6.orig_daddr, buf + OFF6_ORIG_DADDR, 16);
	r->s.orig.sport = get16(buf + OFF6_ORIG_SPORT);
	r->s.orig.dport = get16(buf + OFF6_ORIG_DPORT);
	if (r->s.family == NS_FAMILY_NAT66) {
		memcpy(r->v6.xlat_saddr, buf + OFF66_XLAT_SADDR, 16);
		memcpy(r->v6.xlat_daddr, buf + OFF66_XLAT_DADDR, 16);
		r->s.xlat.sport = get16(buf + OFF66_XLAT_SPORT);
		r->s.xlat.dport = get16(buf + OFF66_XLAT_DPORT);
	} else {
		get_tuple(buf + OFF6_XLAT, &r->s.xlat);
		r->v6.prefix_len = buf[OFF64_PREFIX_LEN];
	}
}

/* What decode checks before it writes anything: the record's length, or
 * a negative errno. */
static int record_check(const uint8_t *buf, size_t len)
{
	size_t want;

	/* The header bytes decide the length, so check them one at a time:
	 * a short buffer of an unknown version is "wrong version", not
	 * "truncated". */
	if (len < 1)
		return -EMSGSIZE;
	if (buf[OFF_VERSION] != NS_RECORD_VERSION)
		return -EPROTO;
	if (len < 2)
		return -EMSGSIZE;
	want = ns_record_wire_len(buf[OFF_FAMILY]);
	if (want == 0)
		return -EAFNOSUPPORT;
	if (len < want)
		return -EMSGSIZE;
	if (!event_known(buf[OFF_EVENT]) || buf[OFF_PROTO] == 0)
		return -EINVAL;
	if (buf[OFF_FAMILY] == NS_FAMILY_NAT64 &&
	    (!nat64_consistent(buf[OFF64_PREFIX_LEN], buf + OFF6_ORIG_DADDR,
			       get32(buf + OFF6_XLAT + TUP_DADDR)) ||
	     buf[OFF64_RESERVED] != 0 || buf[OFF64_RESERVED + 1] != 0 ||
	     buf[OFF64_RESERVED + 2] != 0))
		return -EINVAL;
	return (int)want;
}

int ns_record_decode(const uint8_t *buf, size_t len, struct ns_session *out)
{
	int rc = record_check(buf, len);

	if (rc < 0)
		return rc;
	if (buf[OFF_FAMILY] != NS_FAMILY_IPV4)
		return -EAFNOSUPPORT;
	memset(out, 0, sizeof(*out));
	get_header(buf, out);
	get_tuple(buf + OFF_ORIG, &out->orig);
	get_tuple(buf + OFF_XLAT, &out->xlat);
	return NS_RECORD_V1_IPV4_LEN;
}

int ns_record_decode_rec(const uint8_t *buf, size_t len, struct ns_rec *out)
{
	int rc = record_check(buf, len);

	if (rc < 0)
		return rc;
	if (buf[OFF_FAMILY] != NS_FAMILY_IPV4) {
		memset(out, 0, sizeof(*out));
		decode_v6(buf, out);
		return rc;
	}
	/* Every other byte of out->s is set below. Zeroing the whole of out
	 * at once compiled to a string store that took half the decode, a
	 * standby's most frequent call. */
	memset(out->s.reserved, 0, sizeof(out->s.reserved));
	memset(&out->v6, 0, sizeof(out->v6));
	get_header(buf, &out->s);
	get_tuple(buf + OFF_ORIG, &out->s.orig);
	get_tuple(buf + OFF_XLAT, &out->s.xlat);
	return rc;
}

const char *ns_event_name(uint8_t event)
{
	switch (event) {
	case NS_EV_CREATE:
		return "create";
	case NS_EV_REFRESH:
		return "refresh";
	case NS_EV_DELETE:
		return "delete";
	}
	return NULL;
}

/* Dotted quad of a host-order IPv4 address; buf holds 16 bytes. */
static const char *ipv4_str(uint32_t a, char buf[16])
{
	snprintf(buf, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff,
		 (a >> 8) & 0xff, a & 0xff);
	return buf;
}

/* The four addresses of s as text, and NAT64's prefix ("" otherwise). */
struct json_addrs {
	char os[INET6_ADDRSTRLEN], od[INET6_ADDRSTRLEN];
	char xs[INET6_ADDRSTRLEN], xd[INET6_ADDRSTRLEN];
	char prefix[INET6_ADDRSTRLEN + 24];
};

static void v6_str(const uint8_t a[16], char *buf)
{
	if (!inet_ntop(AF_INET6, a, buf, INET6_ADDRSTRLEN))
		snprintf(buf, INET6_ADDRSTRLEN, "?");
}

static void json_addrs(const struct ns_session *s, struct json_addrs *a)
{
	const struct ns_session_v6 *v6;
	char text[INET6_ADDRSTRLEN];
	uint8_t prefix[16];

	a->prefix[0] = '\0';
	if (!ns_family_is_v6(s->family)) {
		ipv4_str(s->orig.saddr, a->os);
		ipv4_str(s->orig.daddr, a->od);
		ipv4_str(s->xlat.saddr, a->xs);
		ipv4_str(s->xlat.daddr, a->xd);
		return;
	}
	v6 = ns_session_v6_of(s);
	v6_str(v6->orig_saddr, a->os);
	v6_str(v6->orig_daddr, a->od);
	if (s->family == NS_FAMILY_NAT66) {
		v6_str(v6->xlat_saddr, a->xs);
		v6_str(v6->xlat_daddr, a->xd);
		return;
	}
	ipv4_str(s->xlat.saddr, a->xs);
	ipv4_str(s->xlat.daddr, a->xd);
	memset(prefix, 0, sizeof(prefix));
	memcpy(prefix, v6->orig_daddr,
	       v6->prefix_len / 8u < 16 ? v6->prefix_len / 8u : 16);
	v6_str(prefix, text);
	snprintf(a->prefix, sizeof(a->prefix), ",\"prefix\":\"%s/%u\"", text,
		 v6->prefix_len);
}

int ns_record_to_json(const struct ns_session *s, char *buf, size_t cap)
{
	struct json_addrs a;
	char ev[16];
	const char *name = ns_event_name(s->event);
	int n;

	/* An unknown event is shown as its number (still valid JSON), so a
	 * tool can print whatever it was given. */
	if (name)
		snprintf(ev, sizeof(ev), "\"%s\"", name);
	else
		snprintf(ev, sizeof(ev), "%u", s->event);
	json_addrs(s, &a);

	n = snprintf(buf, cap,
		     "{\"version\":%u,\"family\":%u,\"event\":%s,\"proto\":%u,"
		     "\"gateway_id\":%" PRIu32 ",\"epoch\":%" PRIu32
		     ",\"timeout_ms\":%" PRIu32 ",\"timestamp_ns\":%" PRIu64
		     ",\"orig_saddr\":\"%s\",\"orig_daddr\":\"%s\","
		     "\"orig_sport\":%u,\"orig_dport\":%u,"
		     "\"new_saddr\":\"%s\",\"new_daddr\":\"%s\","
		     "\"new_sport\":%u,\"new_dport\":%u%s}",
		     s->version, s->family, ev, s->proto, s->gateway_id,
		     s->epoch, s->timeout_ms, s->timestamp_ns, a.os, a.od,
		     s->orig.sport, s->orig.dport, a.xs, a.xd, s->xlat.sport,
		     s->xlat.dport, a.prefix);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	return n;
}

/* What the wire form carries of a tuple of family fam: IPv4 addresses
 * only for IPv4 (both tuples) and NAT64 (xlat); the ports always. */
static int tuple_carried_equal(const struct ns_tuple *a,
			       const struct ns_tuple *b, int addrs)
{
	return a->sport == b->sport && a->dport == b->dport &&
	       (!addrs || (a->saddr == b->saddr && a->daddr == b->daddr));
}

int ns_session_same_flow(const struct ns_session *a, const struct ns_session *b)
{
	int v6 = ns_family_is_v6(a->family);

	if (a->proto != b->proto || v6 != ns_family_is_v6(b->family) ||
	    !tuple_carried_equal(&a->orig, &b->orig, !v6))
		return 0;
	return !v6 ||
	       memcmp(ns_session_v6_of(a), ns_session_v6_of(b), 2 * 16) == 0;
}

int ns_session_equal_state(const struct ns_session *a,
			   const struct ns_session *b)
{
	int v6 = ns_family_is_v6(a->family);

	return a->version == b->version && a->family == b->family &&
	       a->proto == b->proto && a->gateway_id == b->gateway_id &&
	       a->epoch == b->epoch && a->timeout_ms == b->timeout_ms &&
	       a->timestamp_ns == b->timestamp_ns &&
	       tuple_carried_equal(&a->orig, &b->orig, !v6) &&
	       tuple_carried_equal(&a->xlat, &b->xlat,
				   a->family != NS_FAMILY_NAT66) &&
	       (!v6 || memcmp(ns_session_v6_of(a), ns_session_v6_of(b),
			      sizeof(struct ns_session_v6)) == 0);
}
