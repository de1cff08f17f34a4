/*
 * nsdp_nat64.h - stateful NAT64 in the fast path (nsdp_nat64.c): inside
 * IPv6 frames, the outside return traffic of NAT64 sessions, their expiry
 * and their adoption at promotion (their ICMP errors:
 * nsdp_nat64_icmp.h). Private to dataplane/nat/.
 */
#ifndef NSDP_NAT64_H
#define NSDP_NAT64_H

#include <stdint.h>

#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

/* The side state and the neighbour cache when conf.inside_addr6 is set
 * (then the table must have an IPv6 table; NAT66's maps are
 * nsdp_nat66_init's): 0, -EINVAL or -ENOMEM. */
int nsdp_nat64_init(struct nsdp_nat *nat);
void nsdp_nat64_fini(struct nsdp_nat *nat);

/* An inside IPv6 frame NAT64 takes (p: its checked IPv6 header, not
 * neighbour discovery, not NAT66's): translated to IPv4 and forwarded on
 * the outside, or dropped and counted; m is consumed. */
void nsdp_nat64_inside(struct nsdp_nat *nat, struct rte_mbuf *m, struct pkt6 *p,
		       uint64_t now, struct nsdp_nat_tx *tx);

/* An outside IPv4 packet p (parsed and checked by the NAT44 path) that no
 * NAT44 session takes: 0 when a NAT64 session took it (translated to IPv6
 * and forwarded on the inside, or dropped and counted: m consumed), or
 * -ENOENT (m untouched). */
int nsdp_nat64_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
		       const struct pkt *p, uint64_t now,
		       struct nsdp_nat_tx *tx);

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
