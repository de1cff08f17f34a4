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
 * ICMP errors (RFC 7915 4.2 and 5.2, RFC 6146 3.5.3): an outside ICMPv4
 * destination unreachable, time exceeded or parameter problem whose
 * embedded packet is one a NAT64 session sent becomes the ICMPv6 error
 * RFC 7915 maps it to (fragmentation needed: Packet Too Big, the MTU 20
 * more), from the prefix's address of its sender to the inside host;
 * an inside ICMPv6 error about a packet a session delivered becomes an
 * ICMPv4 one from the session's pool address. The embedded packet is
 * translated back as the session translated it (addresses, port or echo
 * identifier, its checksum updated incrementally when the quote holds
 * it); the outer checksum is computed from scratch, over at most 1280
 * (IPv6) or 576 (IPv4) bytes. An error refreshes no session. Errors of
 * no session, with a bad checksum or a truncated or malformed quote are
 * dropped and counted; types and codes RFC 7915 does not map count as
 * icmp_unsupported.
 *
 * Inside IPv6 frames to destinations outside the prefix are NAT66's
 * (nsdp_nat66.c) when it is on, which parses them with this file's
 * parsers.
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

#include "nsdp_nat64.h"
#include "nsdp_nat66.h"
#include "nsdp_nat_arp.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

#define IP6_LEN ((uint32_t)sizeof(struct rte_ipv6_hdr))
/* What the IPv6 header has more than the IPv4 one. */
#define GROWTH (IP6_LEN - IP_LEN)
/* RFC 7915 5.1: DF off (and an identification) up to this size. */
#define DF_THRESHOLD 1260u

/* ---- parsing ------------------------------------------------------ */

static inline uint64_t *ipv6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
				   struct pkt6 *p)
{
	struct rte_ipv6_hdr *ip6;

	if (unlikely(rte_pktmbuf_data_len(m) < ETH_LEN + IP6_LEN))
		return &nat->st.truncated;
	ip6 = rte_pktmbuf_mtod_offset(m, struct rte_ipv6_hdr *, ETH_LEN);
	if (unlikely((rte_be_to_cpu_32(ip6->vtc_flow) >> 28) != 6 ||
		     rte_be_to_cpu_16(ip6->payload_len) >
			     rte_pktmbuf_pkt_len(m) - ETH_LEN - IP6_LEN))
		return &nat->st.bad_ip_header;
	p->eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	p->ip6 = ip6;
	p->proto = ip6->proto;
	p->l4 = ip6 + 1;
	return NULL;
}

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

static inline uint64_t *l4_parse6(struct nsdp_nat *nat, struct rte_mbuf *m,
				  struct pkt6 *p)
{
	uint32_t len = rte_be_to_cpu_16(p->ip6->payload_len);
	uint32_t have =
		RTE_MIN(rte_pktmbuf_data_len(m) - ETH_LEN - IP6_LEN, len);
	const uint8_t *l4 = p->l4;

	p->t.saddr = 0;
	switch (p->proto) {
	case IPPROTO_TCP:
		return tcp_parse(nat, l4, have, len, &p->t, &p->tcp_flags);
	case IPPROTO_UDP: {
		const struct rte_udp_hdr *udp = p->l4;

		if (unlikely(have < sizeof(*udp)))
			return &nat->st.truncated;
		if (unlikely(udp->dgram_cksum == 0))
			return &nat->st.udp6_zero_checksum;
		p->t.sport = rte_be_to_cpu_16(udp->src_port);
		p->t.dport = rte_be_to_cpu_16(udp->dst_port);
		return NULL;
	}
	case IPPROTO_ICMPV6:
		if (unlikely(have < sizeof(struct rte_icmp_hdr)))
			return &nat->st.truncated;
		p->icmp_type = l4[0];
		if (p->icmp_type >= 1 && p->icmp_type <= 4) {
			p->t.sport = p->t.dport = 0; /* an error: its quote */
			return NULL;
		}
		if (p->icmp_type == ICMP6_ECHO_REPLY)
			return &nat->st.no_session; /* only source NAT */
		if (p->icmp_type != ICMP6_ECHO_REQUEST)
			return &nat->st.icmp_unsupported;
		p->t.sport = rte_be_to_cpu_16(
			((const struct rte_icmp_hdr *)l4)->icmp_ident);
		p->t.dport = 0;
		return NULL;
	case IPPROTO_FRAGMENT:
		return &nat->st.fragments;
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
		return &nat->st.ip6_ext_headers;
	default:
		return &nat->st.unknown_proto;
	}
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
		why = l4_parse6(nat, m, p);
	return why;
}

uint64_t *nsdp_nat6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			  struct pkt6 *p)
{
	return ipv6_check(nat, m, p);
}

uint64_t *nsdp_nat6_l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
			     struct pkt6 *p)
{
	uint64_t *why = l4_parse6(nat, m, p);

	/* NAT66 translates no ICMPv6 error (NAT64's are icmp6_error_inside's). */
	if (!why && p->proto == IPPROTO_ICMPV6 && p->icmp_type < 128)
		return &nat->st.icmp_unsupported;
	return why;
}

/* ---- translation -------------------------------------------------- */

/* Checksum delta of taking the 16-byte address a out (or, with add, in). */
static inline uint32_t csum_addr6(uint32_t acc, const uint8_t *a, int add)
{
	unsigned int i;

	for (i = 0; i < 16; i += 2)
		acc = add ? csum_delta16(acc, 0, word_load(a + i))
			  : csum_delta16(acc, word_load(a + i), 0);
	return acc;
}

/* The ICMPv6 pseudo-header's length and next header words, out or in. */
static inline uint32_t csum_icmp6_len(uint32_t acc, uint16_t len, int add)
{
	uint16_t l = rte_cpu_to_be_16(len), nh = rte_cpu_to_be_16(58);

	if (add)
		return csum_delta16(csum_delta16(acc, 0, l), 0, nh);
	return csum_delta16(csum_delta16(acc, l, 0), nh, 0);
}

/* The L4 part of a translation: the port (or identifier) at port_at goes
 * to new_port, the ICMP type to new_type (ICMP), and delta (the
 * pseudo-header change) is applied to the checksum. */
static inline void l4_rewrite(uint8_t proto, uint8_t *l4, int inbound,
			      uint16_t new_port, uint8_t new_type,
			      uint32_t delta)
{
	size_t port_at, cksum_at;
	uint16_t old, new, c;

	if (!l4_offsets(proto, inbound, &port_at, &cksum_at)) {
		old = word_load(l4); /* echo: the type changes too */
		l4[0] = new_type;
		delta = csum_delta16(delta, old, word_load(l4));
	}
	old = word_load(l4 + port_at);
	new = rte_cpu_to_be_16(new_port);
	word_store(l4 + port_at, new);
	c = csum_apply(word_load(l4 + cksum_at), csum_delta16(delta, old, new));
	if (proto == IPPROTO_UDP && c == 0)
		c = 0xffff;
	word_store(l4 + cksum_at, c);
}

/* Cut what follows the packet (Ethernet padding): the other family's
 * header length differs, so the padding would no longer be at the end of
 * a minimum frame. */
static inline void frame_fit(struct rte_mbuf *m, uint32_t len)
{
	if (rte_pktmbuf_pkt_len(m) > len)
		rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_pkt_len(m) - len));
}

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

static void icmp6_error_inside(struct nsdp_nat *nat, struct rte_mbuf *m,
			       const struct pkt6 *p, uint64_t now,
			       struct nsdp_nat_tx *tx);

/* ---- sessions and forwarding -------------------------------------- */

static inline int side6_owns(const struct side6 *sd6, const struct ns_rec *r)
{
	return side_owns(&sd6->sd, &r->s) &&
	       memcmp(sd6->saddr, r->v6.orig_saddr, 16) == 0 &&
	       memcmp(sd6->daddr, r->v6.orig_daddr, 16) == 0;
}

/* A packet of the existing session r at pos: idle timer, TCP state,
 * refresh. 1 when the packet ends the session (RST). */
static int session6_touch(struct nsdp_nat *nat, int32_t pos, struct ns_rec *r,
			  uint8_t tcp_flags, int inbound, uint64_t now)
{
	struct side6 *sd6 = &nat->side6[pos];
	struct side *sd = &sd6->sd;

	if (unlikely(!side6_owns(sd6, r)))
		nsdp_nat64_side_adopt(nat, sd6, r, now);
	sd->last_seen_ns = now;
	if (r->s.proto == IPPROTO_TCP && tcp_track(sd, tcp_flags, inbound))
		return 1;
	if (refresh_due(nat, sd, r->s.proto, now))
		nsdp_nat64_session_refresh(nat, sd, r, now);
	return 0;
}

int nsdp_nat6_session_touch(struct nsdp_nat *nat, int32_t pos, struct ns_rec *r,
			    uint8_t tcp_flags, int inbound, uint64_t now)
{
	return session6_touch(nat, pos, r, tcp_flags, inbound, now);
}

void nsdp_nat64_inside(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
		       struct nsdp_nat_tx *tx)
{
	struct rte_ether_hdr *eth;
	uint64_t *why, defer_seq = 0;
	struct ns_rec r;
	struct pkt6 p;
	int32_t pos;
	int closes = 0;

	why = ipv6_check(nat, m, &p);
	if (!why && nsdp_nat_nd_take(nat, PORT_INSIDE, m, p.ip6, now, tx))
		return;
	if (!why && nat->nat66 && nsdp_nat66_claims(nat, p.ip6)) {
		nsdp_nat66_inside(nat, m, &p, now, tx);
		return;
	}
	if (!why)
		why = frame6_check(nat, m, &p);
	if (unlikely(why != NULL)) {
		drop(m, why);
		return;
	}
	nsdp_nat_neigh6_learn(nat, PORT_INSIDE, p.ip6->src_addr,
			      &p.eth->src_addr, now);
	if (unlikely(p.proto == IPPROTO_ICMPV6 && p.icmp_type < 128)) {
		icmp6_error_inside(nat, m, &p, now, tx);
		return;
	}
	pos = nsdp_table_find_v6(nat->table, p.proto, p.ip6->src_addr,
				 p.t.sport, p.ip6->dst_addr, p.t.dport, &r);
	if (pos >= 0) {
		closes = session6_touch(nat, pos, &r, p.tcp_flags, 0, now);
	} else {
		if (p.proto == IPPROTO_TCP &&
		    (p.tcp_flags & TCP_FLAGS_SEEN) != RTE_TCP_SYN_FLAG) {
			drop(m, &nat->st.tcp_no_session);
			return;
		}
		pos = nsdp_nat64_session_create(nat, &p, now, &r, &why);
		if (pos < 0) {
			drop(m, why);
			return;
		}
		if (nat->defer) {
			defer_seq = nat->rec_seq;
			if (unlikely(defer_seq == 0))
				NSDP_STAT_INC(nat->st.defer_unrecorded);
		}
	}
	if (closes) {
		nsdp_nat64_session_close(nat, pos, &r, now);
		NSDP_STAT_INC(nat->st.closed);
	}
	eth = xlat_6to4(nat, m, &p, &r.s);
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
	closes = session6_touch(nat, pos, &r, p->tcp_flags, 1, now);
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
	return nsdp_nat66_init(nat);
}

void nsdp_nat64_fini(struct nsdp_nat *nat)
{
	unsigned int i;

	nsdp_nat66_fini(nat);
	rte_free(nat->side6);
	nat->side6 = NULL;
	for (i = 0; i < 2; i++) {
		rte_free(nat->neigh6[i]);
		nat->neigh6[i] = NULL;
	}
}

/* ---- ICMP errors (RFC 7915 sections 4.2 and 5.2, RFC 6146 3.5.3) --- */

#define ICMP4_UNREACH 3
#define ICMP4_TIME_EXCEEDED 11
#define ICMP4_PARAM_PROBLEM 12
/* An ICMPv6 error fits the IPv6 minimum MTU, an ICMPv4 one 576 bytes. */
#define ICMP6_ERR_MAX (1280u - IP6_LEN)
#define ICMP4_ERR_MAX (576u - IP_LEN)
#define ICMP_HDR 8u
/* The embedded packet: its IP header and the 8 bytes with the ports. */
#define INNER_L4_MIN 8u

/* An error's type, code and the word after the checksum (host order) in
 * the other family; what RFC 7915 maps, the rest drops. */
struct icmp_xlat {
	uint8_t type, code;
	uint32_t rest;
};

/* RFC 7915 figure 3: an IPv4 Parameter Problem pointer to IPv6, -1 for
 * the fields without counterpart. */
static const int8_t ptr_4to6[20] = {0,	1,  4, 4, -1, -1, -1, -1, 7,  6,
				    -1, -1, 8, 8, 8,  8,  24, 24, 24, 24};

static int icmp_map_4to6(const uint8_t *icmp, struct icmp_xlat *x)
{
	uint8_t code = icmp[1];
	uint16_t mtu;

	x->rest = 0;
	switch (icmp[0]) {
	case ICMP4_UNREACH:
		x->type = 1;
		switch (code) {
		case 2: /* protocol unreachable: the next header field */
			x->type = 4;
			x->code = 1;
			x->rest = 6;
			return 0;
		case 3:
			x->code = 4;
			return 0;
		case 4: /* fragmentation needed: Packet Too Big */
			mtu = (uint16_t)(icmp[6] << 8 | icmp[7]);
			if (mtu < 68)
				return -1; /* no plateau guessing */
			x->type = 2;
			x->code = 0;
			x->rest = mtu + GROWTH;
			return 0;
		case 9:
		case 10:
		case 13:
		case 15:
			x->code = 1;
			return 0;
		case 0:
		case 1:
		case 5:
		case 6:
		case 7:
		case 8:
		case 11:
		case 12:
			x->code = 0;
			return 0;
		}
		return -1;
	case ICMP4_TIME_EXCEEDED:
		x->type = 3;
		x->code = code;
		return code <= 1 ? 0 : -1;
	case ICMP4_PARAM_PROBLEM:
		if ((code != 0 && code != 2) || icmp[4] >= RTE_DIM(ptr_4to6) ||
		    ptr_4to6[icmp[4]] < 0)
			return -1;
		x->type = 4;
		x->code = 0;
		x->rest = (uint32_t)ptr_4to6[icmp[4]];
		return 0;
	}
	return -1;
}

/* RFC 7915 figure 6: an IPv6 Parameter Problem pointer to IPv4. */
static int ptr_6to4(uint32_t ptr)
{
	static const int8_t head[8] = {0, 1, -1, -1, 2, 2, 9, 8};

	if (ptr < 8)
		return head[ptr];
	if (ptr < 24)
		return 12;
	if (ptr < 40)
		return 16;
	return -1;
}

static int icmp_map_6to4(const uint8_t *icmp, struct icmp_xlat *x)
{
	static const uint8_t unreach[5] = {1, 10, 1, 1, 3};
	uint32_t word, code = icmp[1];
	int ptr;

	memcpy(&word, icmp + 4, 4);
	word = rte_be_to_cpu_32(word);
	x->rest = 0;
	switch (icmp[0]) {
	case 1: /* destination unreachable */
		if (code >= RTE_DIM(unreach))
			return -1;
		x->type = ICMP4_UNREACH;
		x->code = unreach[code];
		return 0;
	case 2: /* Packet Too Big: fragmentation needed */
		if (word <= GROWTH + 68)
			return -1;
		x->type = ICMP4_UNREACH;
		x->code = 4;
		x->rest = RTE_MIN(word - GROWTH, 0xffffu);
		return 0;
	case 3:
		x->type = ICMP4_TIME_EXCEEDED;
		x->code = (uint8_t)code;
		return code <= 1 ? 0 : -1;
	case 4:
		if (code == 1) { /* unrecognised next header */
			x->type = ICMP4_UNREACH;
			x->code = 2;
			return 0;
		}
		ptr = code == 0 ? ptr_6to4(word) : -1;
		if (ptr < 0)
			return -1;
		x->type = ICMP4_PARAM_PROBLEM;
		x->code = 0;
		x->rest = (uint32_t)ptr << 24;
		return 0;
	}
	return -1;
}

/* The embedded packet's L4 bytes (have of them) after its header moved
 * to the other family: the port (or echo identifier) at the inside end
 * becomes port, an echo's type new_type, and its checksum takes delta,
 * when the quote holds it (a TCP quote of 8 bytes does not) and a UDP
 * one has one. */
static void inner_l4_rewrite(uint8_t proto, uint8_t *l4, uint32_t have,
			     int inbound, uint16_t port, uint8_t new_type,
			     uint32_t delta)
{
	size_t port_at, cksum_at;
	int has_sum;

	l4_offsets(proto, inbound, &port_at, &cksum_at);
	has_sum = have >= cksum_at + 2 &&
		  !(proto == IPPROTO_UDP && word_load(l4 + cksum_at) == 0);
	if (has_sum) {
		l4_rewrite(proto, l4, inbound, port, new_type, delta);
		return;
	}
	if (proto == IPPROTO_ICMP)
		l4[0] = new_type;
	word_store(l4 + port_at, rte_cpu_to_be_16(port));
}

/* The frame of m becomes len bytes at the default headroom (what it held
 * was copied out): 0, or -ENOBUFS when it does not fit. */
static int frame_reset(struct rte_mbuf *m, uint32_t len)
{
	if (!rte_pktmbuf_is_contiguous(m) ||
	    m->buf_len < RTE_PKTMBUF_HEADROOM + len)
		return -ENOBUFS;
	m->data_off = RTE_PKTMBUF_HEADROOM;
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	return 0;
}

/* The outside error's embedded IPv4 packet (quote, qlen bytes), one of a
 * NAT64 session's outbound packets: its session into r. NULL, or the
 * reason to drop. */
static uint64_t *inner4_session(struct nsdp_nat *nat, const uint8_t *quote,
				uint32_t qlen, struct ns_rec *r)
{
	const struct rte_ipv4_hdr *in = (const struct rte_ipv4_hdr *)quote;
	uint32_t ihl = (uint32_t)(in->version_ihl & 0xf) * 4;
	const uint8_t *l4 = quote + ihl;
	struct ns_tuple t;
	uint8_t proto = in->next_proto_id;

	if ((in->version_ihl >> 4) != 4 || ihl < IP_LEN ||
	    qlen < ihl + INNER_L4_MIN ||
	    rte_be_to_cpu_16(in->total_length) < ihl + INNER_L4_MIN ||
	    (rte_be_to_cpu_16(in->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK))
		return &nat->st.icmp_error_bad;
	t.saddr = rte_be_to_cpu_32(in->dst_addr);
	t.daddr = rte_be_to_cpu_32(in->src_addr);
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		t.sport = (uint16_t)(l4[2] << 8 | l4[3]);
		t.dport = (uint16_t)(l4[0] << 8 | l4[1]);
	} else if (proto == IPPROTO_ICMP && l4[0] == RTE_IP_ICMP_ECHO_REQUEST) {
		proto = IPPROTO_ICMPV6;
		t.sport = 0;
		t.dport = (uint16_t)(l4[4] << 8 | l4[5]);
	} else {
		return &nat->st.icmp_error_no_session;
	}
	if (nsdp_table_find_reply64(nat->table, proto, &t, r) < 0)
		return &nat->st.icmp_error_no_session;
	return NULL;
}

/* The ICMPv6 message for the IPv4 error icmp (len bytes, its embedded
 * packet that of session r) into out: its length. */
static uint32_t icmp6_body(const uint8_t *icmp, uint32_t len,
			   const struct icmp_xlat *x, const struct ns_rec *r,
			   uint8_t *out)
{
	const struct rte_ipv4_hdr *in =
		(const struct rte_ipv4_hdr *)(icmp + ICMP_HDR);
	uint32_t ihl = (uint32_t)(in->version_ihl & 0xf) * 4;
	uint32_t have = RTE_MIN(len - ICMP_HDR - ihl,
				ICMP6_ERR_MAX - ICMP_HDR - IP6_LEN);
	struct rte_ipv6_hdr *ip6 = (struct rte_ipv6_hdr *)(out + ICMP_HDR);
	uint8_t *l4 = out + ICMP_HDR + IP6_LEN;
	uint16_t plen = (uint16_t)(rte_be_to_cpu_16(in->total_length) - ihl);
	int echo = in->next_proto_id == IPPROTO_ICMP;
	uint32_t rest = rte_cpu_to_be_32(x->rest), delta = 0;

	out[0] = x->type;
	out[1] = x->code;
	memset(out + 2, 0, 2);
	memcpy(out + 4, &rest, 4);
	ip6->vtc_flow =
		rte_cpu_to_be_32(6u << 28 | (uint32_t)in->type_of_service
						    << RTE_IPV6_HDR_TC_SHIFT);
	ip6->payload_len = rte_cpu_to_be_16(plen);
	ip6->proto = echo ? IPPROTO_ICMPV6 : in->next_proto_id;
	ip6->hop_limits = in->time_to_live;
	memcpy(ip6->src_addr, r->v6.orig_saddr, 16);
	memcpy(ip6->dst_addr, r->v6.orig_daddr, 16);
	memcpy(l4, (const uint8_t *)in + ihl, have);
	if (echo)
		delta = csum_icmp6_len(delta, plen, 1);
	else
		delta = csum_delta32(csum_delta32(delta, in->src_addr, 0),
				     in->dst_addr, 0);
	delta = csum_addr6(csum_addr6(delta, ip6->src_addr, 1), ip6->dst_addr,
			   1);
	inner_l4_rewrite(echo ? IPPROTO_ICMP : in->next_proto_id, l4, have, 0,
			 r->s.orig.sport, ICMP6_ECHO_REQUEST, delta);
	return ICMP_HDR + IP6_LEN + have;
}

int nsdp_nat64_icmp_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
			    const struct pkt *p, uint64_t now,
			    struct nsdp_nat_tx *tx)
{
	const uint8_t *icmp = (const uint8_t *)p->ip + IP_LEN;
	uint32_t len = rte_be_to_cpu_16(p->ip->total_length) - IP_LEN;
	uint8_t out[ICMP6_ERR_MAX] __rte_aligned(8);
	struct rte_ether_hdr eth = *p->eth, *e;
	struct rte_ipv6_hdr *ip6;
	struct icmp_xlat x;
	struct ns_rec r;
	uint64_t *why;
	uint32_t n;
	uint8_t tos = p->ip->type_of_service, ttl = p->ip->time_to_live;
	rte_be32_t src = p->ip->src_addr;
	uint16_t c;

	if (rte_pktmbuf_data_len(m) < ETH_LEN + IP_LEN + 1 ||
	    (icmp[0] != ICMP4_UNREACH && icmp[0] != ICMP4_TIME_EXCEEDED &&
	     icmp[0] != ICMP4_PARAM_PROBLEM))
		return -ENOENT;
	frame_fit(m, ETH_LEN + IP_LEN + len);
	if (!rte_pktmbuf_is_contiguous(m))
		why = &nat->st.truncated;
	else if (len < ICMP_HDR + IP_LEN + INNER_L4_MIN ||
		 rte_raw_cksum(icmp, len) != 0xffff)
		why = &nat->st.icmp_error_bad;
	else if (icmp_map_4to6(icmp, &x) != 0)
		why = &nat->st.icmp_unsupported;
	else
		why = inner4_session(nat, icmp + ICMP_HDR, len - ICMP_HDR, &r);
	if (why) {
		drop(m, why);
		return 0;
	}
	n = icmp6_body(icmp, len, &x, &r, out);
	if (frame_reset(m, ETH_LEN + IP6_LEN + n) != 0) {
		drop(m, &nat->st.alloc_failures);
		return 0;
	}
	e = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	*e = eth;
	e->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	ip6 = (struct rte_ipv6_hdr *)(e + 1);
	ip6->vtc_flow = rte_cpu_to_be_32(
		6u << 28 | (uint32_t)tos << RTE_IPV6_HDR_TC_SHIFT);
	ip6->payload_len = rte_cpu_to_be_16((uint16_t)n);
	ip6->proto = IPPROTO_ICMPV6;
	ip6->hop_limits = (uint8_t)(ttl - 1);
	memcpy(ip6->src_addr, r.v6.orig_daddr, 12); /* the session's prefix */
	memcpy(ip6->src_addr + 12, &src, 4);
	memcpy(ip6->dst_addr, r.v6.orig_saddr, 16);
	memcpy(ip6 + 1, out, n);
	c = rte_ipv6_udptcp_cksum(ip6, ip6 + 1);
	memcpy((uint8_t *)(ip6 + 1) + 2, &c, 2);
	NSDP_STAT_INC(nat->st.icmp_errors_translated);
	forward6(nat, tx, PORT_INSIDE, e, m, r.v6.orig_saddr, now, 0);
	return 0;
}

/* The inside error's embedded IPv6 packet (quote, qlen bytes), one of a
 * NAT64 session's inbound packets, sent to the host: its session into r.
 * NULL, or the reason to drop. */
static uint64_t *inner6_session(struct nsdp_nat *nat, const uint8_t *quote,
				uint32_t qlen, struct ns_rec *r)
{
	const struct rte_ipv6_hdr *in = (const struct rte_ipv6_hdr *)quote;
	const uint8_t *l4 = quote + IP6_LEN;
	uint8_t proto = in->proto;
	uint16_t sport, dport;

	if ((rte_be_to_cpu_32(in->vtc_flow) >> 28) != 6 ||
	    qlen < IP6_LEN + INNER_L4_MIN ||
	    rte_be_to_cpu_16(in->payload_len) < INNER_L4_MIN ||
	    rte_be_to_cpu_16(in->payload_len) > UINT16_MAX - IP_LEN)
		return &nat->st.icmp_error_bad;
	if (memcmp(in->src_addr, nat->conf.nat64_prefix, 12) != 0)
		return &nat->st.icmp_error_no_session;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		sport = (uint16_t)(l4[2] << 8 | l4[3]);
		dport = (uint16_t)(l4[0] << 8 | l4[1]);
	} else if (proto == IPPROTO_ICMPV6 && l4[0] == ICMP6_ECHO_REPLY) {
		sport = (uint16_t)(l4[4] << 8 | l4[5]);
		dport = 0;
	} else if (proto == IPPROTO_FRAGMENT || proto == IPPROTO_HOPOPTS ||
		   proto == IPPROTO_ROUTING || proto == IPPROTO_DSTOPTS) {
		return &nat->st.icmp_error_bad; /* no ports to be found */
	} else {
		return &nat->st.icmp_error_no_session;
	}
	if (nsdp_table_find_v6(nat->table, proto, in->dst_addr, sport,
			       in->src_addr, dport, r) < 0)
		return &nat->st.icmp_error_no_session;
	return NULL;
}

/* The ICMPv4 message for the IPv6 error icmp (len bytes, its embedded
 * packet that of session r) into out: its length. */
static uint32_t icmp4_body(const uint8_t *icmp, uint32_t len,
			   const struct icmp_xlat *x, const struct ns_rec *r,
			   uint8_t *out)
{
	const struct rte_ipv6_hdr *in =
		(const struct rte_ipv6_hdr *)(icmp + ICMP_HDR);
	uint32_t have = RTE_MIN(len - ICMP_HDR - IP6_LEN,
				ICMP4_ERR_MAX - ICMP_HDR - IP_LEN);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(out + ICMP_HDR);
	uint8_t *l4 = out + ICMP_HDR + IP_LEN;
	uint16_t plen = rte_be_to_cpu_16(in->payload_len);
	int echo = in->proto == IPPROTO_ICMPV6;
	uint32_t rest = rte_cpu_to_be_32(x->rest), delta;
	uint16_t c;

	out[0] = x->type;
	out[1] = x->code;
	memset(out + 2, 0, 2);
	memcpy(out + 4, &rest, 4);
	memset(ip, 0, IP_LEN);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = (uint8_t)(rte_be_to_cpu_32(in->vtc_flow) >>
					RTE_IPV6_HDR_TC_SHIFT);
	ip->total_length = rte_cpu_to_be_16((uint16_t)(plen + IP_LEN));
	ip->time_to_live = in->hop_limits;
	ip->next_proto_id = echo ? IPPROTO_ICMP : in->proto;
	ip->src_addr = rte_cpu_to_be_32(r->s.xlat.daddr);
	ip->dst_addr = rte_cpu_to_be_32(r->s.xlat.saddr);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	memcpy(l4, in + 1, have);
	delta = csum_addr6(csum_addr6(0, in->src_addr, 0), in->dst_addr, 0);
	if (echo)
		delta = csum_icmp6_len(delta, plen, 0);
	else
		delta = csum_delta32(csum_delta32(delta, 0, ip->src_addr), 0,
				     ip->dst_addr);
	inner_l4_rewrite(ip->next_proto_id, l4, have, 1, r->s.xlat.sport,
			 RTE_IP_ICMP_ECHO_REPLY, delta);
	c = (uint16_t)~rte_raw_cksum(out, ICMP_HDR + IP_LEN + have);
	memcpy(out + 2, &c, 2);
	return ICMP_HDR + IP_LEN + have;
}

/* An ICMPv6 error from the inside (p checked by frame6_check), m
 * consumed: translated to ICMPv4 from the session's pool address and
 * forwarded on the outside, or dropped and counted. */
static void icmp6_error_inside(struct nsdp_nat *nat, struct rte_mbuf *m,
			       const struct pkt6 *p, uint64_t now,
			       struct nsdp_nat_tx *tx)
{
	const uint8_t *icmp = p->l4;
	uint32_t len = rte_be_to_cpu_16(p->ip6->payload_len);
	uint8_t out[ICMP4_ERR_MAX] __rte_aligned(8);
	struct rte_ether_hdr eth = *p->eth, *e;
	struct rte_ipv4_hdr *ip;
	struct icmp_xlat x;
	struct ns_rec r;
	uint64_t *why;
	uint32_t n, nh;
	uint8_t tc = (uint8_t)(rte_be_to_cpu_32(p->ip6->vtc_flow) >>
			       RTE_IPV6_HDR_TC_SHIFT);
	uint8_t hop = p->ip6->hop_limits;
	rte_be32_t dst = rte_cpu_to_be_32(p->t.daddr);

	frame_fit(m, ETH_LEN + IP6_LEN + len);
	if (!rte_pktmbuf_is_contiguous(m))
		why = &nat->st.truncated;
	else if (len < ICMP_HDR + IP6_LEN + INNER_L4_MIN ||
		 rte_ipv6_udptcp_cksum(p->ip6, icmp) != 0)
		why = &nat->st.icmp_error_bad;
	else if (icmp_map_6to4(icmp, &x) != 0)
		why = &nat->st.icmp_unsupported;
	else
		why = inner6_session(nat, icmp + ICMP_HDR, len - ICMP_HDR, &r);
	if (why) {
		drop(m, why);
		return;
	}
	n = icmp4_body(icmp, len, &x, &r, out);
	if (frame_reset(m, ETH_LEN + IP_LEN + n) != 0) {
		drop(m, &nat->st.alloc_failures);
		return;
	}
	e = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	*e = eth;
	e->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip = (struct rte_ipv4_hdr *)(e + 1);
	memset(ip, 0, IP_LEN);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->type_of_service = tc;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(IP_LEN + n));
	ip->packet_id = rte_cpu_to_be_16(nat->ip_id++);
	ip->time_to_live = (uint8_t)(hop - 1);
	ip->next_proto_id = IPPROTO_ICMP;
	ip->src_addr = rte_cpu_to_be_32(r.s.xlat.saddr);
	ip->dst_addr = dst;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	memcpy(ip + 1, out, n);
	NSDP_STAT_INC(nat->st.icmp_errors_translated);
	nh = nat->conf.next_hop ? nat->conf.next_hop : p->t.daddr;
	forward(nat, tx, PORT_OUTSIDE, e, m, nh, now, 0);
}
