/*
 * nsa_lag.c - the standby's lag histogram (log-linear buckets, see
 * NSA_STANDBY_LAG_BUCKETS in nsa_standby.h) and its percentiles.
 *
 * Counters are single-writer (the subscriber thread); readers take a copy
 * with nsa_standby_stats() and compute percentiles on the copy.
 */
#include "nsa_standby.h"
#include "nsdp_stat.h"

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
