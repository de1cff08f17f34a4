/*
 * nsdp_nat64_icmp.c - the ICMP errors of NAT64 sessions (RFC 7915
 * sections 4.2 and 5.2, RFC 6146 section 3.5.3), both ways.
 *
 * An outside ICMPv4 destination unreachable, time exceeded or parameter
 * problem whose embedded packet is one a NAT64 session sent becomes the
 * ICMPv6 error RFC 7915 maps it to (fragmentation needed: Packet Too Big,
 * the MTU 20 more), from the prefix's address of its sender to the inside
 * host; an inside ICMPv6 error about a packet a session delivered becomes
 * an ICMPv4 one from the session's pool address. The embedded packet is
 * translated back as the session translated it (addresses, port or echo
 * identifier, its checksum updated incrementally when the quote holds
 * it); the outer checksum is computed from scratch, over at most 1280
 * (IPv6) or 576 (IPv4) bytes. The translated error is built aside and
 * copied over the frame, at the default headroom.
 *
 * An error refreshes no session. Errors of no session, with a bad
 * checksum or a truncated or malformed quote are dropped and counted
 * (icmp_error_no_session, icmp_error_bad); types and codes RFC 7915 does
 * not map count as icmp_unsupported; the translated ones as
 * icmp_errors_translated.
 *
 * Not done here: ICMP errors sent by the gateway itself, errors of NAT44
 * or NAT66 sessions, quotes of fragments or with extension headers.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "nsdp_nat6.h"
#include "nsdp_nat64_icmp.h"
#include "nsdp_nat_arp.h"
#include "nsdp_nat_nd.h"
#include "nsdp_nat_state.h"

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

void nsdp_nat64_icmp_inside(struct nsdp_nat *nat, struct rte_mbuf *m,
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
