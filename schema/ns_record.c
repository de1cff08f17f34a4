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
	return family == NS_FAMILY_IPV4 ? NS_RECORD_V1_IPV4_LEN : 0;
}

int ns_record_encode(const struct ns_session *s, uint8_t *buf, size_t cap)
{
	if (s->version != NS_RECORD_VERSION || s->family != NS_FAMILY_IPV4 ||
	    !event_known(s->event) || s->proto == 0)
		return -EINVAL;
	if (cap < NS_RECORD_V1_IPV4_LEN)
		return -ENOSPC;

	buf[OFF_VERSION] = s->version;
	buf[OFF_FAMILY] = s->family;
	buf[OFF_PROTO] = s->proto;
	buf[OFF_EVENT] = s->event;
	put32(buf + OFF_GATEWAY_ID, s->gateway_id);
	put32(buf + OFF_EPOCH, s->epoch);
	put32(buf + OFF_TIMEOUT_MS, s->timeout_ms);
	put64(buf + OFF_TIMESTAMP_NS, s->timestamp_ns);
	put_tuple(buf + OFF_ORIG, &s->orig);
	put_tuple(buf + OFF_XLAT, &s->xlat);
	return NS_RECORD_V1_IPV4_LEN;
}

int ns_record_decode(const uint8_t *buf, size_t len, struct ns_session *out)
{
	/* The header bytes decide the length, so check them one at a time:
	 * a short buffer of an unknown version is "wrong version", not
	 * "truncated". */
	if (len < 1)
		return -EMSGSIZE;
	if (buf[OFF_VERSION] != NS_RECORD_VERSION)
		return -EPROTO;
	if (len < 2)
		return -EMSGSIZE;
	if (ns_record_wire_len(buf[OFF_FAMILY]) == 0)
		return -EAFNOSUPPORT;
	if (len < NS_RECORD_V1_IPV4_LEN)
		return -EMSGSIZE;
	if (!event_known(buf[OFF_EVENT]) || buf[OFF_PROTO] == 0)
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	out->version = buf[OFF_VERSION];
	out->family = buf[OFF_FAMILY];
	out->proto = buf[OFF_PROTO];
	out->event = buf[OFF_EVENT];
	out->gateway_id = get32(buf + OFF_GATEWAY_ID);
	out->epoch = get32(buf + OFF_EPOCH);
	out->timeout_ms = get32(buf + OFF_TIMEOUT_MS);
	out->timestamp_ns = get64(buf + OFF_TIMESTAMP_NS);
	get_tuple(buf + OFF_ORIG, &out->orig);
	get_tuple(buf + OFF_XLAT, &out->xlat);
	return NS_RECORD_V1_IPV4_LEN;
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

int ns_record_to_json(const struct ns_session *s, char *buf, size_t cap)
{
	char os[16], od[16], xs[16], xd[16], ev[16];
	const char *name = ns_event_name(s->event);
	int n;

	/* An unknown event is shown as its number (still valid JSON), so a
	 * tool can print whatever it was given. */
	if (name)
		snprintf(ev, sizeof(ev), "\"%s\"", name);
	else
		snprintf(ev, sizeof(ev), "%u", s->event);

	n = snprintf(buf, cap,
		     "{\"version\":%u,\"family\":%u,\"event\":%s,\"proto\":%u,"
		     "\"gateway_id\":%" PRIu32 ",\"epoch\":%" PRIu32
		     ",\"timeout_ms\":%" PRIu32 ",\"timestamp_ns\":%" PRIu64
		     ",\"orig_saddr\":\"%s\",\"orig_daddr\":\"%s\","
		     "\"orig_sport\":%u,\"orig_dport\":%u,"
		     "\"new_saddr\":\"%s\",\"new_daddr\":\"%s\","
		     "\"new_sport\":%u,\"new_dport\":%u}",
		     s->version, s->family, ev, s->proto, s->gateway_id,
		     s->epoch, s->timeout_ms, s->timestamp_ns,
		     ipv4_str(s->orig.saddr, os), ipv4_str(s->orig.daddr, od),
		     s->orig.sport, s->orig.dport, ipv4_str(s->xlat.saddr, xs),
		     ipv4_str(s->xlat.daddr, xd), s->xlat.sport, s->xlat.dport);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	return n;
}

int ns_session_same_flow(const struct ns_session *a, const struct ns_session *b)
{
	return a->proto == b->proto && ns_tuple_equal(&a->orig, &b->orig);
}

int ns_session_equal_state(const struct ns_session *a,
			   const struct ns_session *b)
{
	return a->version == b->version && a->family == b->family &&
	       a->proto == b->proto && a->gateway_id == b->gateway_id &&
	       a->epoch == b->epoch && a->timeout_ms == b->timeout_ms &&
	       a->timestamp_ns == b->timestamp_ns &&
	       ns_tuple_equal(&a->orig, &b->orig) &&
	       ns_tuple_equal(&a->xlat, &b->xlat);
}
