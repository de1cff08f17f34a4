/*
 * nsdp_nat64.c - stateful NAT64 (RFC 6146) in the fast path: inside IPv6
 * hosts reach IPv4 servers through the NAT64 prefix (a /96: the server's
 * IPv4 address is the destination's low 32 bits), translated to IPv4 from
 * the NAT44's pool and port allocator (RFC 7915 header translation), and
 * back.
 *
 * A NAT64 session is a family 64 record in the table's IPv6 table (its
 * prefix in the record), created, refreshed and closed as the NAT44's are,
 * with the same timeouts and TCP states, recorded with nsdp_record_v6(),
 * so a standby applies it and, promoted, forwards on it.
 *
 * Inside, IPv6 frames are taken one at a time (not in the NAT44's staged
 * bursts). Outside, a packet for a pool address is a NAT44 packet first:
 * only one that no NAT44 session takes is looked up here, by its IPv4
 * reply tuple, so NAT44 traffic pays nothing for NAT64.
 *
 * Translation: the IPv6 header (40 bytes) and the IPv4 header (20) replace
 * each other in place, the Ethernet header moving by 20 bytes (headroom
 * on the way in). TCP and UDP checksums are updated incrementally for the
 * pseudo-header and port change (RFC 1624), so a bad one stays bad; ICMP
 * echo <-> ICMPv6 echo changes type and identifier and takes the ICMPv6
 * pseudo-header out or in, incrementally as well. An IPv4 UDP datagram
 * without checksum gets one computed (IPv6 requires it); an IPv6 one
 * without checksum is dropped (udp6_zero_checksum). IPv4 packets of at
 * most 1260 bytes go without DF, with an identification of the gateway's,
 * bigger ones with DF (RFC 7915 section 5.1); traffic class and TOS are
 * copied, the flow label is 0.
 *
 * The ICMP errors of NAT64 sessions, both ways, are nsdp_nat64_icmp.c's;
 * the IPv6 header and L4 parse and the session's find, touch or create,
 * shared with NAT66, nsdp_nat6.c's. Inside IPv6 frames come here from the
 * NAT44's demultiplexer once it has told them from neighbour discovery
 * and from NAT66's (destinations outside the prefix, NAT66 on).
 *
 * Not done here: ICMP errors sent by the gateway itself, fragments (and
 * every extension header), prefixes other than a /96,
 * hairpinning, IPv4-initiated sessions.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_udp.h>

#include "nsdp_nat6.h"
#include "nsdp_nat64.h"
#include "nsdp_nat64_icmp.h"
#include "nsdp_nat_arp.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

/* RFC 7915 5.1: DF off (and an identification) up to this size. */
#define DF_THRESHOLD 1260u

/* ---- parsing ------------------------------------------------------ */

/* Destination policy: into the prefix, not to the gateway, not to an IPv4
 * multicast or broadcast address. Fills p->t.daddr. */
static inline uint64_t *nat64_dst_check(struct nsdp_nat *nat, struct pkt6 *p)
{
	const uint8_t *dst = p->ip6->dst_addr;
	uint32_t v4;

	if (unlikely(memcmp(dst, nat->conf.inside_addr6, 16) == 0))
		return &nat->st.to_gateway;
	if (unlikely(memcmp(dst, nat->conf.nat64_prefix, 12) != 0))
		return &nat->st.not_ours;
	memcpy(&v4, dst + 12, 4);
	p->t.daddr = rte_be_to_cpu_32(v4);
	if (unlikely(p->t.daddr == nat->conf.inside_addr ||
		     in_pool(nat, p->t.daddr)))
		return &nat->st.to_gateway;
	if (unlikely(p->t.daddr >= 0xe0000000u || p->t.daddr == 0))
		return &nat->st.not_ours;
	return NULL;
}

/* Every check of an inside IPv6 frame; NULL when p is a packet to
 * translate, else the counter of the reason to drop it. */
static uint64_t *frame6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			      struct pkt6 *p)
{
	uint64_t *why;

	if (unlikely(nat->mode != NSDP_NAT_ACTIVE))
		return &nat->st.standby_drops;
	if (unlikely(!rte_is_same_ether_addr(&p->eth->dst_addr,
					     &nat->port_mac[PORT_INSIDE])))
		return &nat->st.not_ours;
	why = nat64_dst_check(nat, p);
	if (!why && unlikely(p->ip6->hop_limits <= 1))
		why = &nat->st.ttl_expired;
	if (!why)
		why = nsdp_nat6_l4_parse(nat, m, p);
	return why;
}

/* ---- translation -------------------------------------------------- */

/* IPv6 -> IPv4 (RFC 7915 section 5) of p for session s: returns the
 * Ethernet header, 20 bytes further on. */
static struct rte_ether_hdr *xlat_6to4(struct nsdp_nat *nat, struct rte_mbuf *m,
				       struct pkt6 *p,
				       const struct ns_session *s)
{
	struct rte_ipv6_hdr h6 = *p->ip6;
	struct rte_ether_hdr eth = *p->eth;
	uint16_t len = rte_be_to_cpu_16(h6.payload_len);
	struct rte_ipv4_hdr *ip =
		(struct rte_ipv4_hdr *)((uint8_t *)p->ip6 + GROWTH);
	struct rte_ether_hdr *e = (struct rte_ether_hdr *)ip - 1;
	int icmp = p->proto == IPPROTO_ICMPV6;
	uint32_t delta =
		csum_addr6(csum_addr6(0, h6.src_addr, 0), h6.dst_addr, 0);
	uint16_t total = (uint16_t)(len + IP_LEN);

	memset(ip, 0, IP_LEN);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = (uint8_t)(rte_be_to_cpu_32(h6.vtc_flow) >>
					RTE_IPV6_HDR_TC_SHIFT);
	ip->total_length = rte_cpu_to_be_16(total);
	if (total <= DF_THRESHOLD)
		ip->packet_id = rte_cpu_to_be_16(nat->ip_id++);
	else
		ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = (uint8_t)(h6.hop_limits - 1);
	ip->next_proto_id = icmp ? IPPROTO_ICMP : p->proto;
	ip->src_addr = rte_cpu_to_be_32(s->xlat.saddr);
	ip->dst_addr = rte_cpu_to_be_32(s->xlat.daddr);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	*e = eth;
	e->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	rte_pktmbuf_adj(m, GROWTH);
	frame_fit(m, ETH_LEN + total);

	if (icmp)
		delta = csum_icmp6_len(delta, len, 0);
	else
		delta = csum_delta32(csum_delta32(delta, 0, ip->src_addr), 0,
				     ip->dst_addr);
	l4_rewrite(icmp ? IPPROTO_ICMP : p->proto, p->l4, 0, s->xlat.sport,
		   RTE_IP_ICMP_ECHO_REQUEST, delta);
	return e;
}

/* IPv4 -> IPv6 (RFC 7915 section 4) of p for session r: returns the
 * Ethernet header, 20 bytes further back, or NULL when m has no headroom
 * for it (m untouched). */
static struct rte_ether_hdr *xlat_4to6(struct rte_mbuf *m, const struct pkt *p,
				       const struct ns_rec *r)
{
	struct rte_ipv4_hdr h4 = *p->ip;
	struct rte_ether_hdr eth = *p->eth;
	uint16_t len = (uint16_t)(rte_be_to_cpu_16(h4.total_length) - IP_LEN);
	int icmp = p->proto == IPPROTO_ICMP;
	struct rte_ether_hdr *e;
	struct rte_ipv6_hdr *ip6;
	uint32_t delta = 0;
	uint8_t *l4 = p->l4;

	e = (struct rte_ether_hdr *)rte_pktmbuf_prepend(m, GROWTH);
	if (unlikely(!e))
		return NULL;
	*e = eth;
	e->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6 = (struct rte_ipv6_hdr *)(e + 1);
	ip6->vtc_flow =
		rte_cpu_to_be_32(6u << 28 | (uint32_t)h4.type_of_service
						    << RTE_IPV6_HDR_TC_SHIFT);
	ip6->payload_len = rte_cpu_to_be_16(len);
	frame_fit(m, ETH_LEN + IP6_LEN + len);
	ip6->proto = icmp ? IPPROTO_ICMPV6 : p->proto;
	ip6->hop_limits = (uint8_t)(h4.time_to_live - 1);
	memcpy(ip6->src_addr, r->v6.orig_daddr, 16);
	memcpy(ip6->dst_addr, r->v6.orig_saddr, 16);

	if (p->proto == IPPROTO_UDP &&
	    ((struct rte_udp_hdr *)l4)->dgram_cksum == 0) {
		struct rte_udp_hdr *udp = (struct rte_udp_hdr *)l4;

		udp->dst_port = rte_cpu_to_be_16(r->s.orig.sport);
		udp->dgram_cksum = rte_ipv6_udptcp_cksum(ip6, udp);
		return e;
	}
	if (icmp) {
		delta = csum_icmp6_len(delta, len, 1);
	} else {
		delta = csum_delta32(csum_delta32(delta, h4.src_addr, 0),
				     h4.dst_addr, 0);
	}
	delta = csum_addr6(csum_addr6(delta, ip6->src_addr, 1), ip6->dst_addr,
			   1);
	l4_rewrite(p->proto, l4, 1, r->s.orig.sport, ICMP6_ECHO_REPLY, delta);
	return e;
}

/* ---- sessions and forwarding -------------------------------------- */

void nsdp_nat64_inside(struct nsdp_nat *nat, struct rte_mbuf *m, struct pkt6 *p,
		       uint64_t now, struct nsdp_nat_tx *tx)
{
	struct rte_ether_hdr *eth;
	uint64_t *why, defer_seq;
	struct ns_rec r;

	why = frame6_check(nat, m, p);
	if (unlikely(why != NULL)) {
		drop(m, why);
		return;
	}
	nsdp_nat_neigh6_learn(nat, PORT_INSIDE, p->ip6->src_addr,
			      &p->eth->src_addr, now);
	if (unlikely(p->proto == IPPROTO_ICMPV6 && p->icmp_type < 128)) {
		nsdp_nat64_icmp_inside(nat, m, p, now, tx);
		return;
	}
	if (nsdp_nat6_session_out(nat, p, now, nsdp_nat64_session_create, &r,
				  &defer_seq, &why) != 0) {
		drop(m, why);
		return;
	}
	eth = xlat_6to4(nat, m, p, &r.s);
	forward(nat, tx, PORT_OUTSIDE, eth, m,
		nat->conf.next_hop ? nat->conf.next_hop : r.s.xlat.daddr, now,
		defer_seq);
}

int nsdp_nat64_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
		       const struct pkt *p, uint64_t now,
		       struct nsdp_nat_tx *tx)
{
	uint8_t proto = p->proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 : p->proto;
	struct rte_ether_hdr *eth;
	struct ns_rec r;
	int32_t pos;
	int closes;

	pos = nsdp_table_find_reply64(nat->table, proto, &p->t, &r);
	if (pos < 0)
		return -ENOENT;
	closes = nsdp_nat6_session_touch(nat, pos, &r, p->tcp_flags, 1, now) ==
		 NSDP_NAT6_CLOSES;
	if (closes) {
		nsdp_nat64_session_close(nat, pos, &r, now);
		NSDP_STAT_INC(nat->st.closed);
	}
	if (unlikely(p->proto == IPPROTO_UDP &&
		     ((const struct rte_udp_hdr *)p->l4)->dgram_cksum == 0 &&
		     !rte_pktmbuf_is_contiguous(m))) {
		drop(m, &nat->st.truncated); /* a sum to compute over it all */
		return 0;
	}
	eth = xlat_4to6(m, p, &r);
	if (unlikely(!eth)) {
		drop(m, &nat->st.alloc_failures);
		return 0;
	}
	forward6(nat, tx, PORT_INSIDE, eth, m, r.v6.orig_saddr, now, 0);
	return 0;
}

/* ---- housekeeping and promotion ----------------------------------- */

void nsdp_nat64_housekeep(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx)
{
	uint32_t n = nat->n_positions6, slice, i;

	if (nat->announce6 && tx_room(tx, PORT_INSIDE)) {
		nat->announce6 = 0;
		nsdp_nat_nd_announce(nat, PORT_INSIDE, tx);
	}
	slice = sweep_slice(nat, n, now);
	for (i = 0; i < slice; i++) {
		uint32_t pos = nat->sweep_pos6;
		struct side6 *sd6 = &nat->side6[pos];
		struct ns_rec r;

		nat->sweep_pos6 = pos + 1 < n ? pos + 1 : 0;
		if (!sd6->sd.live ||
		    sd6->sd.last_seen_ns + (uint64_t)sd6->sd.timeout_ms *
						   NAT_NS_PER_MS >
			    now)
			continue;
		if (nsdp_table_at_v6(nat->table, pos, &r) != 0 ||
		    !side6_owns(sd6, &r)) {
			sd6->sd.live = 0; /* the session went another way */
			continue;
		}
		nsdp_nat64_session_close(nat, (int32_t)pos, &r, now);
		NSDP_STAT_INC(nat->st.expired);
	}
}

void nsdp_nat64_rebuild(struct nsdp_nat *nat, uint64_t now)
{
	struct ns_rec r;
	uint32_t pos;

	memset(nat->side6, 0, (size_t)nat->n_positions6 * sizeof(*nat->side6));
	for (pos = 0; pos < nat->n_positions6; pos++) {
		if (nsdp_table_at_v6(nat->table, pos, &r) != 0 ||
		    (r.s.family == NS_FAMILY_NAT66 && !nat->nat66))
			continue;
		nsdp_nat6_port_mark(nat, &r);
		nsdp_nat64_side_adopt(nat, &nat->side6[pos], &r, now);
	}
	nat->sweep_pos6 = 0;
}

int nsdp_nat64_init(struct nsdp_nat *nat)
{
	unsigned int i;

	nat->n_positions6 = nsdp_table_positions_v6(nat->table);
	if (nat->n_positions6 == 0)
		return -EINVAL;
	nat->side6 =
		rte_zmalloc("nsdp_nat_side6",
			    (size_t)nat->n_positions6 * sizeof(struct side6),
			    RTE_CACHE_LINE_SIZE);
	for (i = 0; i < 2; i++)
		nat->neigh6[i] = rte_zmalloc("nsdp_nat_neigh6",
					     (size_t)NEIGH6_SETS * NEIGH_WAYS *
						     sizeof(struct neigh6),
					     RTE_CACHE_LINE_SIZE);
	if (!nat->side6 || !nat->neigh6[0] || !nat->neigh6[1])
		return -ENOMEM;
	return 0;
}

void nsdp_nat64_fini(struct nsdp_nat *nat)
{
	unsigned int i;

	rte_free(nat->side6);
	nat->side6 = NULL;
	for (i = 0; i < 2; i++) {
		rte_free(nat->neigh6[i]);
		nat->neigh6[i] = NULL;
	}
}
