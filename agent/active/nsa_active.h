/*
 * nsa_active.h - the active role: writer threads that drain the lanes and
 * replicate every record to the store.
 *
 * Each writer owns a share of the lanes and one pipelined connection per
 * master. It routes each record by its key's slot, appends
 * "SET key record PX timeout" (or "DEL key") to that master's open batch,
 * and closes a batch with one notification carrying all its records
 * (SPUBLISH, or PUBLISH) when it is full or its flush deadline passed.
 * Several batches are in flight per connection; replies are read as they
 * come. MOVED/ASK/TRYAGAIN/CLUSTERDOWN and lost connections make the writer
 * refresh the topology and resend every unacknowledged record in its
 * original order, so the store ends with each session's latest record.
 * A write refused for good (OOM, NOPERM) is dropped; since its
 * notification is already out, the writer reads the key back and
 * publishes what the store holds in a batch flagged NS_BATCH_F_STORE.
 *
 * A master acknowledges before its replica has the write. When a master is
 * lost (its connection dies, or it leaves the topology: its replica was
 * promoted), the writer also replays the records acknowledged in the last
 * [active] replay_ms (at most replay_records per writer), merged in order
 * with the unacknowledged ones, so that what the dead master had not yet
 * replicated reaches its successor.
 */
#ifndef NSA_ACTIVE_H
#define NSA_ACTIVE_H

#include <stdint.h>

#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsdp_lane.h"

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
	uint64_t compactions, compact_bytes;
	/* The last round's peak memory; the marks rounds refused. */
	uint64_t compact_peak, compact_marks_refused;
	uint64_t inflight; /* records sent, not yet acknowledged */
};

struct nsa_active;

struct nsa_active *nsa_active_create(const struct nsa_config *conf,
				     struct nsdp_lane **lanes,
				     unsigned int n_lanes);

/* Start the writers. Each connects on its own thread, retrying with backoff
 * until stopped, so this does not wait for the store to be reachable. */
int nsa_active_start(struct nsa_active *a);

/* Wait until every lane is empty and every record acknowledged (replayed
 * ones included), at most timeout_ms; 0 when drained, -ETIMEDOUT
 * otherwise. */
int nsa_active_drain(struct nsa_active *a, int timeout_ms);

/* Stop the writers (unacknowledged records are counted as dropped). */
void nsa_active_stop(struct nsa_active *a);
void nsa_active_free(struct nsa_active *a);

void nsa_active_stats(const struct nsa_active *a, struct nsa_active_stats *s);

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

unsigned int nsa_active_writers(const struct nsa_active *a);
void nsa_active_writer_health(const struct nsa_active *a, unsigned int i,
			      struct nsa_writer_health *h);

/* The highest epoch the writers read from the store's counter (0 before
 * any connection): above the records' epoch, this active is fenced. */
uint32_t nsa_active_fence(const struct nsa_active *a);

#endif
