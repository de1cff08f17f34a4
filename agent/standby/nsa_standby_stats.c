/*
 * nsa_standby_stats.c - the standby's counters: one lag counted into the
 * histogram of struct nsa_standby_stats, its percentiles, and a copy of
 * them all for another thread.
 *
 * Invariants: one writer (the subscriber thread), relaxed atomics, so that
 * nsa_standby_stats_copy() can copy them from another thread; percentiles
 * are computed on such a copy.
 *
 * Not here: the histogram's buckets (nsa_lag.c), the other counters (each
 * counted where it happens).
 */
#include "nsa_lag.h"
#include "nsa_standby_stats.h"
#include "nsdp_stat.h"

static void max_store(uint64_t *max, uint64_t v)
{
	if (v > *max)
		__atomic_store_n(max, v, __ATOMIC_RELAXED);
}

void nsa_standby_lag_record(struct nsa_standby_stats *s,
			    const struct nsa_lag *lag)
{
	NSDP_STAT_INC(s->lag_count);
	NSDP_STAT_ADD(s->lag_sum_us, lag->total_us);
	NSDP_STAT_INC(s->lag_hist[nsa_lag_bucket(lag->total_us)]);
	max_store(&s->lag_max_us, lag->total_us);
	if (lag->send_us == 0 && lag->deliver_us == 0)
		return;
	NSDP_STAT_INC(s->lag_parts_count);
	NSDP_STAT_ADD(s->lag_send_sum_us, lag->send_us);
	NSDP_STAT_INC(s->lag_send_hist[nsa_lag_bucket(lag->send_us)]);
	NSDP_STAT_INC(s->lag_deliver_hist[nsa_lag_bucket(lag->deliver_us)]);
	max_store(&s->lag_send_max_us, lag->send_us);
	max_store(&s->lag_deliver_max_us, lag->deliver_us);
}

uint64_t nsa_standby_lag_part_percentile_us(const struct nsa_standby_stats *s,
					    int send, double p)
{
	return send ? nsa_lag_percentile_us(s->lag_send_hist,
					    s->lag_parts_count,
					    s->lag_send_max_us, p)
		    : nsa_lag_percentile_us(s->lag_deliver_hist,
					    s->lag_parts_count,
					    s->lag_deliver_max_us, p);
}

uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p)
{
	return nsa_lag_percentile_us(s->lag_hist, s->lag_count, s->lag_max_us,
				     p);
}

void nsa_standby_stats_copy(struct nsa_standby_stats *s,
			    const struct nsa_standby_stats *st)
{
	unsigned int i;

#define LOAD(f) s->f = __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	LOAD(batches);
	LOAD(records);
	LOAD(loaded);
	LOAD(load_values);
	LOAD(load_bytes);
	LOAD(gaps);
	LOAD(resyncs);
	LOAD(repairs);
	LOAD(repair_values);
	LOAD(repair_bytes);
	LOAD(refused_segments);
	LOAD(bad_messages);
	LOAD(resubscribes);
	LOAD(topology_changes);
	LOAD(stale);
	LOAD(dead_subscriptions);
	LOAD(synced);
	LOAD(subscriber_nice);
	LOAD(subscriber_rtprio);
	LOAD(subscriber_lowered);
	LOAD(live);
	LOAD(slots_served);
	LOAD(lag_count);
	LOAD(lag_sum_us);
	LOAD(lag_max_us);
	LOAD(fenced);
	LOAD(other_pair);
	LOAD(epoch_regressions);
	LOAD(epoch_resyncs);
	LOAD(epoch_seen);
	LOAD(unauthenticated);
	LOAD(bad_values);
	LOAD(lag_parts_count);
	LOAD(lag_send_sum_us);
	LOAD(lag_send_max_us);
	LOAD(lag_deliver_max_us);
	for (i = 0; i < NSA_STANDBY_LAG_BUCKETS; i++) {
		LOAD(lag_send_hist[i]);
		LOAD(lag_deliver_hist[i]);
	}
	for (i = 0; i < NSA_STANDBY_LAG_BUCKETS; i++)
		LOAD(lag_hist[i]);
#undef LOAD
}
