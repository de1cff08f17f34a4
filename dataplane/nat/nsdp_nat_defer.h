/*
 * nsdp_nat_defer.h - defer (nsdp_nat_defer.c): the first packet of a new
 * session held until its record settles. Private to dataplane/nat/.
 */
#ifndef NSDP_NAT_DEFER_H
#define NSDP_NAT_DEFER_H

#include <stdint.h>

#include "nsdp_nat_state.h"

/* The ring of held packets when conf.defer_max_us is set and there is a
 * lane; 0 or -ENOMEM. */
int nsdp_nat_defer_init(struct nsdp_nat *nat);
/* Free the ring and the packets it holds. */
void nsdp_nat_defer_fini(struct nsdp_nat *nat);

/* Hold m (translated and addressed, for the outside port) until record
 * seq of the lane settles: 0, or -1 when it must go now (the ring is
 * full; counted). */
int nsdp_nat_defer_hold(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t seq,
			uint64_t now);

/* Put on the outside tx list every held packet whose record settled or
 * whose wait ran out, oldest first, as far as the list has room; while
 * the gateway is not active, drop them (counted). */
void nsdp_nat_defer_release(struct nsdp_nat *nat, uint64_t now,
			    struct nsdp_nat_tx *tx);

#endif
