/*
 * nsa_standby.h - the standby role: rebuilds the active's session table.
 *
 * One thread subscribes to every master's notification channel, then loads
 * the whole table from the store (per master, pipelined: GETKEYSINSLOT or
 * SCAN for the keys, MGET for the sessions) while
 * live batches keep being applied, and from then on applies every batch it
 * receives. A sequence gap, a lost subscription or a topology change makes
 * it resync the masters concerned the same way. What it drops is counted
 * in its stats, by reason.
 */
#ifndef NSA_STANDBY_H
#define NSA_STANDBY_H

#include <stdint.h>

#include "nsa_config.h"
#include "nsdp_ctcommit.h"
#include "nsdp_table.h"

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

struct nsa_standby_stats {
	uint64_t batches; /* batches applied */
	uint64_t records; /* records applied from batches */
	uint64_t loaded; /* records applied from the store by loads */
	uint64_t gaps; /* sequence gaps seen */
	uint64_t resyncs; /* resyncs done (the cold load counts) */
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
	/* subscribed to every master, each loaded since: what /readyz says
	 * (synced stays set when the store goes away; this does not) */
	int live;
	uint64_t lag_count, lag_sum_us, lag_max_us;
	uint64_t fenced; /* batches dropped: epoch older than seen */
	/* batches dropped: a batch key is configured and their HMAC is
	 * missing or wrong */
	uint64_t unauthenticated;
	uint64_t bad_values; /* store values that did not match their key */
	/* Lag of each record of an applied batch, in us: from its timestamp
	 * (the active's CLOCK_REALTIME) to when the record was in the table
	 * (see NSA_STANDBY_LAG_BUCKETS). */
	uint64_t lag_hist[NSA_STANDBY_LAG_BUCKETS];
};

struct nsa_standby;

/* A standby with a table of its own ([standby] table_capacity). */
struct nsa_standby *nsa_standby_create(const struct nsa_config *conf);
/* A standby that fills table, which the caller owns and frees after
 * nsa_standby_free (natsync-gateway lends its fast path's table). Between
 * nsa_standby_start and nsa_standby_stop the subscriber is the table's only
 * writer: it holds it (NSDP_TABLE_SUBSCRIBER). */
struct nsa_standby *nsa_standby_create_on(const struct nsa_config *conf,
					  struct nsdp_table *table);

/* Start the subscriber thread (connects with backoff until stopped). 0,
 * -EALREADY, -EBUSY when another writer holds the table, or -errno. */
int nsa_standby_start(struct nsa_standby *sb);
void nsa_standby_stop(struct nsa_standby *sb);

/* Wait until every batch published on the subscribed channels before this
 * call has been applied (a PING per subscription, its answer awaited), at
 * most timeout_ms: what a promotion needs after the fence, so that the
 * table holds everything the old active published. 0, -ETIMEDOUT, or
 * -ENOTCONN when the subscriber is not running. */
int nsa_standby_barrier(struct nsa_standby *sb, int timeout_ms);
void nsa_standby_free(struct nsa_standby *sb);

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb);
void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s);

/* The kernel conntrack commit's counters ([standby] commit = conntrack):
 * 0, or -ENOENT when the standby does not commit. */
int nsa_standby_commit_stats(const struct nsa_standby *sb,
			     struct nsdp_ctcommit_stats *s);

/* The p-th percentile (0..100, nearest rank) of the lag: the upper end of
 * the histogram bucket that holds it, and never above lag_max_us, so at
 * most 3.1 % above the true value (exact below 32 us). 0 without data. */
uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p);

/* Count one lag of lag_us in s (lag_count, lag_sum_us, lag_max_us and
 * lag_hist), as the subscriber does for every record it applies. */
void nsa_standby_lag_record(struct nsa_standby_stats *s, uint64_t lag_us);

/* Ask the subscriber thread to dump the table to path between two batches,
 * and wait for it (at most timeout_ms). Returns the count or negative errno. */
int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms);

#endif
