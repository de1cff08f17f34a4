/*
 * nsdp_nat.h - the reference NAT44 fast path, built on the replication
 * spine.
 *
 * Source NAT of inside traffic (TCP, UDP, ICMP echo) to a pool of outside
 * addresses, stateful NAT64 (RFC 6146, nsdp_nat64.c) of inside IPv6
 * traffic to a /96 prefix onto the same pool and ports, and stateful
 * NAT66 (nsdp_nat66.c) of the other inside IPv6 traffic to one outside
 * IPv6 address. One struct nsdp_nat belongs to one forwarding lcore: it is the
 * only writer of the gateway's session table (struct nsdp_table) while the
 * gateway is active, and it records every session it creates, refreshes
 * (at most once per half timeout) or closes into its lane.
 *
 * While the gateway is a standby, the standby subscriber writes the same
 * table and the fast path forwards nothing. Promotion (nsdp_nat_activate,
 * from a control thread) rebuilds the port maps from the replicated
 * sessions, so that new sessions never take a port a replicated one holds,
 * and then lets the lcore forward with the replicated sessions.
 *
 * The lcore loop is the caller's: receive a burst on each port, hand it to
 * nsdp_nat_inside()/nsdp_nat_outside(), call nsdp_nat_housekeep(), then
 * transmit what the nsdp_nat_tx lists hold. Every packet handed in is
 * either put on a tx list or freed and counted; nothing blocks, nothing
 * allocates except the ARP packets the gateway sends itself.
 *
 * Defer (conf.defer_max_us > 0, as OpenBSD pfsync's): the packet that
 * creates a session waits, translated, until the lane's consumer says its
 * record is settled (nsdp_lane.h: acknowledged by the store, or given up
 * by the agent), and at most defer_max_us; then it goes. Only that packet:
 * a later packet of the same flow arriving meanwhile is forwarded at once
 * (it may overtake the first). So a session whose first packet left the
 * gateway is, unless the wait timed out (counted), in the store and thus
 * in every standby that applies what the store acknowledged. At most
 * NSDP_NAT_DEFER_MAX packets wait; more go at once (defer_overflow).
 *
 * Policy for bad or foreign input (each counted in struct nsdp_nat_stats,
 * dropped, never touching the table): truncated Ethernet/IP/L4 headers, IP
 * version other than 4, bad IP header checksum, IP total length
 * inconsistent with the frame, IP options, fragments, TTL <= 1, protocols
 * other than TCP/UDP/ICMP, ICMP other than echo request/reply, TCP packets
 * other than a SYN for an unknown session, packets addressed to none of
 * the gateway's addresses, frames that are neither IPv4 nor ARP (nor
 * IPv6, with NAT64 on the inside and NAT66 on the outside). TCP and
 * UDP checksums are not verified: they are updated incrementally, so a bad
 * one stays bad and the receiver drops the packet.
 */
#ifndef NSDP_NAT_H
#define NSDP_NAT_H

#include <stdint.h>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "nsdp_lane.h"
#include "nsdp_table.h"

/* Outside addresses at most in one pool. */
#define NSDP_NAT_MAX_POOL 256
/* Largest burst nsdp_nat_inside()/nsdp_nat_outside() accept. */
#define NSDP_NAT_BURST 64
/* Room in each tx list: a burst, plus the ARP packets a call may add. */
#define NSDP_NAT_TX_MAX (2 * NSDP_NAT_BURST)
/* Defer: packets held at most, and the histogram of how long they were
 * held (buckets of NSDP_NAT_DEFER_BUCKET_US, the last one open). */
#define NSDP_NAT_DEFER_MAX 1024
#define NSDP_NAT_DEFER_BUCKET_US 8
#define NSDP_NAT_DEFER_BUCKETS 512

struct nsdp_nat_conf {
	/* Addresses in host byte order. */
	uint32_t inside_addr; /* the gateway's own address on the inside */
	uint32_t pool_first, pool_last; /* outside pool, inclusive */
	uint32_t next_hop; /* outside next hop; 0: destinations on-link */
	uint16_t port_min, port_max; /* translated ports and ICMP ids */
	struct rte_ether_addr inside_mac, outside_mac;
	uint32_t gateway_id; /* written into every record */
	/* Idle timeouts in milliseconds. */
	uint32_t tcp_syn_ms; /* SYN seen, no answer yet */
	uint32_t tcp_established_ms;
	uint32_t tcp_closing_ms; /* after a FIN */
	uint32_t udp_ms;
	uint32_t icmp_ms;
	/* Sessions the gateway may hold (the table's capacity). */
	uint32_t max_sessions;
	/* Defer: how long a new session's first packet waits at most for
	 * its record to settle, us (below the 1 s after which the agent
	 * gives up a record's acknowledgement); 0: defer off. */
	uint32_t defer_max_us;
	/* Pool for the ARP requests, replies and announcements it sends. */
	struct rte_mempool *mbuf_pool;
	/* NAT64 (nsdp_nat64.c): on when inside_addr6 is not all zeroes;
	 * then the table must have an IPv6 table (nsdp_table_add_v6).
	 * Network byte order. The prefix is a /96 (the IPv4 destination is
	 * the address's low 32 bits). */
	uint8_t inside_addr6[16]; /* the gateway's own address on the inside */
	uint8_t nat64_prefix[16];
	uint8_t nat64_prefix_len; /* 96 */
	/* NAT66 (nsdp_nat66.c): on when outside_addr6 is not all zeroes
	 * (and NAT64 is on). Inside IPv6 traffic to destinations outside the
	 * NAT64 prefix leaves from outside_addr6 with a port of its own
	 * maps. Network byte order; next_hop6 all zeroes: destinations are
	 * on-link. */
	uint8_t outside_addr6[16]; /* the gateway's own address outside */
	uint8_t next_hop6[16];
};

enum nsdp_nat_mode {
	NSDP_NAT_STANDBY = 0, /* forwards nothing, answers no ARP */
	NSDP_NAT_ACTIVE = 1,
};

/* Counters, written by the owning lcore only; others read them with
 * nsdp_nat_stats(). */
struct nsdp_nat_stats {
	uint64_t rx_inside, rx_outside;
	uint64_t tx_inside, tx_outside; /* put on the tx lists */
	uint64_t created, refreshed, closed, expired;
	/* refreshes of sessions whose replicated copy had expired (their
	 * last record's stamp plus its timeout passed: the store and a
	 * standby no longer hold them); under defer their packet is held */
	uint64_t revived;
	uint64_t recorded, record_drops; /* lane full: dropped, counted */
	/* dropped, by reason */
	uint64_t standby_drops; /* not active */
	uint64_t not_ipv4; /* neither IPv4 nor ARP */
	uint64_t truncated;
	uint64_t bad_ip_header; /* version, header length, total length */
	uint64_t bad_ip_checksum;
	uint64_t ip_options;
	uint64_t fragments;
	uint64_t ttl_expired;
	uint64_t unknown_proto;
	uint64_t icmp_unsupported; /* ICMP other than echo */
	uint64_t tcp_no_session; /* non-SYN TCP without a session */
	uint64_t no_session; /* return traffic without a session */
	uint64_t not_ours; /* outside packet not for a pool address */
	uint64_t to_gateway; /* IP addressed to the gateway itself */
	uint64_t ports_exhausted; /* no free port in the pool */
	uint64_t table_full;
	uint64_t neigh_miss; /* next hop not resolved yet: ARP sent */
	uint64_t arp_in, arp_replies_sent, arp_requests_sent;
	uint64_t arp_announcements; /* gratuitous ARPs after promotion */
	uint64_t arp_ignored; /* not for us, or malformed */
	uint64_t
		alloc_failures; /* no mbuf for an ARP packet, or a full tx list */
	/* defer: first packets held, then let go once their record settled
	 * or after defer_max_us; sent at once as the queue was full or the
	 * record was not recorded; dropped when the gateway stopped being
	 * active while they waited */
	uint64_t defer_held, defer_settled, defer_timeouts;
	uint64_t defer_overflow, defer_unrecorded, defer_dropped;
	/* NAT64 drops that have no IPv4 twin above (the others count where
	 * IPv4 counts them: truncated, bad_ip_header for a bad version or
	 * payload length, fragments, ttl_expired for the hop limit,
	 * unknown_proto, icmp_unsupported, not_ours for a destination outside
	 * the prefix, to_gateway, tcp_no_session, no_session, ...) */
	uint64_t ip6_ext_headers; /* extension headers other than fragments */
	uint64_t udp6_zero_checksum; /* IPv6 UDP without a checksum */
	/* neighbour discovery (inside; outside too with NAT66): NS and NA
	 * received, NA sent (answers and announcements), NS sent, and ND not
	 * for us, malformed, or received while a standby */
	uint64_t nd_in, nd_adverts_sent, nd_solicits_sent, nd_ignored;
	/* NAT64 ICMP errors (RFC 7915 4.2, 5.2): translated either way;
	 * dropped as their embedded packet is no session's, or is truncated
	 * or malformed (or the error's checksum is bad). Types and codes
	 * without a counterpart count as icmp_unsupported. */
	uint64_t icmp_errors_translated;
	uint64_t icmp_error_no_session, icmp_error_bad;
	/* Sessions read back from the store after a promotion
	 * (nsdp_nat_adopt): taken into the table; not taken because the
	 * table holds the flow already (this gateway's is newer); not taken
	 * because another session holds their port now (their end is
	 * recorded, so that the store drops them too). */
	uint64_t adopted, adopt_known, adopt_port_taken;
	/* Sessions of an earlier epoch the read-back did not find in the
	 * store (the old active ended them and never announced it): ended,
	 * their ports freed and their ends recorded
	 * (nsdp_nat_readback_forget). */
	uint64_t forgotten;
};

struct nsdp_nat;

/* The packets a call produced, for the caller to transmit (and free what
 * the port does not take). */
struct nsdp_nat_tx {
	struct rte_mbuf *inside[NSDP_NAT_TX_MAX];
	unsigned int n_inside;
	struct rte_mbuf *outside[NSDP_NAT_TX_MAX];
	unsigned int n_outside;
};

/* Check conf: 0, or -EINVAL with a reason in err. */
int nsdp_nat_conf_check(const struct nsdp_nat_conf *conf, char *err,
			size_t errlen);

/* A NAT context over table, recording into lane (NULL: recording off).
 * Starts in NSDP_NAT_STANDBY. NULL and errno on failure. */
struct nsdp_nat *nsdp_nat_create(const struct nsdp_nat_conf *conf,
				 struct nsdp_table *table,
				 struct nsdp_lane *lane);
void nsdp_nat_free(struct nsdp_nat *nat);

/* Fast path (owning lcore). now_ns is CLOCK_REALTIME in nanoseconds, read
 * once per loop iteration. n <= NSDP_NAT_BURST. */
void nsdp_nat_inside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		     unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx);
void nsdp_nat_outside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		      unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx);

/* Once per loop iteration, on the owning lcore: takes mode changes into
 * account (and announces the gateway's addresses by gratuitous ARP after a
 * promotion), expires idle sessions a slice of the table at a time (the
 * whole table about once a second), and resolves the next hop. */
void nsdp_nat_housekeep(struct nsdp_nat *nat, uint64_t now_ns,
			struct nsdp_nat_tx *tx);

/* Control thread. Promote: the caller has stopped every other writer of
 * the table (the standby subscriber gave it back). Takes the table for the
 * fast path (NSDP_TABLE_FASTPATH), rebuilds the port maps from it,
 * restarts every session's idle timer at now, and sets the epoch that new
 * records carry; then the lcore forwards. Returns
 * - 0: the lcore is active; the table is the fast path's;
 * - -EBUSY: already active, or another writer holds the table;
 * - -ETIMEDOUT: the lcore did not take the change within timeout_ms (it
 *   must be calling nsdp_nat_housekeep); the request was withdrawn and the
 *   lcore confirmed that it is a standby (waiting up to timeout_ms more):
 *   the table is nobody's again and the subscriber may take it back;
 * - -EINPROGRESS: the lcore did not confirm (or an earlier request is not
 *   confirmed yet): it may still take the table and write it. The table
 *   stays the fast path's until nsdp_nat_deactivate() returns 0. */
int nsdp_nat_activate(struct nsdp_nat *nat, uint32_t epoch, int timeout_ms);

/* Control thread. Demote: the lcore stops forwarding and stops writing the
 * table; returns once it has confirmed (0: the fast path gave the table
 * back, another writer such as the standby subscriber may take it) or
 * -ETIMEDOUT (the table stays the fast path's). Cheap to call again (with
 * timeout_ms 0 to poll): a standby request not yet confirmed is waited for,
 * not renewed. */
int nsdp_nat_deactivate(struct nsdp_nat *nat, int timeout_ms);

/* The mode the lcore last confirmed. */
enum nsdp_nat_mode nsdp_nat_mode(const struct nsdp_nat *nat);
uint32_t nsdp_nat_epoch(const struct nsdp_nat *nat);

/* Sum of the counters (any thread; values may be a few packets old). */
void nsdp_nat_stats(const struct nsdp_nat *nat, struct nsdp_nat_stats *s);

/* Defer: the histogram of hold times (NSDP_NAT_DEFER_BUCKETS counters;
 * any thread, a few packets old), and the packets held now (the owning
 * lcore: its loop does not sleep while some wait). */
void nsdp_nat_defer_hist(const struct nsdp_nat *nat, uint64_t *buckets);
unsigned int nsdp_nat_deferred(const struct nsdp_nat *nat);

/* Control thread, while active: a session of an earlier active that the
 * store holds and this table may lack (what that active wrote and never
 * announced, read back once a promotion's epoch is known to the store):
 * NAT44, or NAT64 and NAT66 where this gateway translates them (r->v6
 * then meaningful). The lcore takes it at its next housekeeping if the
 * table has no entry for its flow and its outside port is free, marks the
 * port and starts its idle timer; otherwise it counts it and, when the
 * port is another session's, records its end. 0, -ENOBUFS (the queue is
 * full: try again shortly) or -EAFNOSUPPORT (a family this gateway does
 * not translate). */
int nsdp_nat_adopt(struct nsdp_nat *nat, const struct ns_rec *r);

/* Whether the table holds r's flow (any thread: the read-back's); if it
 * does and this gateway translates r's family, the session is marked as
 * found in the store, so that nsdp_nat_readback_forget keeps it. */
int nsdp_nat_readback_known(struct nsdp_nat *nat, const struct ns_rec *r);

/* After a read-back that read the store whole: the lcore ends, once the
 * sessions queued by nsdp_nat_adopt are taken, every live session of an
 * epoch below epoch that the read-back did not find (nat.forgotten), a
 * slice of positions per housekeeping, and clears the marks. */
void nsdp_nat_readback_forget(struct nsdp_nat *nat, uint32_t epoch);

/* Whether a forget walk is due or running. */
int nsdp_nat_forgetting(const struct nsdp_nat *nat);

/* Outside ports in use in the port maps (for tests and status). */
uint64_t nsdp_nat_ports_in_use(const struct nsdp_nat *nat);

#endif
