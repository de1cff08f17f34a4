/*
 * nsa_lag.c - the standby's lag: from a record's timestamp (the active's
 * CLOCK_REALTIME) to when it was in the table, in a log-linear histogram
 * (NSA_STANDBY_LAG_BUCKETS in nsa_lag.h), and its percentiles.
 *
 * Counters are single-writer (the subscriber thread); readers take a copy
 * with nsa_standby_stats() and compute percentiles on the copy. The lag is
 * only as good as the two hosts' clocks agree.
 *
 * Not here: the counters, which are the standby's stats (nsa_standby.h).
 */
#include "nsa_lag.h"
#include "nsdp_time.h"

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

uint64_t nsa_lag_percentile_us(const uint64_t hist[NSA_STANDBY_LAG_BUCKETS],
			       uint64_t count, uint64_t max_us, double p)
{
	uint64_t want, seen = 0, top;
	double rank;
	unsigned int b;

	if (count == 0)
		return 0;
	rank = p / 100.0 * (double)count;
	want = (uint64_t)rank;
	if ((double)want < rank)
		want++;
	if (want == 0)
		want = 1;
	for (b = 0; b + 1 < NSA_STANDBY_LAG_BUCKETS; b++) {
		seen += hist[b];
		if (seen >= want) {
			top = lag_bucket_top(b);
			return top < max_us ? top : max_us;
		}
	}
	return max_us;
}

void nsa_lag_batch_init(struct nsa_lag_batch *lb)
{
	lb->n = 0;
	lb->stamped = 0;
	lb->ns_per_tsc = rte_get_tsc_hz() ? 1e9 / (double)rte_get_tsc_hz() : 0;
}

/* The wall clock is read once per batch; each record's time is that minus
 * the TSC cycles between its apply and now. */
void nsa_lag_batch_end(struct nsa_lag_batch *lb,
		       void (*record)(void *arg, const struct nsa_lag *lag),
		       void *arg)
{
	uint64_t now = nsdp_realtime_ns(), tsc_now = rte_rdtsc();
	uint64_t sent = lb->sent_ns, tsc = 0, at = now;
	uint32_t i;

	for (i = 0; i < lb->stamped; i++) {
		struct nsa_lag l = {0};

		/* Records stamped together share their time. */
		if (i == 0 || lb->tsc[i] != tsc) {
			tsc = lb->tsc[i];
			at = now - (uint64_t)((double)(tsc_now - tsc) *
					      lb->ns_per_tsc);
		}
		l.total_us = at > lb->ts[i] ? (at - lb->ts[i]) / 1000 : 0;
		if (sent) {
			l.send_us = sent > lb->ts[i] ? (sent - lb->ts[i]) / 1000
						     : 0;
			l.deliver_us = at > sent ? (at - sent) / 1000 : 0;
		}
		record(arg, &l);
	}
	lb->n = 0;
	lb->stamped = 0;
	lb->sent_ns = 0;
}
