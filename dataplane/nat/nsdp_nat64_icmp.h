/*
 * nsdp_nat64_icmp.h - the ICMP errors of NAT64 sessions translated to the
 * other family (nsdp_nat64_icmp.c). Private to dataplane/nat/.
 */
#ifndef NSDP_NAT64_ICMP_H
#define NSDP_NAT64_ICMP_H

#include <stdint.h>

#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

/* An outside ICMP packet p (parsed and checked by the NAT44 path up to
 * its IPv4 header) that may be an error about a NAT64 session's packet:
 * 0 when it was one (destination unreachable, time exceeded, parameter
 * problem), translated to ICMPv6 and forwarded on the inside, or dropped
 * and counted (m consumed), -ENOENT for any other ICMP (m untouched). */
int nsdp_nat64_icmp_outside(struct nsdp_nat *nat, struct rte_mbuf *m,
			    const struct pkt *p, uint64_t now,
			    struct nsdp_nat_tx *tx);

/* An ICMPv6 error from the inside (p checked as a NAT64 packet, its
 * destination in p->t.daddr), m consumed: translated to ICMPv4 from the
 * session's pool address and forwarded on the outside, or dropped and
 * counted. */
void nsdp_nat64_icmp_inside(struct nsdp_nat *nat, struct rte_mbuf *m,
			    const struct pkt6 *p, uint64_t now,
			    struct nsdp_nat_tx *tx);

#endif
