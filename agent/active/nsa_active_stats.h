/*
 * nsa_active_stats.h - what the active role's writers count and publish
 * for other threads: the counters (summed by nsa_active_stats) and one
 * writer's health (nsa_active_writer_health), both read through
 * nsa_active_health.h. Types only.
 */
#ifndef NSA_ACTIVE_STATS_H
#define NSA_ACTIVE_STATS_H

#include <stdint.h>

#include "nsa_cluster.h"

struct nsa_active_stats {
	uint64_t records; /* drained from the lanes */
	uint64_t acked; /* records whose commands the store acknowledged */
	uint64_t batches; /* notifications acknowledged */
	uint64_t sets, dels;
	uint64_t resent; /* records sent again after an error */
	uint64_t replayed; /* acknowledged records sent again after a lost
			      master (the replay window) */
	uint64_t replay_short; /* records that left the replay window, full,
				  before replay_ms had passed */
	uint64_t replay_inflight; /* replayed, not yet acknowledged again */
	uint64_t moved, ask, tryagain, clusterdown, other_errors;
	uint64_t reconnects;
	uint64_t topology_refreshes;
	uint64_t lane_drops; /* sum of the lanes' drop counters */
	uint64_t dropped; /* records the agent gave up on (counted, logged) */
	/* Of those, records below the store's epoch: a newer active took
	 * over (nsa_fence.h), so they are neither written nor published. */
	uint64_t fenced;
	/* Records published (NS_BATCH_F_STORE) to tell the standbys what the
	 * store holds for a key after it refused a write for good, and the
	 * refusals still being read back or published. */
	uint64_t store_corrections;
	uint64_t corrections_due;
	/* [store] layout = log: bytes of the segments written (batches as
	 * published), and the compactor's rounds and the bytes of the
	 * checkpoints it wrote back (schema/FORMAT.md, Compaction). */
	uint64_t log_bytes;
	/* Segments the store refused for good, written again under a new
	 * seq and acknowledged (NS_BATCH_F_REWRITE), and their bytes. */
	uint64_t log_rewrites, log_rewrite_bytes;
	uint64_t compactions, compact_bytes;
	/* The last round's peak memory; the marks rounds refused. */
	uint64_t compact_peak, compact_marks_refused;
	/* Rounds skipped: another round (another pair's active) held the
	 * store's compaction lease, or took it over. */
	uint64_t compact_lease_skipped;
	uint64_t inflight; /* records sent, not yet acknowledged */
	/* Bursts whose acknowledgements the settle ledger gave up waiting
	 * for (nsa_wsettle.c): a defer lets their packets go on its own. */
	uint64_t settle_abandoned;
};

/* One writer's health, for metrics and readiness (nsa_metrics.h): read
 * from the writer's relaxed atomics, never a lock. */
#define NSA_WRITER_MASTER_LEN 72 /* "host:port" */
struct nsa_writer_health {
	int connected; /* connected to every master, not retrying */
	uint64_t retry_ms; /* how long it has been retrying (0: connected) */
	uint64_t acked; /* this writer's share of nsa_active_stats.acked */
	unsigned int n_masters; /* as of its last connection */
	char masters[NSA_MAX_NODES][NSA_WRITER_MASTER_LEN];
};

#endif
