/*
 * nsa_compactor.c - the log layout's compactor thread beside the writers:
 * when a round is due, and the cut that keeps it from merging past a
 * segment of ours not yet in the store. A round itself is nsa_compact.c's.
 *
 * Invariants:
 * - A round is due once the segments written up to a grace period ago
 *   exceed log_compact_pct % of what the last round wrote back (and
 *   log_compact_min_kb): the log stays within (1 + pct/100) x the live
 *   table plus a grace period of writes (schema/FORMAT.md, Compaction).
 * - A round merges no segment of ours signed at or after the writers'
 *   low marks (compact_until_ns).
 * - No round starts once the store's epoch passed the writers' (a newer
 *   active compacts instead).
 * - It reads the writers' state only through atomics; it writes only its
 *   own counters (compactions, compact_bytes).
 *
 * Not here: a round over the masters (nsa_compact.c), the segments in
 * flight and their low mark (nsa_wbatch.c), the counters read
 * (nsa_active_health.c).
 */
#include <pthread.h>
#include <stdlib.h>

#include "nsa_active_health.h"
#include "nsa_compact.h"
#include "nsa_compactor.h"
#include "nsa_log.h"
#include "nsa_writer.h"
#include "nsdp_time.h"

#define NSA_COMPACT_POLL_MS 50

/* The highest epoch the writers wrote with: compaction stops once the
 * store's epoch passed it (a newer active compacts instead). */
static uint32_t writers_epoch(const struct nsa_active *a)
{
	uint32_t max = a->conf.epoch;

	for (unsigned int i = 0; i < a->n_writers; i++) {
		uint32_t e =
			__atomic_load_n(&a->w[i]->epoch_seen, __ATOMIC_RELAXED);

		if (e > max)
			max = e;
	}
	return max;
}

/* The newest sent_ns a round may merge: a grace period before now, and
 * before the oldest segment of ours not yet answered. The time is read
 * before the writers' low marks (seq_cst both sides, nsa_wbatch.c): every
 * segment of ours signed at or before it is then either answered, so in
 * the store before the listing starts, or above the cut. Without that, a
 * segment slower than the grace period (a loaded machine) would be missed
 * by the listing while the tombstones that beat its records are dropped,
 * and deleted sessions would come back. A foreign writer's segments
 * (another agent's) still rely on the grace period. */
static uint64_t compact_until_ns(const struct nsa_active *a)
{
	uint64_t until = nsdp_realtime_ns() -
			 (uint64_t)a->conf.log_compact_grace_ms * 1000000u;

	for (unsigned int i = 0; i < a->n_writers; i++) {
		uint64_t low =
			__atomic_load_n(&a->w[i]->seg_low_ns, __ATOMIC_SEQ_CST);

		if (low != UINT64_MAX && low - 1 < until)
			until = low - 1;
	}
	return until;
}

/* One round over every master: the bytes written back, or -1. */
static int64_t compact_round(struct nsa_active *a, uint32_t id, uint64_t gen)
{
	struct nsa_topology *t = malloc(sizeof(*t));
	uint64_t written = 0;
	char err[256] = "";
	int64_t rc = 0;

	if (t == NULL)
		return -1;
	if (nsa_topology_fetch(&a->conf.store, t, err, sizeof(err)) != 0) {
		NSA_WARN("compactor: no topology: %s", err);
		free(t);
		return -1;
	}
	{
		struct nsa_compact_result r;

		const struct nsa_compact_round rd = {
			.id = id,
			.gen = gen,
			.epoch = writers_epoch(a),
			.key = a->conf.batch_key,
			.key_len = a->conf.batch_key_len,
			.until_ns = compact_until_ns(a),
			.grace_ms = a->conf.log_compact_grace_ms};

		if (nsa_compact_all(&a->conf.store, t, &rd, &r, err,
				    sizeof(err)) != 0) {
			NSA_WARN("compactor: %s (retried later)", err);
			rc = -1;
		} else {
			NSA_DEBUG("compactor: %u master(s): %llu segments, "
				  "%llu records, %llu live written back "
				  "(%llu bytes)",
				  t->n_nodes, (unsigned long long)r.segments,
				  (unsigned long long)r.records,
				  (unsigned long long)r.live,
				  (unsigned long long)r.bytes_written);
			written = r.bytes_written;
		}
	}
	free(t);
	return rc < 0 ? rc : (int64_t)written;
}

/* The segment bytes written up to a grace period ago: a ring of the
 * writers' log_bytes, one sample per poll. */
struct old_bytes {
	uint64_t *v;
	size_t n, next, filled;
};

/* Add this poll's sample; the sample grace polls old (0 before). */
static uint64_t old_bytes_step(struct old_bytes *o, uint64_t now)
{
	uint64_t old = o->filled == o->n ? o->v[o->next] : 0;

	o->v[o->next] = now;
	o->next = (o->next + 1) % o->n;
	if (o->filled < o->n)
		o->filled++;
	return old;
}

/* Compact once the segments written since the last round, counting only
 * those older than the grace period (a round merges no younger one),
 * exceed log_compact_pct % of what it wrote back (and log_compact_min_kb):
 * the log stays within (1 + pct/100) x the live table plus a grace period
 * of writes, and each byte of records is written back at most 100/pct
 * times (schema/FORMAT.md, Compaction). Counting younger bytes would make
 * a fast writer start a round every log_compact_min_kb that finds nothing
 * to merge, yet reads the whole log: at 400 000 records/s, five rounds a
 * second, the store busy with the reads while the standbys wait. */
static void *compactor_main(void *arg)
{
	struct nsa_active *a = arg;
	const uint64_t floor = (uint64_t)a->conf.log_compact_min_kb * 1024;
	uint64_t at_last = 0, live_last = 0, gen = 0;
	uint32_t id = a->w[0]->publisher_id | 0xffu;
	struct old_bytes ob = {
		.n = a->conf.log_compact_grace_ms / NSA_COMPACT_POLL_MS + 1};

	pthread_setname_np(pthread_self(), "nsa-compactor");
	ob.v = calloc(ob.n, sizeof(*ob.v));
	if (ob.v == NULL) {
		NSA_ERR("compactor: out of memory: the log is not compacted");
		return NULL;
	}
	while (!__atomic_load_n(&a->stop, __ATOMIC_RELAXED)) {
		struct nsa_active_stats st;
		uint64_t due, old;
		int64_t written;

		nsdp_sleep_ms(NSA_COMPACT_POLL_MS);
		nsa_active_stats(a, &st);
		old = old_bytes_step(&ob, st.log_bytes);
		due = live_last * a->conf.log_compact_pct / 100;
		if (due < floor)
			due = floor;
		if (old < at_last || old - at_last < due ||
		    nsa_active_fence(a) > writers_epoch(a))
			continue;
		written = compact_round(a, id, ++gen);
		if (written < 0) {
			nsdp_sleep_ms(1000);
			continue;
		}
		at_last = old;
		live_last = (uint64_t)written;
		__atomic_add_fetch(&a->compactions, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&a->compact_bytes, (uint64_t)written,
				   __ATOMIC_RELAXED);
	}
	free(ob.v);
	return NULL;
}

int nsa_compactor_start(struct nsa_active *a)
{
	int rc;

	if (a->conf.store.layout != NSA_LAYOUT_LOG ||
	    a->conf.log_compact_pct == 0 || a->n_writers == 0)
		return 0;
	rc = pthread_create(&a->compactor, NULL, compactor_main, a);
	if (rc != 0)
		return -rc;
	a->compactor_started = 1;
	return 0;
}

void nsa_compactor_stop(struct nsa_active *a)
{
	struct nsa_active_stats st;

	if (!a->compactor_started)
		return;
	pthread_join(a->compactor, NULL);
	a->compactor_started = 0;
	nsa_active_stats(a, &st);
	NSA_INFO("compactor: %llu round(s); segments %llu bytes, "
		 "checkpoints %llu bytes; write amplification %.2f",
		 (unsigned long long)st.compactions,
		 (unsigned long long)st.log_bytes,
		 (unsigned long long)st.compact_bytes,
		 st.acked ? (double)(st.log_bytes + st.compact_bytes) /
				    ((double)st.acked * NS_RECORD_V1_IPV4_LEN)
			  : 0.0);
}
