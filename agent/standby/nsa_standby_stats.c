/*
 * nsa_standby_stats.c - the standby's lag counters: one lag counted into
 * the histogram of struct nsa_standby_stats, and its percentiles.
 *
 * Invariants: one writer (the subscriber thread), relaxed atomics, so that
 * nsa_standby_stats() can copy them from another thread; percentiles are
 * computed on such a copy.
 *
 * Not here: the histogram's buckets (nsa_lag.c), the other counters (each
 * counted where it happens).
 */
#include "nsa_lag.h"
#include "nsa_standby_stats.h"
#include "nsdp_stat.h"

void nsa_standby_lag_record(struct nsa_standby_stats *s, uint64_t lag_us)
{
	NSDP_STAT_INC(s->lag_count);
	NSDP_STAT_ADD(s->lag_sum_us, lag_us);
	NSDP_STAT_INC(s->lag_hist[nsa_lag_bucket(lag_us)]);
	if (lag_us > s->lag_max_us)
		__atomic_store_n(&s->lag_max_us, lag_us, __ATOMIC_RELAXED);
}

uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p)
{
	return nsa_lag_percentile_us(s->lag_hist, s->lag_count, s->lag_max_us,
				     p);
}
