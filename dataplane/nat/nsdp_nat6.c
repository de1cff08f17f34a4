/*
 * nsdp_nat6.c - what NAT64 (nsdp_nat64.c) and NAT66 (nsdp_nat66.c) share
 * of an inside IPv6 packet: the checks of its IPv6 header, the parse of
 * its L4 header, and the find, touch or create of its session in the
 * table's IPv6 table, whose side state (side6) both keep by position.
 *
 * Either family's own policy (destinations, which ICMPv6 it takes, how a
 * session is created and translated) stays in its file: the create is
 * passed in. Neither of those files includes the other; both include this
 * one's header.
 *
 * Not here: translation, forwarding, neighbour discovery
 * (nsdp_nat_nd.c), the sessions' records (nsdp_nat_session.c).
 */
#include <stdint.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "nsdp_nat6.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_session.h"
#include "nsdp_nat_state.h"

uint64_t *nsdp_nat6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
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

uint64_t *nsdp_nat6_l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
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

int nsdp_nat6_session_touch(struct nsdp_nat *nat, int32_t pos, struct ns_rec *r,
			    uint8_t tcp_flags, int inbound, uint64_t now)
{
	struct side6 *sd6 = &nat->side6[pos];
	struct side *sd = &sd6->sd;
	int revived, fragile;

	if (unlikely(!side6_owns(sd6, r)))
		nsdp_nat64_side_adopt(nat, sd6, r, now);
	sd->last_seen_ns = now;
	if (r->s.proto == IPPROTO_TCP && tcp_track(sd, tcp_flags, inbound))
		return NSDP_NAT6_CLOSES;
	revived = side_replica_expired(sd, now);
	fragile = side_replica_fragile(sd, now);
	if (refresh_due(nat, sd, r->s.proto, now)) {
		nsdp_nat64_session_refresh(nat, sd, r, now);
		if (unlikely(revived))
			NSDP_STAT_INC(nat->st.revived);
		if (unlikely(fragile))
			return NSDP_NAT6_FRAGILE;
	}
	return 0;
}

int nsdp_nat6_session_out(struct nsdp_nat *nat, const struct pkt6 *p,
			  uint64_t now, nsdp_nat6_create_fn create,
			  struct ns_rec *r, uint64_t *defer_seq, uint64_t **why)
{
	int32_t pos;
	int closes = 0;

	*defer_seq = 0;
	pos = nsdp_table_find_v6(nat->table, p->proto, p->ip6->src_addr,
				 p->t.sport, p->ip6->dst_addr, p->t.dport, r);
	if (pos >= 0) {
		int touch = nsdp_nat6_session_touch(nat, pos, r, p->tcp_flags,
						    0, now);

		closes = touch == NSDP_NAT6_CLOSES;
		/* A session whose copy the store and the standby no longer
		 * hold, or soon will not: held as a new one's first packet. */
		if (unlikely(touch == NSDP_NAT6_FRAGILE) && nat->defer)
			*defer_seq = nat->rec_seq;
	} else {
		if (p->proto == IPPROTO_TCP &&
		    (p->tcp_flags & TCP_FLAGS_SEEN) != RTE_TCP_SYN_FLAG) {
			*why = &nat->st.tcp_no_session;
			return -1;
		}
		pos = create(nat, p, now, r, why);
		if (pos < 0)
			return -1;
		if (nat->defer) {
			*defer_seq = nat->rec_seq;
			if (unlikely(*defer_seq == 0))
				NSDP_STAT_INC(nat->st.defer_unrecorded);
		}
	}
	if (closes) {
		nsdp_nat64_session_close(nat, pos, r, now);
		NSDP_STAT_INC(nat->st.closed);
	}
	return 0;
}
