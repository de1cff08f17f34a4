/*
 * nsa_lag.c - the standby's lag: from a record's timestamp (the active's
 * CLOCK_REALTIME) to when it was in the table, in a log-linear histogram
 * (NSA_STANDBY_LAG_BUCKETS in nsa_standby.h), and its percentiles.
 *
 * Counters are single-writer (the subscriber thread); readers take a copy
 * with nsa_standby_stats() and compute percentiles on the copy. The lag is
 * only as good as the two hosts' clocks agree.
 */
#include "nsa_lag.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

static unsigned int lag_bucket(uint64_t us)
{
	unsigned int e;

	if (us < NSA_STANDBY_LAG_SUB)
		return (unsigned int)us;
	e = 63 - (unsigned int)__builtin_clzll(us);
	if (e >= NSA_STANDBY_LAG_TOP_EXP)
		return NSA_STANDBY_LAG_BUCKETS - 1;
	return NSA_STANDBY_LAG_SUB +
	       (e - NSA_STANDBY_LAG_SUB_EXP) * NSA_STANDBY_LAG_SUB +
	       (unsigned int)(us >> (e - NSA_STANDBY_LAG_SUB_EXP)) -
	       NSA_STANDBY_LAG_SUB;
}

/* The largest lag bucket b holds (not for the last, open-ended one). */
static uint64_t lag_bucket_top(unsigned int b)
{
	unsigned int e, sub;

	if (b < NSA_STANDBY_LAG_SUB)
		return b;
	e = NSA_STANDBY_LAG_SUB_EXP +
	    (b - NSA_STANDBY_LAG_SUB) / NSA_STANDBY_LAG_SUB;
	sub = (b - NSA_STANDBY_LAG_SUB) % NSA_STANDBY_LAG_SUB;
	return ((uint64_t)(NSA_STANDBY_LAG_SUB + sub + 1)
		<< (e - NSA_STANDBY_LAG_SUB_EXP)) -
	       1;
}

void nsa_standby_lag_record(struct nsa_standby_stats *s, uint64_t lag_us)
{
	NSDP_STAT_INC(s->lag_count);
	NSDP_STAT_ADD(s->lag_sum_us, lag_us);
	NSDP_STAT_INC(s->lag_hist[lag_bucket(lag_us)]);
	if (lag_us > s->lag_max_us)
		__atomic_store_n(&s->lag_max_us, lag_us, __ATOMIC_RELAXED);
}

uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p)
{
	uint64_t want, seen = 0, top;
	double rank;
	unsigned int b;

	if (s->lag_count == 0)
		return 0;
	rank = p / 100.0 * (double)s->lag_count;
	want = (uint64_t)rank;
	if ((double)want < rank)
		want++;
	if (want == 0)
		want = 1;
	for (b = 0; b + 1 < NSA_STANDBY_LAG_BUCKETS; b++) {
		seen += s->lag_hist[b];
		if (seen >= want) {
			top = lag_bucket_top(b);
			return top < s->lag_max_us ? top : s->lag_max_us;
		}
	}
	return s->lag_max_us;
}

void nsa_lag_batch_init(struct nsa_lag_batch *lb)
{
	lb->n = 0;
	lb->ns_per_tsc = rte_get_tsc_hz() ? 1e9 / (double)rte_get_tsc_hz() : 0;
}

/* The wall clock is read once per batch; each record's time is that minus
 * the TSC cycles between its apply and now. */
void nsa_lag_batch_end(struct nsa_lag_batch *lb, struct nsa_standby_stats *s)
{
	uint64_t now = nsdp_realtime_ns(), tsc_now = rte_rdtsc();
	uint32_t i;

	for (i = 0; i < lb->n; i++) {
		uint64_t at = now - (uint64_t)((double)(tsc_now - lb->tsc[i]) *
					       lb->ns_per_tsc);

		nsa_standby_lag_record(
			s, at > lb->ts[i] ? (at - lb->ts[i]) / 1000 : 0);
	}
	lb->n = 0;
}
