/*
 * nsdp_nat64.h - stateful NAT64 in the fast path (nsdp_nat64.c): inside
 * IPv6 frames, the outside return traffic of NAT64 sessions, their expiry
 * and their adoption at promotion. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT64_H
#define NSDP_NAT64_H

#include <stdint.h>

#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

/* The side state and the neighbour cache when conf.inside_addr6 is set
 * (then the table must have an IPv6 table): 0, -EINVAL or -ENOMEM. */
int nsdp_nat64_init(struct nsdp_nat *nat);
void nsdp_nat64_fini(struct nsdp_nat *nat);

/* An IPv6 frame received on the inside: neighbour discovery, or a packet
 * to translate to IPv4 and forward on the outside; m is consumed. */
void nsdp_nat64_inside(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
		       struct nsdp_nat_tx *tx);

/* An outside IPv4 packet p (parsed and checked by the NAT44 path) that no
 * NAT44 session takes: 0 when a NAT64 session took it (translated to IPv6
 * and forwarded on the inside, or dropped and counted: m consumed), or
 * -ENOENT (m untouched). */
int nsdp_nat64_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
		       const struct pkt *p, uint64_t now,
		       struct nsdp_nat_tx *tx);

/* An outside ICMP packet p (parsed and checked by the NAT44 path up to
 * its IPv4 header) that may be an error about a NAT64 session's packet:
 * 0 when it was one (destination unreachable, time exceeded, parameter
 * problem), translated to ICMPv6 and forwarded on the inside, or dropped
 * and counted (m consumed), -ENOENT for any other ICMP (m untouched). */
int nsdp_nat64_icmp_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
			    const struct pkt *p, uint64_t now,
			    struct nsdp_nat_tx *tx);

/* The checks of an IPv6 header (version, payload length) of a frame, p
 * filled; and the parse of its L4 header as an inside packet (TCP, UDP
 * with a checksum, ICMPv6 echo request; fragments and extension headers
 * refused), the ports into p->t: NULL, or the counter of the reason to
 * drop the frame. For NAT66, which parses as NAT64 does. */
uint64_t *nsdp_nat6_check(struct nsdp_nat *nat, struct rte_mbuf *m,
			  struct pkt6 *p);
uint64_t *nsdp_nat6_l4_parse(struct nsdp_nat *nat, struct rte_mbuf *m,
			     struct pkt6 *p);

/* A packet of the existing IPv6 session r at pos (NAT64 or NAT66): idle
 * timer, TCP state, refresh. 1 when the packet ends the session (RST). */
int nsdp_nat6_session_touch(struct nsdp_nat *nat, int32_t pos, struct ns_rec *r,
			    uint8_t tcp_flags, int inbound, uint64_t now);

/* Housekeeping while active: the announcement after a promotion, and a
 * slice of the IPv6 table's positions swept for idle sessions, NAT66
 * ones included (the whole of it about once a second). */
void nsdp_nat64_housekeep(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx);

/* Promotion (control thread, the lcore a standby): mark the ports of the
 * replicated NAT64 (and, NAT66 on, NAT66) sessions and adopt their side
 * state. */
void nsdp_nat64_rebuild(struct nsdp_nat *nat, uint64_t now);

#endif
