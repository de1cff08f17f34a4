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

/* Housekeeping while active: the announcement after a promotion, and a
 * slice of the IPv6 table's positions swept for idle sessions
 * (the whole of it about once a second). */
void nsdp_nat64_housekeep(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx);

/* Promotion (control thread, the lcore a standby): mark the ports of the
 * replicated NAT64 sessions and adopt their side state. */
void nsdp_nat64_rebuild(struct nsdp_nat *nat, uint64_t now);

#endif
