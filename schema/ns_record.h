/*
 * ns_record.h - the NAT session record, v1.
 *
 * struct ns_session is the in-memory form, in host byte order: what the
 * fast path writes into its ring and what the standby keeps in its table.
 * ns_record_encode()/ns_record_decode() convert it to and from the wire form
 * (network byte order, fixed size per address family) documented byte by
 * byte in schema/FORMAT.md. The wire form is what the store holds as a key's
 * value and what a batch carries.
 */
#ifndef NS_RECORD_H
#define NS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define NS_RECORD_VERSION 1
#define NS_FAMILY_IPV4 4
/* Size of a v1 IPv4 record on the wire. */
#define NS_RECORD_V1_IPV4_LEN 48
/* Largest record any known family encodes to. */
#define NS_RECORD_MAX_LEN NS_RECORD_V1_IPV4_LEN

enum ns_event {
	NS_EV_CREATE = 1,
	NS_EV_REFRESH = 2,
	NS_EV_DELETE = 3,
};

/* One direction of a flow; addresses and ports in host byte order. */
struct ns_tuple {
	uint32_t saddr;
	uint32_t daddr;
	uint16_t sport;
	uint16_t dport;
};

static inline int ns_tuple_equal(const struct ns_tuple *a,
				 const struct ns_tuple *b)
{
	return a->saddr == b->saddr && a->daddr == b->daddr &&
	       a->sport == b->sport && a->dport == b->dport;
}

/*
 * A session event, 64 bytes so that it is one cache line in a ring.
 * orig is the inside five-tuple as the gateway received it; xlat is the
 * same direction after translation (for source NAT, xlat.saddr/sport are
 * the outside address and port, xlat.daddr/dport equal orig's).
 */
struct ns_session {
	uint8_t version; /* NS_RECORD_VERSION */
	uint8_t family; /* NS_FAMILY_IPV4 */
	uint8_t proto; /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP */
	uint8_t event; /* enum ns_event */
	uint32_t gateway_id;
	uint32_t epoch;
	uint32_t timeout_ms; /* idle timeout; the store key expires after it */
	uint64_t timestamp_ns; /* CLOCK_REALTIME; rises per producer */
	struct ns_tuple orig;
	struct ns_tuple xlat;
	uint8_t reserved[16];
};

_Static_assert(sizeof(struct ns_session) == 64, "ns_session is one line");

/* Encode s into buf; returns the number of bytes written, or -ENOSPC if cap
 * is too small, -EINVAL if s has an unknown version, family or event or a
 * zero protocol (what decode would refuse). reserved is not encoded. */
int ns_record_encode(const struct ns_session *s, uint8_t *buf, size_t cap);

/* Decode one record from buf; returns the number of bytes consumed, or a
 * negative errno: -EMSGSIZE (truncated), -EPROTO (wrong version), -EAFNOSUPPORT
 * (unknown family), -EINVAL (inconsistent fields: bad event, zero protocol).
 * out is written only on success; its reserved bytes are zeroed. */
int ns_record_decode(const uint8_t *buf, size_t len, struct ns_session *out);

/* Length of the wire form of s's family, 0 for an unknown family. */
size_t ns_record_wire_len(uint8_t family);

/* JSON form for people and tools, one object, no newline:
 * {"version":1,"event":"create","proto":6,"orig_saddr":"10.0.0.1",...}.
 * Returns the length written (without the NUL) or -ENOSPC. */
int ns_record_to_json(const struct ns_session *s, char *buf, size_t cap);

/* The event's name ("create", "refresh", "delete") or NULL. */
const char *ns_event_name(uint8_t event);

/* Two sessions are the same table entry when their orig tuples and
 * protocols are equal. */
int ns_session_same_flow(const struct ns_session *a,
			 const struct ns_session *b);

/* Equal in every field the wire form carries except event (timestamp
 * included; reserved ignored). */
int ns_session_equal_state(const struct ns_session *a,
			   const struct ns_session *b);

#endif
