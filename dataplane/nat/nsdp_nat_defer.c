/*
 * nsdp_nat_defer.c - defer: the packet that created a session waits,
 * translated and addressed, until the lane's consumer has settled the
 * session's record (nsdp_lane_settled), or defer_max_us at most.
 *
 * Invariants
 * - Held packets are in a ring in the order their records entered the
 *   lane, which is also the order of their wait: if the oldest one may
 *   not go, no later one may, so release looks at the oldest only.
 * - A held packet leaves by the outside tx list (counted settled or
 *   timed out, its wait in the histogram) or is freed (dropped, when the
 *   gateway stopped being active); nothing is held across a demotion.
 * - A wall clock stepped back below a packet's start lets it go: no clock
 *   step makes a packet wait longer than defer_max_us.
 *
 * Not here: which packets are held (nsdp_nat.c: a created session's
 * first, when its record entered the lane).
 */
#include <errno.h>

#include <rte_malloc.h>

#include "nsdp_lane.h"
#include "nsdp_nat_defer.h"

int nsdp_nat_defer_init(struct nsdp_nat *nat)
{
	if (nat->conf.defer_max_us == 0 || nat->lane == NULL)
		return 0;
	nat->defer = rte_zmalloc("nsdp_nat_defer",
				 NSDP_NAT_DEFER_MAX * sizeof(*nat->defer),
				 RTE_CACHE_LINE_SIZE);
	if (nat->defer == NULL)
		return -ENOMEM;
	nat->defer_max_ns = (uint64_t)nat->conf.defer_max_us * 1000ull;
	__atomic_store_n(&nat->lane->deferring, 1, __ATOMIC_RELEASE);
	return 0;
}

void nsdp_nat_defer_fini(struct nsdp_nat *nat)
{
	if (nat->defer == NULL)
		return;
	while (nat->defer_n > 0) {
		rte_pktmbuf_free(nat->defer[nat->defer_head].m);
		nat->defer_head = (nat->defer_head + 1) % NSDP_NAT_DEFER_MAX;
		nat->defer_n--;
	}
	rte_free(nat->defer);
	nat->defer = NULL;
}

int nsdp_nat_defer_hold(struct nsdp_nat *nat, struct rte_mbuf *m, uint64_t seq,
			uint64_t now)
{
	struct defer_slot *d;

	if (unlikely(nat->defer_n == NSDP_NAT_DEFER_MAX)) {
		NSDP_STAT_INC(nat->st.defer_overflow);
		return -1;
	}
	d = &nat->defer[(nat->defer_head + nat->defer_n) % NSDP_NAT_DEFER_MAX];
	d->m = m;
	d->seq = seq;
	d->since_ns = now;
	nat->defer_n++;
	nsdp_lane_hold(nat->lane, seq);
	NSDP_STAT_INC(nat->st.defer_held);
	return 0;
}

static void defer_pop(struct nsdp_nat *nat)
{
	nat->defer_head = (nat->defer_head + 1) % NSDP_NAT_DEFER_MAX;
	nat->defer_n--;
}

void nsdp_nat_defer_release(struct nsdp_nat *nat, uint64_t now,
			    struct nsdp_nat_tx *tx)
{
	uint64_t settled;

	if (likely(nat->defer_n == 0))
		return;
	if (nat->mode != NSDP_NAT_ACTIVE) {
		while (nat->defer_n > 0) {
			drop(nat->defer[nat->defer_head].m,
			     &nat->st.defer_dropped);
			defer_pop(nat);
		}
		return;
	}
	settled = nsdp_lane_settled(nat->lane);
	while (nat->defer_n > 0 && tx_room(tx, PORT_OUTSIDE) > 0) {
		struct defer_slot *d = &nat->defer[nat->defer_head];
		uint64_t waited = now > d->since_ns ? now - d->since_ns : 0;
		uint64_t bucket;

		if (d->seq <= settled)
			NSDP_STAT_INC(nat->st.defer_settled);
		else if (waited >= nat->defer_max_ns || now < d->since_ns)
			NSDP_STAT_INC(nat->st.defer_timeouts);
		else
			break;
		bucket = waited / (NSDP_NAT_DEFER_BUCKET_US * 1000ull);
		if (bucket >= NSDP_NAT_DEFER_BUCKETS)
			bucket = NSDP_NAT_DEFER_BUCKETS - 1;
		NSDP_STAT_INC(nat->defer_hist[bucket]);
		tx_put(nat, tx, PORT_OUTSIDE, d->m);
		defer_pop(nat);
	}
}
