/*
 * nsdp_nat66.h - stateful NAT66 in the fast path (nsdp_nat66.c): inside
 * IPv6 traffic to destinations outside the NAT64 prefix, leaving from
 * outside_addr6, and its return traffic on the outside. Private to
 * dataplane/nat/.
 */
#ifndef NSDP_NAT66_H
#define NSDP_NAT66_H

#include <stdint.h>
#include <string.h>

#include <rte_ip.h>
#include <rte_mbuf.h>

#include "nsdp_nat_state.h"

/* NAT66 on (conf.outside_addr6 set; called after nsdp_nat64_init): its
 * port maps. 0 (also when off) or -ENOMEM. */
int nsdp_nat66_init(struct nsdp_nat *nat);
void nsdp_nat66_fini(struct nsdp_nat *nat);

/* Whether an inside IPv6 packet (header ip6) is NAT66's rather than
 * NAT64's: to neither the NAT64 prefix nor inside_addr6. */
static inline int nsdp_nat66_claims(const struct nsdp_nat *nat,
				    const struct rte_ipv6_hdr *ip6)
{
	return memcmp(ip6->dst_addr, nat->conf.nat64_prefix, 12) != 0 &&
	       memcmp(ip6->dst_addr, nat->conf.inside_addr6, 16) != 0;
}

/* An inside IPv6 frame NAT66 claims (p: its checked IPv6 header, not
 * neighbour discovery): translated and forwarded on the outside, or
 * dropped and counted; m is consumed. */
void nsdp_nat66_inside(struct nsdp_nat *nat, struct rte_mbuf *m, struct pkt6 *p,
		       uint64_t now, struct nsdp_nat_tx *tx);

/* An IPv6 frame received on the outside: neighbour discovery, or return
 * traffic of a NAT66 session to translate back and forward on the inside;
 * m is consumed. */
void nsdp_nat66_outside(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t now,
			struct nsdp_nat_tx *tx);

/* Housekeeping while active: the unsolicited advertisement of
 * outside_addr6 after a promotion, and the solicitation of next_hop6
 * while it is unresolved (at most once a second). Expiry is the IPv6
 * table's sweep (nsdp_nat64_housekeep). */
void nsdp_nat66_housekeep(struct nsdp_nat *nat, uint64_t now,
			  struct nsdp_nat_tx *tx);

#endif
