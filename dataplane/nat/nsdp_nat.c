/*
 * nsdp_nat.c - the NAT44 per-packet path (see nsdp_nat.h for the contract
 * and the policy for bad input).
 *
 * A burst goes through stages, as in DPDK's l3fwd: parse every frame (ARP
 * and bad input leave here), look the flows up in the session table all at
 * once (inside tuple outbound, reply tuple inbound) so that their cache
 * misses overlap, then in arrival order create, refresh or close the
 * sessions, rewrite address, port or ICMP identifier, TTL and checksums
 * incrementally (RFC 1624), and put the frames on the other port's tx list
 * with the next hop's MAC address.
 *
 * Invariants
 * - The result is the one of handling the packets one at a time: a packet
 *   that changes the table invalidates the later lookups it affects (same
 *   entry, or the key it created), and those look again. Each tx list and
 *   each neighbour cache is written by one stage only, in arrival order.
 * - Every frame handed in is put on a tx list or freed and counted once.
 *   A full tx list (the caller did not empty it between calls) frees the
 *   frame and counts it in alloc_failures.
 *
 * Choices the header leaves open
 * - IP frames whose destination MAC is not the port's, inside packets to a
 *   multicast or broadcast destination, and outside packets to a non-pool
 *   address count as not_ours. Inside packets to inside_addr or to a pool
 *   address count as to_gateway (no hairpinning, no ping answering).
 * - An inside echo reply or an outside echo request has no session to
 *   match (only source NAT is done): no_session.
 * - A TCP session opens only on a segment whose only flag among SYN, ACK,
 *   RST and FIN is SYN. An outbound SYN on a closing session (the tuple
 *   reused) puts it back in SYN sent.
 *
 * Not done here: ICMP errors of NAT44 sessions (neither sent nor
 * translated), fragments, IP options, VLANs, hairpinning, ping to the
 * gateway; IPv6 frames, NAT64 return traffic and outside ICMP errors
 * (with NAT64 on), which this path hands to nsdp_nat64.c (inside IPv6,
 * but neighbour discovery and NAT66's), nsdp_nat64_icmp.c (outside ICMP
 * errors) and nsdp_nat66.c (inside IPv6 it claims, outside IPv6).
 */
#include <stddef.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include "nsdp_nat6.h"
#include "nsdp_nat64.h"
#include "nsdp_nat64_icmp.h"
#include "nsdp_nat66.h"
#include "nsdp_nat_arp.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

/* ---- parsing ------------------------------------------------------ */

/* Validate the IPv4 header of m (after the Ethernet header); NULL when it
 * is good, else the counter of the reason to drop it. */
static inline uint64_t *ipv4_check(struct nsdp_nat *nat, struct rte_mbuf *m,
				   struct pkt *p)
{
	uint32_t seg = rte_pktmbuf_data_len(m);
	struct rte_ipv4_hdr *ip;
	uint16_t total, frag;

	if (unlikely(seg < ETH_LEN + IP_LEN))
		return &nat->st.truncated;
	ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, ETH_LEN);
	if (unlikely((ip->version_ihl >> 4) != 4 ||
		     (ip->version_ihl & 0xf) < 5))
		return &nat->st.bad_ip_header;
	if (unlikely((ip->version_ihl & 0xf) != 5))
		return &nat->st.ip_options;
	if (unlikely(rte_raw_cksum(ip, IP_LEN) != 0xffff))
		return &nat->st.bad_ip_checksum;
	total = rte_be_to_cpu_16(ip->total_length);
	if (unlikely(total < IP_LEN ||
		     total > rte_pktmbuf_pkt_len(m) - ETH_LEN))
		return &nat->st.bad_ip_header;
	frag = rte_be_to_cpu_16(ip->fragment_offset);
	if (unlikely(frag & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)))
		return &nat->st.fragments;
	p->ip = ip;
	p->proto = ip->next_proto_id;
	p->t.saddr = rte_be_to_cpu_32(ip->src_addr);
	p->t.daddr = rte_be_to_cpu_32(ip->dst_addr);
	return NULL;
}

/* Parse the L4 header of a checked IPv4 packet and fill the ports of
 * p->t; NULL when good, else the reason to drop. inbound: the
 * packet comes from the remote side (inbound), which decides where an
 * ICMP identifier goes. */
static inline uint64_t *l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
				 struct pkt *p, int inbound)
{
	uint32_t in_seg = rte_pktmbuf_data_len(m) - ETH_LEN - IP_LEN;
	uint32_t l4_len = rte_be_to_cpu_16(p->ip->total_length) - IP_LEN;
	uint32_t have = RTE_MIN(in_seg, l4_len);
	uint8_t *l4 = (uint8_t *)p->ip + IP_LEN;

	p->l4 = l4;
	switch (p->proto) {
	case IPPROTO_TCP:
		return tcp_parse(nat, l4, have, l4_len, &p->t, &p->tcp_flags);
	case IPPROTO_UDP: {
		const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)l4;

		if (unlikely(have < sizeof(*udp)))
			return &nat->st.truncated;
		p->t.sport = rte_be_to_cpu_16(udp->src_port);
		p->t.dport = rte_be_to_cpu_16(udp->dst_port);
		return NULL;
	}
	case IPPROTO_ICMP: {
		const struct rte_icmp_hdr *icmp =
			(const struct rte_icmp_hdr *)l4;
		uint16_t id;

		if (unlikely(have < sizeof(*icmp)))
			return &nat->st.truncated;
		if (unlikely(icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST &&
			     icmp->icmp_type != RTE_IP_ICMP_ECHO_REPLY))
			return &nat->st.icmp_unsupported;
		p->icmp_type = icmp->icmp_type;
		id = rte_be_to_cpu_16(icmp->icmp_ident);
		p->t.sport = inbound ? 0 : id;
		p->t.dport = inbound ? id : 0;
		return NULL;
	}
	default:
		return &nat->st.unknown_proto;
	}
}

/* The inside policy: nothing to the gateway itself, no multicast or
 * broadcast. */
static inline uint64_t *inside_dst_check(struct nsdp_nat *nat,
					 const struct pkt *p)
{
	if (unlikely(p->t.daddr == nat->conf.inside_addr ||
		     in_pool(nat, p->t.daddr)))
		return &nat->st.to_gateway;
	if (unlikely(p->t.daddr >= 0xe0000000u)) /* multicast, broadcast */
		return &nat->st.not_ours;
	return NULL;
}

/* An IPv6 frame received on the inside (NAT64 on): neighbour discovery,
 * NAT66's (NAT66 on, a destination outside the NAT64 prefix) or NAT64's;
 * m is consumed. */
static void inside6(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
		    struct nsdp_nat_tx *tx)
{
	struct pkt6 p;
	uint64_t *why = nsdp_nat6_check(nat, m, &p);

	if (unlikely(why != NULL)) {
		drop(m, why);
		return;
	}
	if (nsdp_nat_nd_take(nat, PORT_INSIDE, m, p.ip6, now, tx))
		return;
	if (nat->nat66 && nsdp_nat66_claims(nat, p.ip6))
		nsdp_nat66_inside(nat, m, &p, now, tx);
	else
		nsdp_nat64_inside(nat, m, &p, now, tx);
}

/* Ethernet demultiplexing common to both ports. Returns 1 when m is an
 * IPv4 frame for this port to process, 0 when it was consumed. */
static inline int frame_accept(struct nsdp_nat *nat, enum nat_port port,
			       struct rte_mbuf *m, uint64_t now,
			       struct nsdp_nat_tx *tx, struct pkt *p)
{
	struct rte_ether_hdr *eth;

	if (unlikely(rte_pktmbuf_data_len(m) < ETH_LEN)) {
		drop(m, &nat->st.truncated);
		return 0;
	}
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (unlikely(eth->ether_type !=
		     rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))) {
		if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
			nsdp_nat_arp_input(nat, port, m, now, tx);
		else if (eth->ether_type ==
				 rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) &&
			 port == PORT_INSIDE && nat->side6)
			inside6(nat, m, now, tx);
		else if (eth->ether_type ==
				 rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6) &&
			 nat->nat66)
			nsdp_nat66_outside(nat, m, now, tx);
		else
			drop(m, &nat->st.not_ipv4);
		return 0;
	}
	if (unlikely(nat->mode != NSDP_NAT_ACTIVE)) {
		drop(m, &nat->st.standby_drops);
		return 0;
	}
	if (unlikely(!rte_is_same_ether_addr(&eth->dst_addr,
					     &nat->port_mac[port]))) {
		drop(m, &nat->st.not_ours);
		return 0;
	}
	p->eth = eth;
	return 1;
}

/* Stage 1 for one frame received on port: every check that needs no
 * session. Returns 1 when p is a packet to look up, 0 when m was consumed
 * (ARP, or dropped and counted). */
static __rte_always_inline int
frame_parse(struct nsdp_nat *nat, enum nat_port port, struct rte_mbuf *m,
	    uint64_t now, struct nsdp_nat_tx *tx, struct pkt *p)
{
	int inbound = port == PORT_OUTSIDE;
	uint64_t *why;

	if (!frame_accept(nat, port, m, now, tx, p))
		return 0;
	why = ipv4_check(nat, m, p);
	if (likely(!why))
		why = inbound ? (in_pool(nat, p->t.daddr) ? NULL
							  : &nat->st.not_ours)
			      : inside_dst_check(nat, p);
	if (likely(!why) && unlikely(p->ip->time_to_live <= 1))
		why = &nat->st.ttl_expired;
	if (unlikely(!why && inbound && p->proto == IPPROTO_ICMP &&
		     nat->side6) &&
	    nsdp_nat64_icmp_outside(nat, m, p, now, tx) == 0)
		return 0;
	if (likely(!why))
		why = l4_parse(nat, m, p, inbound);
	if (likely(!why) && inbound &&
	    unlikely(p->proto == IPPROTO_ICMP &&
		     p->icmp_type != RTE_IP_ICMP_ECHO_REPLY))
		why = &nat->st.no_session;
	if (unlikely(why != NULL)) {
		drop(m, why);
		return 0;
	}
	if (!inbound)
		neigh_learn(nat, PORT_INSIDE, p->t.saddr, &p->eth->src_addr,
			    now);
	return 1;
}

/* Rewrite the source address and port (outbound) or the destination
 * address and port (inbound; for ICMP echo the identifier either way) and
 * decrement the TTL, updating every checksum. */
static inline void translate(struct pkt *p, int inbound, uint32_t addr_host,
			     uint16_t port_host)
{
	struct rte_ipv4_hdr *ip = p->ip;
	uint8_t *l4 = p->l4;
	rte_be32_t old_addr = inbound ? ip->dst_addr : ip->src_addr;
	rte_be32_t new_addr = rte_cpu_to_be_32(addr_host);
	uint16_t new_port = rte_cpu_to_be_16(port_host), old_port;
	uint16_t old_ttl = rte_cpu_to_be_16(
		(uint16_t)(ip->time_to_live << 8 | ip->next_proto_id));
	uint16_t new_ttl = rte_cpu_to_be_16(
		(uint16_t)((ip->time_to_live - 1) << 8 | ip->next_proto_id));
	uint32_t addr_delta = csum_delta32(0, old_addr, new_addr);
	size_t port_at, cksum_at;
	uint16_t c;

	ip->time_to_live--;
	if (inbound)
		ip->dst_addr = new_addr;
	else
		ip->src_addr = new_addr;
	ip->hdr_checksum = csum_apply(
		ip->hdr_checksum, csum_delta16(addr_delta, old_ttl, new_ttl));

	if (!l4_offsets(p->proto, inbound, &port_at, &cksum_at))
		addr_delta = 0; /* ICMP echo: no pseudo header */
	old_port = word_load(l4 + port_at);
	word_store(l4 + port_at, new_port);
	c = word_load(l4 + cksum_at);
	if (p->proto == IPPROTO_UDP && c == 0)
		return; /* no checksum, and none is added */
	c = csum_apply(c, csum_delta16(addr_delta, old_port, new_port));
	if (p->proto == IPPROTO_UDP && c == 0)
		c = 0xffff; /* 0 would mean "no checksum" */
	word_store(l4 + cksum_at, c);
}

/* ---- sessions ----------------------------------------------------- */

/* What session_touch() did. */
#define TOUCH_WROTE 1u /* the session was stored again (refresh) */
#define TOUCH_CLOSES 2u /* the packet ends the session (RST) */
#define TOUCH_REVIVED 4u /* with TOUCH_WROTE: the replicated copy had expired */
#define TOUCH_FRAGILE 8u /* with TOUCH_WROTE: side_replica_fragile */

/* A packet of the existing session s at pos: idle timer, TCP state,
 * refresh. */
static inline unsigned int session_touch(struct nsdp_nat *nat, int32_t pos,
					 struct ns_session *s,
					 const struct pkt *p, int inbound,
					 uint64_t now)
{
	struct side *sd = &nat->side[pos];
	unsigned int revived, fragile;

	if (unlikely(!side_owns(sd, s)))
		nsdp_nat_side_adopt(nat, sd, s, now);
	sd->last_seen_ns = now;
	if (p->proto == IPPROTO_TCP && tcp_track(sd, p->tcp_flags, inbound))
		return TOUCH_CLOSES;
	/* Before the refresh moves last_record_ns (refresh_due is true
	 * whenever this is). */
	revived = side_replica_expired(sd, now) ? TOUCH_REVIVED : 0;
	fragile = side_replica_fragile(sd, now) ? TOUCH_FRAGILE : 0;
	if (refresh_due(nat, sd, p->proto, now)) {
		nsdp_nat_session_refresh(nat, sd, s, now);
		if (unlikely(revived))
			NSDP_STAT_INC(nat->st.revived);
		return TOUCH_WROTE | revived | fragile;
	}
	return 0;
}

/* Why an outbound packet without a session may not open one, or NULL. */
static inline uint64_t *new_flow_refused(struct nsdp_nat *nat,
					 const struct pkt *p)
{
	if (p->proto == IPPROTO_TCP &&
	    (p->tcp_flags & TCP_FLAGS_SEEN) != RTE_TCP_SYN_FLAG)
		return &nat->st.tcp_no_session;
	if (p->proto == IPPROTO_ICMP &&
	    p->icmp_type != RTE_IP_ICMP_ECHO_REQUEST)
		return &nat->st.no_session;
	return NULL;
}

/* ---- a burst in stages -------------------------------------------- */

/* A burst between the stages, on the lcore's stack. Entry i is the i-th
 * frame that passed stage 1, in arrival order; m[i] is NULL once the
 * frame is dropped. */
struct burst {
	unsigned int n;
	struct rte_mbuf *m[NSDP_NAT_BURST];
	struct pkt p[NSDP_NAT_BURST];
	/* the lookup: keys in, results out */
	uint8_t proto[NSDP_NAT_BURST];
	struct ns_tuple key[NSDP_NAT_BURST];
	int32_t pos[NSDP_NAT_BURST];
	struct ns_session s[NSDP_NAT_BURST];
	uint8_t stale[NSDP_NAT_BURST];
	/* defer: the created session's record number, 0: not held */
	uint64_t defer[NSDP_NAT_BURST];
};

static inline int key_equal(const struct burst *b, unsigned int i,
			    unsigned int j)
{
	return b->proto[i] == b->proto[j] &&
	       b->key[i].saddr == b->key[j].saddr &&
	       b->key[i].daddr == b->key[j].daddr &&
	       b->key[i].sport == b->key[j].sport &&
	       b->key[i].dport == b->key[j].dport;
}

/* Packet i changed the entry at pos (created, refreshed or removed it):
 * the later packets that found that entry, or missed the key i created,
 * must look again. */
static inline void burst_invalidate(struct burst *b, unsigned int i,
				    int32_t pos)
{
	unsigned int j;

	for (j = i + 1; j < b->n; j++)
		if (b->pos[j] == pos || (b->pos[j] < 0 && key_equal(b, i, j)))
			b->stale[j] = 1;
}

/* Stage 3 for packet i, in arrival order: find (again, when stale),
 * create, touch or close its session, or drop it. An inbound packet no
 * NAT44 session takes may be NAT64 return traffic: that path takes it
 * whole (translated and forwarded here, ahead of the burst). */
static __rte_always_inline void burst_session(struct nsdp_nat *nat,
					      struct burst *b, unsigned int i,
					      int inbound, uint64_t now,
					      struct nsdp_nat_tx *tx)
{
	const struct pkt *p = &b->p[i];
	struct ns_session *s = &b->s[i];
	int32_t pos = b->pos[i];
	unsigned int touch;
	uint64_t *why;

	if (unlikely(b->stale[i]))
		pos = inbound ? nsdp_table_find_reply(nat->table, p->proto,
						      &p->t, s)
			      : nsdp_table_find(nat->table, p->proto, &p->t, s);
	if (pos >= 0) {
		touch = session_touch(nat, pos, s, p, inbound, now);
		/* A session whose copy the store and the standby no longer
		 * hold, or soon will not: its packet is held as a new one's
		 * first (an inbound one goes at once, as only the outside
		 * port holds). */
		if (unlikely(touch & TOUCH_FRAGILE) && nat->defer && !inbound)
			b->defer[i] = nat->rec_seq;
	} else {
		if (inbound && nat->side6 &&
		    nsdp_nat64_outside(nat, b->m[i], p, now, tx) == 0) {
			b->m[i] = NULL;
			return;
		}
		why = inbound ? &nat->st.no_session : new_flow_refused(nat, p);
		if (!why)
			pos = nsdp_nat_session_create(nat, p, now, s, &why);
		if (pos < 0) {
			drop(b->m[i], why);
			b->m[i] = NULL;
			return;
		}
		touch = TOUCH_WROTE;
		if (nat->defer) {
			b->defer[i] = nat->rec_seq;
			if (unlikely(nat->rec_seq == 0))
				NSDP_STAT_INC(nat->st.defer_unrecorded);
		}
	}
	if (touch & TOUCH_CLOSES) {
		/* s keeps the tuples the later stages translate with. */
		nsdp_nat_session_close(nat, pos, s, now);
		NSDP_STAT_INC(nat->st.closed);
	}
	if (touch)
		burst_invalidate(b, i, pos);
	b->pos[i] = pos;
}

/* The whole path for a burst received on rx; inlined into both public
 * entry points with rx constant. */
static __rte_always_inline void
nat_burst(struct nsdp_nat *nat, enum nat_port rx, struct rte_mbuf **pkts,
	  unsigned int n, uint64_t now, struct nsdp_nat_tx *tx)
{
	int inbound = rx == PORT_OUTSIDE;
	enum nat_port out = inbound ? PORT_INSIDE : PORT_OUTSIDE;
	struct burst b;
	unsigned int i;

	/* 1. parse; ARP and bad input are consumed here */
	for (i = 0; i < n; i++)
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
	b.n = 0;
	for (i = 0; i < n; i++) {
		struct pkt *p = &b.p[b.n];

		if (!frame_parse(nat, rx, pkts[i], now, tx, p))
			continue;
		b.m[b.n] = pkts[i];
		b.proto[b.n] = p->proto;
		b.key[b.n] = p->t;
		b.stale[b.n] = 0;
		b.defer[b.n] = 0;
		b.n++;
	}

	/* 2. look up all at once, then bring in the side state of hits */
	nsdp_table_find_bulk(nat->table, inbound, b.proto, b.key, b.n, b.pos,
			     b.s);
	for (i = 0; i < b.n; i++)
		if (b.pos[i] >= 0)
			rte_prefetch0(&nat->side[b.pos[i]]);

	/* 3. sessions, in arrival order */
	for (i = 0; i < b.n; i++)
		burst_session(nat, &b, i, inbound, now, tx);

	/* 4. translate */
	for (i = 0; i < b.n; i++) {
		if (!b.m[i])
			continue;
		if (inbound)
			translate(&b.p[i], 1, b.s[i].orig.saddr,
				  b.s[i].orig.sport);
		else
			translate(&b.p[i], 0, b.s[i].xlat.saddr,
				  b.s[i].xlat.sport);
	}

	/* 5. to the other port's tx list */
	for (i = 0; i < b.n; i++) {
		uint32_t nh;

		if (!b.m[i])
			continue;
		if (inbound)
			nh = b.s[i].orig.saddr;
		else
			nh = nat->conf.next_hop ? nat->conf.next_hop
						: b.p[i].t.daddr;
		forward(nat, tx, out, b.p[i].eth, b.m[i], nh, now, b.defer[i]);
	}
}

/* Every frame of pkts, in bursts of at most NSDP_NAT_BURST (a caller that
 * passes more still gets each one handled). */
static __rte_always_inline void
nat_input(struct nsdp_nat *nat, enum nat_port rx, struct rte_mbuf **pkts,
	  unsigned int n, uint64_t now, struct nsdp_nat_tx *tx)
{
	uint64_t *received =
		rx == PORT_INSIDE ? &nat->st.rx_inside : &nat->st.rx_outside;
	unsigned int done, k;

	NSDP_STAT_ADD(*received, n);
	for (done = 0; done < n; done += k) {
		k = RTE_MIN(n - done, (unsigned int)NSDP_NAT_BURST);
		nat_burst(nat, rx, pkts + done, k, now, tx);
	}
}

void nsdp_nat_inside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		     unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx)
{
	nat_input(nat, PORT_INSIDE, pkts, n, now_ns, tx);
}

void nsdp_nat_outside(struct nsdp_nat *nat, struct rte_mbuf **pkts,
		      unsigned int n, uint64_t now_ns, struct nsdp_nat_tx *tx)
{
	nat_input(nat, PORT_OUTSIDE, pkts, n, now_ns, tx);
}
