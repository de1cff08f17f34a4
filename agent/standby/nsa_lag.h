/*
 * nsa_lag.h - the standby's lag histogram: its buckets, its percentiles,
 * and the timing of the records of one batch as the subscriber applies
 * them. The counters themselves are the standby's
 * (struct nsa_standby_stats, which nsa_standby_lag_record() fills).
 */
#ifndef NSA_LAG_H
#define NSA_LAG_H

#include <stdint.h>

#include <rte_cycles.h>

#include "ns_batch.h"

/*
 * Lag histogram, log-linear: lags below NSA_STANDBY_LAG_SUB us have one
 * bucket each; above, every power of two [2^e, 2^(e+1)) is cut into
 * NSA_STANDBY_LAG_SUB equal buckets, up to 2^NSA_STANDBY_LAG_TOP_EXP us
 * (67 s); the last bucket holds everything larger. A bucket is at most
 * 1/NSA_STANDBY_LAG_SUB (3.1 %) of the values it holds wide.
 */
#define NSA_STANDBY_LAG_SUB_EXP 5
#define NSA_STANDBY_LAG_SUB (1u << NSA_STANDBY_LAG_SUB_EXP)
#define NSA_STANDBY_LAG_TOP_EXP 26
#define NSA_STANDBY_LAG_BUCKETS                                \
	(NSA_STANDBY_LAG_SUB +                                 \
	 (NSA_STANDBY_LAG_TOP_EXP - NSA_STANDBY_LAG_SUB_EXP) * \
		 NSA_STANDBY_LAG_SUB +                         \
	 1)

/* The bucket that counts a lag of us microseconds. Inline: the standby
 * counts three lags per record it applies. */
static inline unsigned int nsa_lag_bucket(uint64_t us)
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

/* The p-th percentile (0..100, nearest rank) of the count lags in hist,
 * the largest of them max_us: the upper end of the bucket that holds it,
 * never above max_us. 0 without data. */
uint64_t nsa_lag_percentile_us(const uint64_t hist[NSA_STANDBY_LAG_BUCKETS],
			       uint64_t count, uint64_t max_us, double p);

/* Each record's timestamp and the TSC when it was in the table (taken
 * once for the records marked since the last stamp), and when the batch
 * was sent (its header's sent_ns; 0: not known). */
struct nsa_lag_batch {
	uint64_t ts[NS_BATCH_MAX_RECORDS];
	uint64_t tsc[NS_BATCH_MAX_RECORDS];
	uint32_t n, stamped; /* records marked; of them, stamped */
	uint64_t sent_ns;
	double ns_per_tsc; /* 0: count every record at the batch's end */
};

/* One record's lag, us, and its two parts: from its timestamp until its
 * batch was sent (the active's side: the ring, the batch filling, the
 * writer), and from then until it was in the table (the store's
 * notification, the subscriber, the apply); both 0 when the batch did
 * not say when it was sent. */
struct nsa_lag {
	uint64_t total_us, send_us, deliver_us;
};

void nsa_lag_batch_init(struct nsa_lag_batch *lb);

/* A record with timestamp ts_ns is in the table: its time is that of the
 * next nsa_lag_batch_stamp(). */
static inline void nsa_lag_batch_mark(struct nsa_lag_batch *lb, uint64_t ts_ns)
{
	if (lb->n < NS_BATCH_MAX_RECORDS)
		lb->ts[lb->n++] = ts_ns;
}

/* The records marked since the last stamp are in the table now: one TSC
 * read for a run of applies (a few microseconds at most), which counts
 * each of them as late as the last, never earlier than it was. */
static inline void nsa_lag_batch_stamp(struct nsa_lag_batch *lb)
{
	const uint64_t now = rte_rdtsc();

	for (; lb->stamped < lb->n; lb->stamped++)
		lb->tsc[lb->stamped] = now;
}

/* Hand the lag of each of the batch's stamped records to record(arg,
 * lag), and start over. */
void nsa_lag_batch_end(struct nsa_lag_batch *lb,
		       void (*record)(void *arg, const struct nsa_lag *lag),
		       void *arg);

#endif
