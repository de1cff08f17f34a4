/*
 * nsdp_nat_state.h - the state the files of the NAT44 fast path share:
 * the context, the lcore's per-position view of the sessions, the port
 * maps, the neighbour caches, and the small inline helpers on them that
 * every stage calls (drop, pool check, tx lists, timeouts). State only:
 * each file's functions are in its own header. Private to dataplane/nat/;
 * everybody else includes nsdp_nat.h.
 *
 *   nsdp_nat.c          the per-packet path, a burst in stages (on top)
 *   nsdp_nat_ctl.c      create/free, housekeeping, promotion and demotion
 *   nsdp_nat_arp.c      ARP frames, ARP input, neighbour caches
 *   nsdp_nat_session.c  port maps and session life (create, refresh, close)
 *   nsdp_nat_defer.c    first packets held until their record settles
 *   nsdp_nat6.c         IPv6 parse and sessions shared by NAT64 and NAT66
 *   nsdp_nat64.c        NAT64: IPv6 in, IPv4 out and back (RFC 7915)
 *   nsdp_nat64_icmp.c   NAT64: ICMP errors to the other family and back
 *   nsdp_nat66.c        NAT66: IPv6 in, IPv6 out from outside_addr6, back
 *   nsdp_nat_nd.c       IPv6 neighbour discovery on both ports
 */
#ifndef NSDP_NAT_STATE_H
#define NSDP_NAT_STATE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "nsdp_nat.h"
#include "nsdp_stat.h"

#define NAT_NS_PER_MS 1000000ull
#define NAT_NS_PER_S 1000000000ull

/* Neighbour cache: NEIGH_SETS sets of NEIGH_WAYS entries per port. */
#define NEIGH_SET_BITS 10
#define NEIGH_SETS (1u << NEIGH_SET_BITS)
#define NEIGH_WAYS 4u

#define ETH_LEN ((uint32_t)sizeof(struct rte_ether_hdr))
#define IP_LEN ((uint32_t)sizeof(struct rte_ipv4_hdr))

#define TCP_FLAGS_SEEN                                            \
	(RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG | RTE_TCP_RST_FLAG | \
	 RTE_TCP_FIN_FLAG)

/* Expiry sweep: the whole table per period, at least this many per call. */
#define SWEEP_PERIOD_NS NAT_NS_PER_S
#define SWEEP_MIN 64u

/* What nsdp_nat_housekeep() still has to announce after a promotion. */
#define ANNOUNCE_DONE UINT32_MAX

enum nat_port { PORT_INSIDE = 0, PORT_OUTSIDE = 1 };

/* Port maps per protocol. */
enum map_proto { MAP_TCP = 0, MAP_UDP = 1, MAP_ICMP = 2, MAP_PROTOS = 3 };

enum tcp_state {
	TCP_NONE = 0, /* not TCP */
	TCP_SYN_SENT,
	TCP_ESTABLISHED,
	TCP_CLOSING,
};

/* Per table position: the lcore's own view of the session there. */
struct side {
	uint64_t last_seen_ns;
	uint64_t last_record_ns;
	struct ns_tuple orig; /* with proto: who the position belongs to */
	uint32_t timeout_ms;
	uint8_t proto;
	uint8_t live;
	uint8_t tcp; /* enum tcp_state */
	/* A promotion's read-back found the session in the store (set by
	 * the read-back's thread, cleared by the lcore's forget walk; atomic
	 * both ways). */
	uint8_t seen;
};

struct port_map {
	uint64_t *bits; /* one bit per port, port_min first */
	uint32_t used;
	uint32_t cursor; /* next bit to try */
};

enum neigh_state { NEIGH_EMPTY = 0, NEIGH_PENDING = 1, NEIGH_RESOLVED = 2 };

struct neigh {
	uint32_t ip;
	uint8_t state;
	uint8_t pad;
	struct rte_ether_addr mac;
	uint64_t updated_ns; /* last learned (resolved entries) */
	uint64_t asked_ns; /* last ARP request sent for ip */
};

/* A frame the parser accepted: headers in place, tuple in host order as
 * the flow's direction carries it (ICMP: identifier as the port on our
 * side, 0 on the remote side). */
struct pkt {
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	void *l4;
	uint8_t proto;
	uint8_t tcp_flags;
	uint8_t icmp_type;
	struct ns_tuple t;
};

/* An inside IPv6 frame the NAT64 parser accepted: headers in place, the
 * ports (ICMPv6 echo: identifier as sport, 0 as dport) and the embedded
 * IPv4 destination (host order) in t; t.saddr is 0. */
struct pkt6 {
	struct rte_ether_hdr *eth;
	struct rte_ipv6_hdr *ip6;
	void *l4;
	uint8_t proto; /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6 */
	uint8_t tcp_flags;
	uint8_t icmp_type;
	struct ns_tuple t;
};

/* Per position of the IPv6 table: side (its orig with the ports only)
 * and the session's inside addresses. */
struct side6 {
	struct side sd;
	uint8_t saddr[16];
	uint8_t daddr[16];
};

/* IPv6 neighbour cache (per port): NEIGH6_SETS sets of NEIGH_WAYS. */
#define NEIGH6_SET_BITS 8
#define NEIGH6_SETS (1u << NEIGH6_SET_BITS)

struct neigh6 {
	uint8_t ip[16];
	uint8_t state;
	uint8_t pad;
	struct rte_ether_addr mac;
	uint64_t updated_ns;
	uint64_t asked_ns;
};

/* A first packet held (defer), with its record's number in the lane. */
struct defer_slot {
	struct rte_mbuf *m;
	uint64_t seq;
	uint64_t since_ns;
};

struct nsdp_nat {
	/* Written by the lcore only, read by nsdp_nat_stats(). */
	struct nsdp_nat_stats st __rte_cache_aligned;

	/* The lcore's (and, while it is a standby, activate's). */
	struct nsdp_nat_conf conf __rte_cache_aligned;
	struct nsdp_table *table;
	struct nsdp_lane *lane;
	struct side *side;
	uint32_t n_positions;
	uint32_t n_pool;
	uint32_t n_ports;
	uint32_t map_words;
	struct port_map maps[MAP_PROTOS * NSDP_NAT_MAX_POOL];
	uint64_t *map_bits;
	uint64_t ports_in_use; /* read by others with NSDP_STAT_READ */
	struct neigh *neigh[2];
	struct rte_ether_addr port_mac[2];
	uint32_t port_ip[2]; /* sender address of our ARP requests */
	/* NAT64 (side6 NULL: off) */
	struct side6 *side6;
	uint32_t n_positions6;
	struct neigh6 *neigh6[2];

	/* The lcore's alone. */
	enum nsdp_nat_mode mode;
	uint32_t req_taken; /* the last mode_req taken into account */
	uint32_t epoch_now; /* the epoch records carry, taken at promotion */
	uint64_t last_stamp_ns; /* of the last record (nsdp_stamp_next) */
	uint32_t announce_next;
	uint32_t sweep_pos;
	uint32_t sweep_pos6;
	/* nsdp_nat_readback_forget: the epoch below which a live session the
	 * read-back did not see is ended (0: none due; atomic, set by the
	 * control thread, cleared by the lcore), and the walk's cursors. */
	uint32_t forget_epoch;
	uint32_t forget_pos, forget_pos6;
	uint32_t announce6; /* an unsolicited NA is due (promotion) */
	uint16_t ip_id; /* IPv4 identification of translated packets */
	uint64_t last_housekeep_ns;
	uint64_t nexthop_asked_ns;
	/* The number in the lane of the last record put there, 0 when the
	 * last one was dropped (defer holds only recorded sessions). */
	uint64_t rec_seq;
	/* Defer: a ring of the first packets held, oldest first. */
	struct rte_ring *adopt; /* nsdp_nat_adopt() to the lcore */
	struct defer_slot *defer;
	uint32_t defer_head, defer_n;
	uint64_t defer_max_ns;
	/* read by others with NSDP_STAT_READ */
	uint64_t defer_hist[NSDP_NAT_DEFER_BUCKETS];
	/* NAT66 (nat66 0: off; on only with NAT64), after what the NAT44
	 * touches per packet: outside_addr6's own port maps, one per
	 * protocol (the lcore's, and activate's), the announcement after a
	 * promotion and the last solicitation of next_hop6 (the lcore's). */
	uint32_t nat66;
	uint32_t announce66;
	struct port_map maps6[MAP_PROTOS];
	uint64_t *map6_bits;
	uint64_t nexthop6_asked_ns;

	/* The handshake with the control thread: a request is
	 * (generation << 1 | mode), each one a new generation, and the lcore
	 * acknowledges the very request it took, so that "the lcore took this
	 * request" is never confused with "the lcore took an older one". */
	uint32_t mode_req __rte_cache_aligned;
	uint32_t mode_seen;
	uint32_t epoch;
};

/* The mode a request (mode_req, mode_seen) asks for. */
#define REQ_MODE(r) ((enum nsdp_nat_mode)((r)&1u))

static inline int in_pool(const struct nsdp_nat *nat, uint32_t addr)
{
	return addr - nat->conf.pool_first < nat->n_pool;
}

/* Free m and count it under why. */
static inline void drop(struct rte_mbuf *m, uint64_t *why)
{
	NSDP_STAT_INC(*why);
	rte_pktmbuf_free(m);
}

/* The ports and flags of the TCP header at l4 (have bytes of it in the
 * segment, l4_len in the packet) into t and flags: NULL, or the counter
 * of the reason to drop the packet. */
static inline uint64_t *tcp_parse(struct nsdp_nat *nat, const uint8_t *l4,
				  uint32_t have, uint32_t l4_len,
				  struct ns_tuple *t, uint8_t *flags)
{
	const struct rte_tcp_hdr *tcp = (const struct rte_tcp_hdr *)l4;
	uint32_t doff;

	if (unlikely(have < sizeof(*tcp)))
		return &nat->st.truncated;
	doff = (uint32_t)(tcp->data_off >> 4) * 4;
	if (unlikely(doff < sizeof(*tcp) || doff > l4_len))
		return &nat->st.truncated;
	t->sport = rte_be_to_cpu_16(tcp->src_port);
	t->dport = rte_be_to_cpu_16(tcp->dst_port);
	*flags = tcp->tcp_flags;
	return NULL;
}

/* ---- transmit lists ----------------------------------------------- */

static inline unsigned int tx_room(const struct nsdp_nat_tx *tx,
				   enum nat_port port)
{
	return NSDP_NAT_TX_MAX -
	       (port == PORT_INSIDE ? tx->n_inside : tx->n_outside);
}

/* Queue m on port's list; 0, or -ENOBUFS when the list is full (m freed
 * and counted). */
static inline int tx_put(struct nsdp_nat *nat, struct nsdp_nat_tx *tx,
			 enum nat_port port, struct rte_mbuf *m)
{
	if (unlikely(tx_room(tx, port) == 0)) {
		drop(m, &nat->st.alloc_failures);
		return -ENOBUFS;
	}
	if (port == PORT_INSIDE) {
		tx->inside[tx->n_inside++] = m;
		NSDP_STAT_INC(nat->st.tx_inside);
	} else {
		tx->outside[tx->n_outside++] = m;
		NSDP_STAT_INC(nat->st.tx_outside);
	}
	return 0;
}

/* ---- timeouts and side state -------------------------------------- */

static inline uint32_t timeout_for(const struct nsdp_nat *nat, uint8_t proto,
				   uint8_t tcp)
{
	switch (proto) {
	case IPPROTO_TCP:
		if (tcp == TCP_ESTABLISHED)
			return nat->conf.tcp_established_ms;
		if (tcp == TCP_CLOSING)
			return nat->conf.tcp_closing_ms;
		return nat->conf.tcp_syn_ms;
	case IPPROTO_UDP:
		return nat->conf.udp_ms;
	default:
		return nat->conf.icmp_ms;
	}
}

/* The TCP state of sd after a segment with flags (inbound: from the
 * outside); 1 when the segment ends the session (RST). */
static inline int tcp_track(struct side *sd, uint8_t flags, int inbound)
{
	uint8_t f = flags & TCP_FLAGS_SEEN;

	if (f & RTE_TCP_RST_FLAG)
		return 1;
	if (f & RTE_TCP_FIN_FLAG)
		sd->tcp = TCP_CLOSING;
	else if (inbound && sd->tcp == TCP_SYN_SENT &&
		 f == (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG))
		sd->tcp = TCP_ESTABLISHED;
	else if (!inbound && sd->tcp == TCP_CLOSING && f == RTE_TCP_SYN_FLAG)
		sd->tcp = TCP_SYN_SENT; /* the flow's tuple reused */
	return 0;
}

/* Whether the session of sd, of proto, seen at now, is to be recorded
 * again: its timeout changed (sd takes the new one), or half of it went
 * by since its last record. */
static inline int refresh_due(const struct nsdp_nat *nat, struct side *sd,
			      uint8_t proto, uint64_t now)
{
	uint32_t timeout = timeout_for(nat, proto, sd->tcp);

	if (timeout != sd->timeout_ms) {
		sd->timeout_ms = timeout;
		return 1;
	}
	return (int64_t)(now - sd->last_record_ns) >=
	       (int64_t)((uint64_t)timeout * NAT_NS_PER_MS / 2);
}

/* Whether the replicated copy of sd's session has expired: its last
 * record's stamp plus the timeout it carried is past, so the store and a
 * standby no longer hold it (a promotion restarts idle timers, so the
 * fast path may keep a session up to a timeout longer). */
static inline int side_replica_expired(const struct side *sd, uint64_t now)
{
	return sd->timeout_ms != 0 &&
	       (int64_t)(now - sd->last_record_ns) >=
		       (int64_t)((uint64_t)sd->timeout_ms * NAT_NS_PER_MS);
}

/* How long before the replicated copy of a session ends a refresh of it
 * still risks the session: a standby expires its copy by the record's
 * stamp, so a failover (detection and promotion: 2 to 3 s with the shipped
 * keepalived configuration) that begins before the refresh is
 * acknowledged and ends after the copy's end loses it. */
#define NSDP_NAT_COPY_MARGIN_MS 5000u

/* Whether the replicated copy of sd's session has ended or ends within
 * NSDP_NAT_COPY_MARGIN_MS of now: under defer, the packet whose refresh
 * renews it waits for that refresh as a new session's first packet does. */
static inline int side_replica_fragile(const struct side *sd, uint64_t now)
{
	return sd->timeout_ms != 0 &&
	       (int64_t)(sd->last_record_ns +
			 (uint64_t)sd->timeout_ms * NAT_NS_PER_MS - now) <
		       (int64_t)((uint64_t)NSDP_NAT_COPY_MARGIN_MS *
				 NAT_NS_PER_MS);
}

static inline int side_owns(const struct side *sd, const struct ns_session *s)
{
	return sd->live && sd->proto == s->proto &&
	       sd->orig.saddr == s->orig.saddr &&
	       sd->orig.daddr == s->orig.daddr &&
	       sd->orig.sport == s->orig.sport &&
	       sd->orig.dport == s->orig.dport;
}

/* Positions of n the expiry sweep visits in this call: its share of the
 * time since the last one, at least SWEEP_MIN, at most n. */
static inline uint32_t sweep_slice(const struct nsdp_nat *nat, uint32_t n,
				   uint64_t now)
{
	uint64_t elapsed =
		now > nat->last_housekeep_ns ? now - nat->last_housekeep_ns : 0;
	uint64_t slice;

	if (elapsed > SWEEP_PERIOD_NS)
		elapsed = SWEEP_PERIOD_NS;
	slice = (uint64_t)n * elapsed / SWEEP_PERIOD_NS;
	if (slice < SWEEP_MIN)
		slice = SWEEP_MIN;
	return (uint32_t)(slice > n ? n : slice);
}

/* ---- checksums (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')) ---------- */

/* The helpers work on the 16-bit words as they lie in the packet (network
 * order); one's complement sums do not depend on the byte order as long
 * as every term is taken the same way. */
static inline uint32_t csum_delta16(uint32_t acc, uint16_t old, uint16_t new)
{
	return acc + (uint16_t)~old + new;
}

static inline uint32_t csum_delta32(uint32_t acc, uint32_t old, uint32_t new)
{
	acc = csum_delta16(acc, (uint16_t)(old >> 16), (uint16_t)(new >> 16));
	return csum_delta16(acc, (uint16_t)old, (uint16_t) new);
}

static inline uint16_t csum_apply(uint16_t cksum, uint32_t delta)
{
	uint32_t sum = (uint32_t)(uint16_t)~cksum + delta;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Where the port a translation rewrites (the destination port inbound,
 * the source port outbound; ICMP echo: the identifier) and the checksum
 * lie in the L4 header of proto. 1 when the checksum covers a
 * pseudo-header (TCP, UDP), 0 for ICMP echo. */
static inline int l4_offsets(uint8_t proto, int inbound, size_t *port_at,
			     size_t *cksum_at)
{
	switch (proto) {
	case IPPROTO_TCP:
		*port_at = inbound ? offsetof(struct rte_tcp_hdr, dst_port)
				   : offsetof(struct rte_tcp_hdr, src_port);
		*cksum_at = offsetof(struct rte_tcp_hdr, cksum);
		return 1;
	case IPPROTO_UDP:
		*port_at = inbound ? offsetof(struct rte_udp_hdr, dst_port)
				   : offsetof(struct rte_udp_hdr, src_port);
		*cksum_at = offsetof(struct rte_udp_hdr, dgram_cksum);
		return 1;
	default:
		*port_at = offsetof(struct rte_icmp_hdr, icmp_ident);
		*cksum_at = offsetof(struct rte_icmp_hdr, icmp_cksum);
		return 0;
	}
}

/* Raw 16-bit words of a header, as they lie in the packet. */
static inline uint16_t word_load(const uint8_t *at)
{
	uint16_t v;

	memcpy(&v, at, sizeof(v));
	return v;
}

static inline void word_store(uint8_t *at, uint16_t v)
{
	memcpy(at, &v, sizeof(v));
}

#endif
