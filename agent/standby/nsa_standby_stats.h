/*
 * nsa_standby_stats.h - what the standby counts: batches and records
 * applied, loads and resyncs, what it dropped by reason, and the lag
 * histogram (nsa_lag.h), with the lag's recording and percentiles. The
 * subscriber thread writes them; readers take a copy with
 * nsa_standby_stats() (nsa_standby.h).
 */
#ifndef NSA_STANDBY_STATS_H
#define NSA_STANDBY_STATS_H

#include <stdint.h>

#include "nsa_lag.h"

struct nsa_standby_stats {
	uint64_t batches; /* batches applied */
	uint64_t records; /* records applied from batches */
	uint64_t loaded; /* records applied from the store by loads */
	/* values the loads and resyncs read from the store (log layout:
	 * segments and checkpoints, each time one is read) and their bytes */
	uint64_t load_values, load_bytes;
	uint64_t gaps; /* sequence gaps seen */
	uint64_t resyncs; /* resyncs done (the cold load counts) */
	/* log layout: gaps mended by reading back the segments missed
	 * (nsa_repair.c) instead of a resync, and the values and bytes every
	 * repair read, those that fell back to a resync included */
	uint64_t repairs, repair_values, repair_bytes;
	/* log layout: segments a repair read and refused for good (they do
	 * not decode, verify or match their key): their sessions are left
	 * out, as every reader leaves them, and the repair goes on */
	uint64_t refused_segments;
	uint64_t bad_messages; /* malformed, truncated or foreign: dropped */
	uint64_t resubscribes;
	/* resubscriptions because the store's topology changed while every
	 * subscription still answered (a master cut off from its cluster) */
	uint64_t topology_changes;
	/* batches dropped: at or below their (publisher, channel) sequence,
	 * an old batch delivered late */
	uint64_t stale;
	/* subscriptions given up: silent, PING unanswered ([standby] ping_ms) */
	uint64_t dead_subscriptions;
	int synced; /* cold load finished */
	/* the subscriber thread's nice value and SCHED_FIFO priority (0:
	 * not real-time) now ([standby] priority; the process's while
	 * lowered or when raising it was refused), and how often it was
	 * lowered for taking over half a core or for records that waited
	 * long on the active (agent/standby/nsa_prio.h) */
	int subscriber_nice;
	int subscriber_rtprio;
	uint64_t subscriber_lowered;
	/* subscribed to every master, each loaded since: what /readyz says
	 * (synced stays set when the store goes away; this does not) */
	int live;
	/* slots the store's masters serve, of NS_SLOTS, at the last load */
	unsigned int slots_served;
	uint64_t lag_count, lag_sum_us, lag_max_us;
	uint64_t fenced; /* batches dropped: epoch older than seen */
	/* batches of other gateway pairs sharing the store: passed over */
	uint64_t other_pair;
	/* a pair's batches came with an epoch below what was seen, and the
	 * store's counter was below it too: the store lost it (resynced) */
	uint64_t epoch_regressions;
	/* resyncs of a master begun because a pair's epoch rose on its
	 * channel: what the fenced active wrote there unannounced */
	uint64_t epoch_resyncs;
	/* the highest epoch of its pair this standby knows of: the batches
	 * it admitted, and the store's counter read when it synced (so a
	 * provisional epoch made known before it started counts): what a
	 * promotion's epoch must be above, whatever its table holds */
	uint64_t epoch_seen;
	/* batches dropped: a batch key is configured and their HMAC is
	 * missing or wrong */
	uint64_t unauthenticated;
	uint64_t bad_values; /* store values that did not match their key */
	/* Lag of each record of an applied batch, in us: from its timestamp
	 * (the active's CLOCK_REALTIME) to when the record was in the table
	 * (see NSA_STANDBY_LAG_BUCKETS in nsa_lag.h). */
	uint64_t lag_hist[NSA_STANDBY_LAG_BUCKETS];
	/* The lag's two parts (struct nsa_lag), for the records of batches
	 * that said when they were sent: until sent, and from then on. */
	uint64_t lag_parts_count, lag_send_max_us, lag_deliver_max_us;
	uint64_t lag_send_sum_us; /* of the send parts: their mean */
	uint64_t lag_send_hist[NSA_STANDBY_LAG_BUCKETS];
	uint64_t lag_deliver_hist[NSA_STANDBY_LAG_BUCKETS];
};

/* The p-th percentile (0..100, nearest rank) of the lag: the upper end of
 * the histogram bucket that holds it, and never above lag_max_us, so at
 * most 3.1 % above the true value (exact below 32 us). 0 without data. */
uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p);

/* The p-th percentile of the lag's part until the batch was sent
 * (send = 1) or from then on (send = 0), as nsa_standby_lag_percentile_us
 * does. */
uint64_t nsa_standby_lag_part_percentile_us(const struct nsa_standby_stats *s,
					    int send, double p);

/* Copy every counter of st into s, each read with a relaxed atomic: what
 * another thread than the subscriber reads (nsa_standby_stats). */
void nsa_standby_stats_copy(struct nsa_standby_stats *s,
			    const struct nsa_standby_stats *st);

/* Count one record's lag in s (lag_count, lag_sum_us, lag_max_us and
 * lag_hist; its parts when known), as the subscriber does for every
 * record it applies. */
void nsa_standby_lag_record(struct nsa_standby_stats *s,
			    const struct nsa_lag *lag);

#endif
