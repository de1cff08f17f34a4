/*
 * nsa_standby.h - the standby role: rebuilds the active's session table.
 *
 * One thread subscribes to every master's notification channel, then loads
 * the whole table from the store (SCAN + MGET per master, pipelined) while
 * live batches keep being applied, and from then on applies every batch it
 * receives. A sequence gap, a lost subscription or a topology change makes
 * it resync the masters concerned the same way. Malformed or foreign
 * messages are counted and dropped.
 */
#ifndef NSA_STANDBY_H
#define NSA_STANDBY_H

#include <stdint.h>

#include "nsa_config.h"
#include "nsdp_table.h"

#define NSA_STANDBY_LAG_BUCKETS 32

struct nsa_standby_stats {
	uint64_t batches; /* batches applied */
	uint64_t records; /* records applied from batches */
	uint64_t loaded; /* records applied from the store by loads */
	uint64_t gaps; /* sequence gaps seen */
	uint64_t resyncs; /* resyncs done (the cold load counts) */
	uint64_t bad_messages; /* malformed, truncated or foreign: dropped */
	uint64_t resubscribes;
	int synced; /* cold load finished */
	uint64_t lag_count, lag_sum_us, lag_max_us;
	uint64_t fenced; /* batches dropped: epoch older than seen */
	uint64_t bad_values; /* store values that did not match their key */
	/* lag_hist[b]: records whose lag in us is below 2^b (and not below
	 * 2^(b-1)); the last bucket holds everything larger. */
	uint64_t lag_hist[NSA_STANDBY_LAG_BUCKETS];
};

struct nsa_standby;

struct nsa_standby *nsa_standby_create(const struct nsa_config *conf);

/* Start the subscriber thread (connects with backoff until stopped). */
int nsa_standby_start(struct nsa_standby *sb);
void nsa_standby_stop(struct nsa_standby *sb);
void nsa_standby_free(struct nsa_standby *sb);

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb);
void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s);

/* Upper bound of the p-th percentile (0..100) of the lag, from lag_hist. */
uint64_t nsa_standby_lag_percentile_us(const struct nsa_standby_stats *s,
				       double p);

/* Ask the subscriber thread to dump the table to path between two batches,
 * and wait for it (at most timeout_ms). Returns the count or negative errno. */
int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms);

#endif
