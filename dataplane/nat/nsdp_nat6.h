/*
 * nsdp_nat6.h - IPv6 parsing and sessions shared by NAT64 and NAT66
 * (nsdp_nat6.c): the IPv6 header and L4 checks, the IPv6 session's touch
 * and create-or-touch, and inline the checksum and rewrite helpers of the
 * translations. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT6_H
#define NSDP_NAT6_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

#define IP6_LEN ((uint32_t)sizeof(struct rte_ipv6_hdr))
/* What the IPv6 header has more than the IPv4 one. */
#define GROWTH (IP6_LEN - IP_LEN)

/* The checks of an IPv6 header (version, payload length) of a frame, p
 * filled: NULL, or the counter of the reason to drop the frame. */
uint64_t *nsdp_nat6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			  struct pkt6 *p);

/* The parse of p's L4 header as an inside packet (TCP, UDP with a
 * checksum, ICMPv6 echo request or error; fragments and extension headers
 * refused), the ports into p->t: NULL, or the counter of the reason to
 * drop the frame. */
uint64_t *nsdp_nat6_l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
			     struct pkt6 *p);

static inline int side6_owns(const struct side6 *sd6, const struct ns_rec *r)
{
	return side_owns(&sd6->sd, &r->s) &&
	       memcmp(sd6->saddr, r->v6.orig_saddr, 16) == 0 &&
	       memcmp(sd6->daddr, r->v6.orig_daddr, 16) == 0;
}

/* A packet of the existing IPv6 session r at pos (NAT64 or NAT66): idle
 * timer, TCP state, refresh. NSDP_NAT6_CLOSES when the packet ends the
 * session (RST), NSDP_NAT6_FRAGILE when it refreshed a session whose
 * replicated copy had ended or was about to (side_replica_fragile), else
 * 0. */
#define NSDP_NAT6_CLOSES 1
#define NSDP_NAT6_FRAGILE 2
int nsdp_nat6_session_touch(struct nsdp_nat *nat, int32_t pos, struct ns_rec *r,
			    uint8_t tcp_flags, int inbound, uint64_t now);

/* How NAT64 and NAT66 create the session of an inside packet's flow
 * (nsdp_nat64_session_create, nsdp_nat66_session_create). */
typedef int32_t (*nsdp_nat6_create_fn)(struct nsdp_nat *nat,
				       const struct pkt6 *p, uint64_t now,
				       struct ns_rec *r, uint64_t **why);

/* The session of the inside packet p into r: found and touched (and
 * closed when p ends it), or made by create (a TCP one only on a SYN).
 * 0, or -1 with *why the counter of the reason to drop p. *defer_seq is
 * the record a new session's first packet waits for (defer on), else 0. */
int nsdp_nat6_session_out(struct nsdp_nat *nat, const struct pkt6 *p,
			  uint64_t now, nsdp_nat6_create_fn create,
			  struct ns_rec *r, uint64_t *defer_seq,
			  uint64_t **why);

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

/* The L4 part of a NAT64 translation: the port (or identifier) at port_at
 * goes to new_port, the ICMP type to new_type (ICMP), and delta (the
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

#endif
