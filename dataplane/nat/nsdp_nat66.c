/*
 * nsdp_nat66.c - stateful NAT66 in the fast path: inside IPv6 hosts reach
 * IPv6 servers from the gateway's one outside address (outside_addr6),
 * source NAT with a port (TCP, UDP) or ICMPv6 echo identifier of that
 * address's own port maps, as the NAT44 masquerades to its pool; and the
 * return traffic, found by its IPv6 reply tuple, back.
 *
 * A NAT66 session is a family 6 record in the table's IPv6 table, beside
 * the NAT64 ones: created, refreshed and closed as theirs are (same
 * timeouts, TCP states, side state by position, expiry sweep in
 * nsdp_nat64_housekeep), recorded with nsdp_record_v6(), so a standby
 * applies it and, promoted, forwards on it (nsdp_nat64_rebuild marks its
 * port in outside_addr6's maps).
 *
 * Inside, the frames come from the NAT44's demultiplexer, which parsed
 * the IPv6 header (nsdp_nat6.c, shared with NAT64) and took neighbour
 * discovery; every IPv6 destination outside the NAT64 prefix is NAT66's.
 * Outside, IPv6 frames come here from the
 * NAT44's demultiplexer (ether type), so IPv4 traffic pays nothing. Both
 * ways take one frame at a time.
 *
 * Translation is in place: the address and the port (or identifier)
 * change, the hop limit goes down by one, and the TCP, UDP or ICMPv6
 * checksum is updated incrementally (RFC 1624) for the address in the
 * pseudo-header and the port, so a bad one stays bad. There is no IPv4
 * header and nothing moves.
 *
 * Not done here: NPTv6 (RFC 6296, stateless prefix translation), more
 * than one outside address, ICMPv6 errors (neither sent nor translated),
 * fragments and every extension header, hairpinning, sessions opened
 * from the outside, router advertisements.
 */
#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_udp.h>

#include "nsdp_nat6.h"
#include "nsdp_nat66.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

/* The housekeeper solicits an unresolved next_hop6 at most this often. */
#define NEXTHOP6_RETRY_NS NAT_NS_PER_S

static int addr6_set(const uint8_t a[16])
{
	static const uint8_t zero[16];

	return memcmp(a, zero, 16) != 0;
}

/* ---- parsing ------------------------------------------------------ */

/* Destination policy inside: not the gateway, not multicast, link-local,
 * loopback or unspecified (nothing to route). */
static inline uint64_t *nat66_dst_check(struct nsdp_nat *nat,
					const uint8_t dst[16])
{
	static const uint8_t loopback[16] = {[15] = 1};

	if (unlikely(memcmp(dst, nat->conf.outside_addr6, 16) == 0))
		return &nat->st.to_gateway;
	if (unlikely(dst[0] == 0xff ||
		     (dst[0] == 0xfe && (dst[1] & 0xc0) == 0x80) ||
		     !addr6_set(dst) || memcmp(dst, loopback, 16) == 0))
		return &nat->st.not_ours;
	return NULL;
}

/* The frame checks common to both ports: active, for our MAC, a hop
 * limit to decrement. */
static inline uint64_t *frame66_check(struct nsdp_nat *nat, enum nat_port port,
				      const struct pkt6 *p)
{
	if (unlikely(nat->mode != NSDP_NAT_ACTIVE))
		return &nat->st.standby_drops;
	if (unlikely(!rte_is_same_ether_addr(&p->eth->dst_addr,
					     &nat->port_mac[port])))
		return &nat->st.not_ours;
	return NULL;
}

/* The L4 header of an inside packet: as NAT64 parses it, but NAT66
 * translates no ICMPv6 error. */
static inline uint64_t *l4_parse_outbound(struct nsdp_nat *nat,
					  struct rte_mbuf *m, struct pkt6 *p)
{
	uint64_t *why = nsdp_nat6_l4_parse(nat, m, p);

	if (!why && p->proto == IPPROTO_ICMPV6 && p->icmp_type < 128)
		return &nat->st.icmp_unsupported;
	return why;
}

/* The L4 header of an outside packet: an ICMPv6 echo reply's identifier
 * is our port (dport), an echo request has no session (only source NAT
 * is done); the rest parses as inside. */
static inline uint64_t *l4_parse_inbound(struct nsdp_nat *nat,
					 struct rte_mbuf *m, struct pkt6 *p)
{
	const struct rte_icmp_hdr *icmp = p->l4;

	if (p->proto != IPPROTO_ICMPV6)
		return l4_parse_outbound(nat, m, p);
	if (unlikely(rte_pktmbuf_data_len(m) - ETH_LEN - IP6_LEN <
			     sizeof(*icmp) ||
		     rte_be_to_cpu_16(p->ip6->payload_len) < sizeof(*icmp)))
		return &nat->st.truncated;
	p->icmp_type = icmp->icmp_type;
	if (p->icmp_type == ICMP6_ECHO_REQUEST)
		return &nat->st.no_session;
	if (p->icmp_type != ICMP6_ECHO_REPLY)
		return &nat->st.icmp_unsupported;
	p->t.sport = 0;
	p->t.dport = rte_be_to_cpu_16(icmp->icmp_ident);
	return NULL;
}

/* ---- translation -------------------------------------------------- */

/* Rewrite the source address and port (outbound) or the destination
 * address and port (inbound; ICMPv6 echo: the identifier either way) to
 * addr and port_host, decrement the hop limit, and update the L4
 * checksum, whose pseudo-header holds the address (ICMPv6's too). */
static void xlat66(struct pkt6 *p, int inbound, const uint8_t addr[16],
		   uint16_t port_host)
{
	uint8_t *a = inbound ? p->ip6->dst_addr : p->ip6->src_addr;
	uint8_t *l4 = p->l4;
	uint16_t new = rte_cpu_to_be_16(port_host), old, c;
	size_t port_at, cksum_at;
	uint32_t delta = csum_addr6(csum_addr6(0, a, 0), addr, 1);

	memcpy(a, addr, 16);
	p->ip6->hop_limits--;
	l4_offsets(p->proto, inbound, &port_at, &cksum_at);
	old = word_load(l4 + port_at);
	word_store(l4 + port_at, new);
	c = csum_apply(word_load(l4 + cksum_at), csum_delta16(delta, old, new));
	if (p->proto == IPPROTO_UDP && c == 0)
		c = 0xffff; /* 0 would mean "no checksum" */
	word_store(l4 + cksum_at, c);
}

/* ---- the two ways ------------------------------------------------- */

/* Every check of an inside frame NAT66 claims; NULL when p is a packet to
 * translate, else the counter of the reason to drop it. */
static uint64_t *inside_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			      struct pkt6 *p)
{
	uint64_t *why = frame66_check(nat, PORT_INSIDE, p);

	if (!why)
		why = nat66_dst_check(nat, p->ip6->dst_addr);
	if (!why && unlikely(p->ip6->hop_limits <= 1))
		why = &nat->st.ttl_expired;
	if (!why)
		why = l4_parse_outbound(nat, m, p);
	return why;
}

void nsdp_nat66_inside(struct nsdp_nat *nat, struct rte_mbuf *m, struct pkt6 *p,
		       uint64_t now, struct nsdp_nat_tx *tx)
{
	const uint8_t *nh;
	uint64_t *why, defer_seq;
	struct ns_rec r;

	why = inside_check(nat, m, p);
	if (unlikely(why != NULL)) {
		drop(m, why);
		return;
	}
	nsdp_nat_neigh6_learn(nat, PORT_INSIDE, p->ip6->src_addr,
			      &p->eth->src_addr, now);
	if (nsdp_nat6_session_out(nat, p, now, nsdp_nat66_session_create, &r,
				  &defer_seq, &why) != 0) {
		drop(m, why);
		return;
	}
	xlat66(p, 0, r.v6.xlat_saddr, r.s.xlat.sport);
	nh = addr6_set(nat->conf.next_hop6) ? nat->conf.next_hop6
					    : r.v6.xlat_daddr;
	forward6(nat, tx, PORT_OUTSIDE, p->eth, m, nh, now, defer_seq);
}

/* Every check of an outside frame that is not neighbour discovery. */
static uint64_t *outside_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			       struct pkt6 *p)
{
	uint64_t *why = frame66_check(nat, PORT_OUTSIDE, p);

	if (!why && memcmp(p->ip6->dst_addr, nat->conf.outside_addr6, 16))
		why = &nat->st.not_ours;
	if (!why && unlikely(p->ip6->hop_limits <= 1))
		why = &nat->st.ttl_expired;
	if (!why)
		why = l4_parse_inbound(nat, m, p);
	return why;
}

void nsdp_nat66_outside(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
			struct nsdp_nat_tx *tx)
{
	struct ns_rec r;
	struct pkt6 p;
	uint64_t *why;
	int32_t pos;

	why = nsdp_nat6_check(nat, m, &p);
	if (!why && nsdp_nat_nd_take(nat, PORT_OUTSIDE, m, p.ip6, now, tx))
		return;
	if (!why)
		why = outside_check(nat, m, &p);
	if (unlikely(why != NULL)) {
		drop(m, why);
		return;
	}
	pos = nsdp_table_find_reply66(nat->table, p.proto, p.ip6->src_addr,
				      p.t.sport, p.ip6->dst_addr, p.t.dport,
				      &r);
	if (pos < 0) {
		drop(m, &nat->st.no_session);
		return;
	}
	if (nsdp_nat6_session_touch(nat, pos, &r, p.tcp_flags, 1, now) ==
	    NSDP_NAT6_CLOSES) {
		nsdp_nat64_session_close(nat, pos, &r, now);
		NSDP_STAT_INC(nat->st.closed);
	}
	xlat66(&p, 1, r.v6.orig_saddr, r.s.orig.sport);
	forward6(nat, tx, PORT_INSIDE, p.eth, m, r.v6.orig_saddr, now, 0);
}

/* ---- housekeeping and life ---------------------------------------- */

void nsdp_nat66_housekeep(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx)
{
	const uint8_t *nh = nat->conf.next_hop6;

	if (nat->announce66 && tx_room(tx, PORT_OUTSIDE)) {
		nat->announce66 = 0;
		nsdp_nat_nd_announce(nat, PORT_OUTSIDE, tx);
	}
	if (!addr6_set(nh) ||
	    now - nat->nexthop6_asked_ns < NEXTHOP6_RETRY_NS ||
	    neigh6_lookup(nat, PORT_OUTSIDE, nh))
		return;
	nat->nexthop6_asked_ns = now;
	nsdp_nat_neigh6_ask(nat, tx, PORT_OUTSIDE, nh, now);
}

int nsdp_nat66_init(struct nsdp_nat *nat)
{
	if (!addr6_set(nat->conf.outside_addr6))
		return 0;
	nat->nat66 = 1;
	return nsdp_nat66_maps_init(nat);
}

void nsdp_nat66_fini(struct nsdp_nat *nat)
{
	rte_free(nat->map6_bits);
	nat->map6_bits = NULL;
	nat->nat66 = 0;
}
