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
 * - A round merges up to a listing of the store a grace period old (its
 *   sighting), and only once every segment of ours signed before that
 *   listing has been answered (compact_settled).
 * - No round starts once the store's epoch passed the writers' (a newer
 *   active compacts instead).
 * - It reads the writers' state only through atomics; it writes only its
 *   own counters (compactions, compact_bytes, compact_peak,
 *   compact_marks_refused, compact_lease_skipped).
 * - A round that finds the store's compaction lease held (another pair's
 *   active compacting the same log) is skipped, counted and tried again
 *   at the next poll past a pause (nsa_compact.c: one round at a time).
 *
 * Not here: a round over the masters (nsa_compact.c), the segments in
 * flight and their low mark (nsa_wbatch.c), the counters read
 * (nsa_active_health.c).
 */
#include <errno.h>
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

/* Whether every segment of ours signed before since_ns (CLOCK_MONOTONIC)
 * has been answered: each writer's oldest segment in flight was signed
 * at or after it (seq_cst both sides, nsa_wpipe.c). A round gives up on
 * the segments its sighting proves signed and it does not list; one of
 * ours slower than that (a loaded machine) would be given up on while
 * still on its way, and its records hidden when it lands. */
static int compact_settled(void *arg, uint64_t since_ns)
{
	const struct nsa_active *a = arg;

	for (unsigned int i = 0; i < a->n_writers; i++)
		if (__atomic_load_n(&a->w[i]->seg_low_ns, __ATOMIC_SEQ_CST) <
		    since_ns)
			return 0;
	return 1;
}

/* The compactor's state between rounds: its rounds' number and the
 * listing the next round merges up to (listed_ns 0: none yet). */
struct compactor {
	uint32_t id;
	uint64_t gen;
	struct nsa_compact_sighting seen;
};

static void compact_log_round(const struct nsa_compact_result *r,
			      unsigned int masters)
{
	NSA_INFO("compactor: round %llu over %u master(s): %llu segments, "
		 "%llu records, %llu live and %llu deletes written back "
		 "(%llu bytes) in %u pass(es), peak %llu bytes%s",
		 (unsigned long long)r->gen, masters,
		 (unsigned long long)r->segments,
		 (unsigned long long)r->records, (unsigned long long)r->live,
		 (unsigned long long)r->tombstones,
		 (unsigned long long)r->bytes_written, r->passes,
		 (unsigned long long)r->peak_bytes,
		 r->families_held ? "; slots moving: part held" : "");
	if (r->marks_refused)
		NSA_WARN("compactor: %llu mark(s) refused (not signed with "
			 "the batch key)",
			 (unsigned long long)r->marks_refused);
}

/* A round skipped for the lease: counted, logged the first time and then
 * every 100th, as two pairs compacting skip rounds all along. */
static void compact_log_skipped(struct nsa_active *a, const char *err)
{
	uint64_t n = __atomic_add_fetch(&a->compact_lease_skipped, 1,
					__ATOMIC_RELAXED);

	if (n % 100 == 1)
		NSA_INFO("compactor: round skipped: %s (%llu skipped so far; "
			 "retried later)",
			 err, (unsigned long long)n);
}

/* The store's topology into t: 0, or -1 (logged). */
static int compact_topology(struct nsa_active *a, struct nsa_topology *t)
{
	char err[256] = "";

	if (nsa_topology_fetch(&a->conf.store, t, err, sizeof(err)) == 0)
		return 0;
	NSA_WARN("compactor: no topology: %s", err);
	return -1;
}

/* List every master: the sighting the next round merges up to, a grace
 * period later. 0 or -1 (logged). */
static int compact_sight(struct nsa_active *a, struct compactor *k)
{
	struct nsa_topology *t = malloc(sizeof(*t));
	char err[256] = "";
	int rc = t && compact_topology(a, t) == 0 ? 0 : -1;

	if (rc == 0 && nsa_compact_sight(&a->conf.store, t, &k->seen, err,
					 sizeof(err)) != 0) {
		NSA_WARN("compactor: %s (retried later)", err);
		k->seen.listed_ns = 0;
		rc = -1;
	}
	free(t);
	return rc;
}

/* One round over every master, up to k's sighting: the bytes written
 * back, or -1 (logged). The sighting is used up either way but when
 * the round only waits for a segment of ours. */
static int64_t compact_round(struct nsa_active *a, struct compactor *k)
{
	struct nsa_topology *t = malloc(sizeof(*t));
	struct nsa_compact_round rd = {
		.id = k->id,
		.gen = ++k->gen,
		.epoch = writers_epoch(a),
		.key = a->conf.batch_key,
		.key_len = a->conf.batch_key_len,
		.grace_ms = a->conf.log_compact_grace_ms,
		.seen = &k->seen,
		.settled = compact_settled,
		.settled_arg = a,
		.budget_bytes = (size_t)a->conf.log_compact_budget_mb << 20,
		.wait_ms = a->conf.log_compact_wait_ms};
	struct nsa_compact_result r;
	char err[256] = "";
	int64_t written = -1;
	int rc = -1;

	if (t && compact_topology(a, t) == 0) {
		rc = nsa_compact_all(&a->conf.store, t, &rd, &r, err,
				     sizeof(err));
		if (rc == -EBUSY)
			compact_log_skipped(a, err);
		else if (rc != 0)
			NSA_WARN("compactor: %s (retried later)", err);
	}
	if (rc == 0) {
		compact_log_round(&r, t->n_nodes);
		k->gen = r.gen;
		__atomic_store_n(&a->compact_peak, r.peak_bytes,
				 __ATOMIC_RELAXED);
		__atomic_add_fetch(&a->compact_marks_refused, r.marks_refused,
				   __ATOMIC_RELAXED);
		written = (int64_t)r.bytes_written;
	}
	if (rc != -EAGAIN)
		k->seen.listed_ns = 0;
	free(t);
	return written;
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
 * those older than the grace period, exceed log_compact_pct % of what it
 * wrote back (and log_compact_min_kb): the log stays within (1 + pct/100)
 * x the live table plus a grace period of writes, and each byte of
 * records is written back at most 100/pct times (schema/FORMAT.md,
 * Compaction). Counting younger bytes made a fast writer start a round
 * every log_compact_min_kb that found nothing to merge, yet read the
 * whole log. A round merges up to a listing a grace period old (its
 * sighting): the listing is taken when the bytes written, young ones
 * included, cross that threshold, so that it is a grace period old when
 * the old bytes cross it and the round starts. */
static void *compactor_main(void *arg)
{
	struct nsa_active *a = arg;
	const uint64_t floor = (uint64_t)a->conf.log_compact_min_kb * 1024;
	const uint64_t grace_ns =
		(uint64_t)a->conf.log_compact_grace_ms * 1000000u;
	uint64_t at_last = 0, live_last = 0;
	struct compactor k = {.id = a->w[0]->publisher_id | 0xffu};
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
		if (st.log_bytes < at_last || st.log_bytes - at_last < due ||
		    nsa_active_fence(a) > writers_epoch(a))
			continue;
		if (k.seen.listed_ns == 0) {
			if (compact_sight(a, &k) != 0)
				nsdp_sleep_ms(1000);
			continue;
		}
		if (old < at_last || old - at_last < due ||
		    nsdp_mono_ns() - k.seen.listed_ns < grace_ns)
			continue;
		written = compact_round(a, &k);
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
	nsa_compact_sighting_free(&k.seen);
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
	NSA_INFO("compactor: %llu round(s), %llu skipped for the lease; "
		 "segments %llu bytes, "
		 "checkpoints %llu bytes; write amplification %.2f",
		 (unsigned long long)st.compactions,
		 (unsigned long long)st.compact_lease_skipped,
		 (unsigned long long)st.log_bytes,
		 (unsigned long long)st.compact_bytes,
		 st.acked ? (double)(st.log_bytes + st.compact_bytes) /
				    ((double)st.acked * NS_RECORD_V1_IPV4_LEN)
			  : 0.0);
}
