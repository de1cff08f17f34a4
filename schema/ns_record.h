/*
 * ns_record.h - the NAT session record, v1.
 *
 * struct ns_session is the in-memory form, in host byte order: what the
 * fast path writes into its ring and what the standby keeps in its table.
 * It holds an IPv4 session whole in one 64-byte line. An IPv6 session
 * (family NS_FAMILY_NAT66 or NS_FAMILY_NAT64) is two consecutive lines:
 * its head, a struct ns_session with the header fields and ports (and
 * NAT64's IPv4 outside addresses), then a struct ns_session_v6 with the
 * IPv6 addresses; every function below that takes a const struct
 * ns_session * of such a family reads the line after it. struct ns_rec
 * holds either.
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
/* Inside and outside IPv6. */
#define NS_FAMILY_NAT66 6
/* Inside IPv6, outside IPv4 (RFC 6146), with the NAT64 prefix's length. */
#define NS_FAMILY_NAT64 64
/* Size of a v1 IPv4 record on the wire. */
#define NS_RECORD_V1_IPV4_LEN 48
#define NS_RECORD_V1_NAT66_LEN 96
#define NS_RECORD_V1_NAT64_LEN 76
/* Largest record any known family encodes to. */
#define NS_RECORD_MAX_LEN NS_RECORD_V1_NAT66_LEN

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

/* The second line of an IPv6 session: addresses in network byte order.
 * The head's orig.saddr/daddr are 0; its xlat.saddr/daddr are NAT64's
 * IPv4 outside addresses (0 for NAT66); its ports are the session's. */
struct ns_session_v6 {
	uint8_t orig_saddr[16];
	uint8_t orig_daddr[16]; /* NAT64: the prefix and the IPv4 destination */
	union {
		struct { /* NAT66 */
			uint8_t xlat_saddr[16];
			uint8_t xlat_daddr[16];
		};
		struct { /* NAT64 */
			uint8_t prefix_len; /* 32, 40, 48, 56, 64 or 96 */
			uint8_t zero[31];
		};
	};
};

_Static_assert(sizeof(struct ns_session_v6) == 64, "the v6 line is a line");

/* Room for one session of any family: what a reader decodes into. */
struct ns_rec {
	struct ns_session s;
	struct ns_session_v6 v6; /* meaningful when ns_session_lines(&s) == 2 */
};

static inline int ns_family_is_v6(uint8_t family)
{
	return family == NS_FAMILY_NAT66 || family == NS_FAMILY_NAT64;
}

/* Lines the session whose head is s takes in memory: 1 or 2. */
static inline unsigned int ns_session_lines(const struct ns_session *s)
{
	return ns_family_is_v6(s->family) ? 2u : 1u;
}

/* The second line of an IPv6 session (s is its head). */
static inline const struct ns_session_v6 *
ns_session_v6_of(const struct ns_session *s)
{
	return (const struct ns_session_v6 *)(const void *)(s + 1);
}

/* Encode s (and its second line, for an IPv6 family) into buf; returns the
 * number of bytes written, or -ENOSPC if cap is too small, -EINVAL if s has
 * an unknown version, family or event or a zero protocol, or is a NAT64
 * session whose prefix and addresses disagree (what decode would refuse).
 * reserved is not encoded. */
int ns_record_encode(const struct ns_session *s, uint8_t *buf, size_t cap);

/* Decode one record of any family from buf into out; returns the number
 * of bytes consumed, or a negative errno: -EMSGSIZE (truncated), -EPROTO
 * (wrong version), -EAFNOSUPPORT (unknown family), -EINVAL (inconsistent
 * fields: bad event, zero protocol; NAT64: a prefix length RFC 6052 does
 * not know, a destination that does not embed the IPv4 one, reserved bytes
 * not 0). out is written only on success; its reserved bytes are zeroed,
 * and so is its second line for an IPv4 record. */
int ns_record_decode_rec(const uint8_t *buf, size_t len, struct ns_rec *out);

/* The same into one line, for readers that hold IPv4 sessions only: an
 * IPv6 record is refused with -EAFNOSUPPORT (after the checks above). */
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
 * protocols are equal (IPv6 ones: their ports and IPv6 inside addresses,
 * a NAT66 and a NAT64 session alike, as their keys). */
int ns_session_same_flow(const struct ns_session *a,
			 const struct ns_session *b);

/* Equal in every field the wire form carries except event (timestamp
 * included; reserved ignored, and so are the head's address fields an
 * IPv6 family does not carry). */
int ns_session_equal_state(const struct ns_session *a,
			   const struct ns_session *b);

#endif
