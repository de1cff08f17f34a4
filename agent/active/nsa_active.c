/*
 * nsa_active.c - the active role's writers: lanes in, pipelined SETs/DELs
 * and batch notifications out, replies accounted, errors retried in order.
 *
 * Each writer thread owns the lanes l with l % W == w and one non-blocking
 * connection per master. Its loop: read the replies due, recover when in
 * retry mode and quiet, take records (the resend queue first, then the
 * lanes), close batches whose flush deadline passed, send; spin briefly
 * when idle, then sleep in poll().
 *
 * Invariants:
 * - A record is counted once in records (drained), then ends exactly once
 *   in acked or dropped; inflight is the difference.
 * - Per connection, batches are opened, closed and acknowledged in order,
 *   and a session's key maps to one connection while a topology holds, so
 *   the store sees each session's records in order.
 * - At most max_inflight closed batches await replies per connection; when
 *   a connection is full the writer stops draining lanes (nsdp_lane.h says
 *   what a full lane does).
 *
 * Not here: the pipeline (nsa_wpipe.c), connections and the resend
 * (nsa_wlink.c), the replay window (nsa_replay.c), the wire formats
 * (schema/).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nsa_compact.h"
#include "nsa_log.h"
#include "nsa_writer.h"
#include "nsdp_time.h"

/* A connection with replies due and silent for this long is dead. */
#define NSA_REPLY_TIMEOUT_NS (5000ull * 1000000ull)
/* Spin this long without work before sleeping in poll(). */
#define NSA_SPIN_NS (50ull * 1000ull)
#define NSA_POLL_MAX_NS (1000ull * 1000ull)

/* ---- the writer loop ---------------------------------------------------- */

static int quiescent(const struct nsa_writer *w)
{
	unsigned int i;

	for (i = 0; i < w->n_conns; i++)
		if (w->conns[i]->conn.exp_count > 0)
			return 0;
	return 1;
}

static int can_take(const struct nsa_writer *w)
{
	unsigned int i, max = w->a->conf.max_inflight;

	if (w->retry_mode)
		return 0;
	for (i = 0; i < w->n_conns; i++)
		if (w->conns[i]->inflight_batches >= max)
			return 0;
	return 1;
}

/* flags: NSA_REC_* per record, or NULL for records new from a lane. */
static int append_burst(struct nsa_writer *w, const struct ns_session *s,
			const uint8_t *flags, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		int rc = nsa_append_record(w, &s[i], flags ? flags[i] : 0);

		if (rc != 0) {
			/* Only allocation fails here; the records are lost. */
			NSA_ERR("writer %u: out of memory, %u record(s) "
				"dropped",
				w->idx,
				nsa_records_lost(w, flags ? flags + i : NULL,
						 n - i));
			return rc;
		}
	}
	return 0;
}

/* Take records: the resend queue first, then the lanes in turn. A burst is
 * at most one batch, so one burst closes at most one batch per master and
 * max_inflight holds. */
static unsigned int take_records(struct nsa_writer *w)
{
	unsigned int burst = w->a->conf.batch_size < NSA_BURST
				     ? w->a->conf.batch_size
				     : NSA_BURST;
	struct nsa_resend *rs = &w->resend;
	unsigned int taken = 0, k;

	nsa_readback_send(w);
	nsa_log_resync_send(w);
	while (rs->pos < rs->len && can_take(w)) {
		size_t n = rs->len - rs->pos;

		if (n > burst)
			n = burst;
		append_burst(w, rs->q + rs->pos, rs->flags + rs->pos,
			     (unsigned int)n);
		rs->pos += n;
		taken += (unsigned int)n;
		if (taken >= 4 * NSA_BURST)
			return taken;
	}
	if (rs->pos < rs->len)
		return taken;
	rs->pos = rs->len = 0;

	for (k = 0; k < w->n_lanes && can_take(w); k++) {
		struct nsdp_lane *lane = w->lanes[w->next_lane];
		unsigned int n;

		w->next_lane = (w->next_lane + 1) % w->n_lanes;
		__atomic_store_n(&w->in_burst, 1, __ATOMIC_SEQ_CST);
		n = nsdp_lane_drain(lane, w->burst, burst);
		if (n > 0) {
			W_STAT_ADD(w, records, n);
			append_burst(w, w->burst, NULL, n);
			taken += n;
		}
		__atomic_store_n(&w->in_burst, 0, __ATOMIC_SEQ_CST);
	}
	return taken;
}

/* Close batches whose oldest record waited flush_us; returns the ns until
 * the next deadline (or NSA_POLL_MAX_NS). */
static uint64_t flush_due(struct nsa_writer *w)
{
	uint64_t flush_ns = (uint64_t)w->a->conf.flush_us * 1000ull;
	uint64_t next = NSA_POLL_MAX_NS;
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_link *c = w->conns[i];
		uint64_t age;

		if (c->open == NULL || c->conn.fd < 0)
			continue;
		age = w->now_ns - c->open->open_ns;
		if (age >= flush_ns) {
			if (nsa_batch_close(w, c) != 0)
				nsa_link_kill(w, c, "out of memory");
		} else if (flush_ns - age < next) {
			next = flush_ns - age;
		}
	}
	return next;
}

static void idle_wait(struct nsa_writer *w, uint64_t timeout_ns)
{
	struct pollfd pfd[NSA_MAX_CONNS];
	unsigned int who[NSA_MAX_CONNS];
	struct timespec ts;
	unsigned int i, n = 0;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_link *c = w->conns[i];

		if (c->conn.fd < 0)
			continue;
		pfd[n].fd = c->conn.fd;
		pfd[n].events = POLLIN;
		if (nsa_conn_want_write(&c->conn))
			pfd[n].events |= POLLOUT;
		pfd[n].revents = 0;
		who[n++] = i;
	}
	ts.tv_sec = 0;
	ts.tv_nsec = (long)timeout_ns;
	if (ppoll(pfd, n, &ts, NULL) <= 0)
		return;
	/* A connection that owes nothing and turns readable was closed (a
	 * master killed while idle): notice it now, not at the next send. */
	for (i = 0; i < n; i++) {
		struct nsa_link *c = w->conns[who[i]];

		if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    c->conn.fd >= 0 && c->conn.exp_count == 0) {
			w->now_ns = nsdp_mono_ns();
			nsa_link_read(w, c);
		}
	}
}

static void check_timeouts(struct nsa_writer *w)
{
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		struct nsa_link *c = w->conns[i];

		if (c->conn.fd >= 0 && c->conn.exp_count > 0 &&
		    w->now_ns - c->wait_since_ns > NSA_REPLY_TIMEOUT_NS)
			nsa_link_kill(w, c, "no reply within 5 s");
	}
}

static void *writer_main(void *arg)
{
	struct nsa_writer *w = arg;
	uint64_t idle_since = 0;
	char name[16];

	snprintf(name, sizeof(name), "nsa-writer-%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	w->now_ns = nsdp_mono_ns();
	if (nsa_writer_connect(w) != 0)
		return NULL;
	nsa_writer_health_connected(w);

	while (!nsa_writer_stopping(w)) {
		size_t io = 0;
		unsigned int i, taken = 0;
		uint64_t next;

		w->now_ns = nsdp_mono_ns();
		for (i = 0; i < w->n_conns; i++)
			if (w->conns[i]->conn.fd >= 0 &&
			    w->conns[i]->conn.exp_count > 0)
				io += nsa_link_read(w, w->conns[i]);
		if (w->retry_mode)
			nsa_writer_health_retrying(w);
		if (w->retry_mode && quiescent(w)) {
			if (nsa_writer_recover(w) != 0)
				break;
			nsa_writer_health_connected(w);
			w->now_ns = nsdp_mono_ns();
		}
		if (!w->retry_mode)
			taken = take_records(w);
		next = w->retry_mode ? NSA_POLL_MAX_NS : flush_due(w);
		for (i = 0; i < w->n_conns; i++)
			io += nsa_link_send(w, w->conns[i]);

		if (taken > 0 || io > 0) {
			idle_since = 0;
			continue;
		}
		check_timeouts(w);
		nsa_writer_replay_trim(w);
		if (idle_since == 0)
			idle_since = w->now_ns;
		/* Spinning helps only while new records may come any moment;
		 * replies wake poll() as fast as spinning would find them. */
		if (!can_take(w) || w->now_ns - idle_since >= NSA_SPIN_NS)
			idle_wait(w, next);
	}
	return NULL;
}

/* ---- public ------------------------------------------------------------- */

struct nsa_active *nsa_active_create(const struct nsa_config *conf,
				     struct nsdp_lane **lanes,
				     unsigned int n_lanes)
{
	unsigned int n_writers, i;
	struct nsa_active *a;
	uint32_t rnd = 0;

	if (conf == NULL || lanes == NULL || n_lanes == 0 ||
	    n_lanes > NSDP_MAX_LANES) {
		errno = EINVAL;
		return NULL;
	}
	n_writers = conf->workers ? conf->workers : 1;
	if (n_writers > n_lanes)
		n_writers = n_lanes; /* a writer without a lane has no work */
	a = calloc(1, sizeof(*a) + n_writers * sizeof(a->w[0]));
	if (a == NULL)
		return NULL;
	a->conf = *conf;
	if (a->conf.batch_size == 0)
		a->conf.batch_size = 1;
	if (a->conf.batch_size > NS_BATCH_MAX_RECORDS)
		a->conf.batch_size = NS_BATCH_MAX_RECORDS;
	if (a->conf.max_inflight == 0)
		a->conf.max_inflight = 1;
	memcpy(a->lanes, lanes, n_lanes * sizeof(*lanes));
	a->n_lanes = n_lanes;
	a->n_writers = n_writers;
	a->replay_ns = (uint64_t)conf->replay_ms * 1000000ull;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)nsdp_mono_ns() ^ (uint32_t)getpid();

	for (i = 0; i < n_writers; i++) {
		struct nsa_writer *w;
		unsigned int l;

		if (posix_memalign((void **)&a->w[i], 64, sizeof(*w)) != 0) {
			nsa_active_free(a);
			errno = ENOMEM;
			return NULL;
		}
		w = a->w[i];
		memset(w, 0, sizeof(*w));
		w->a = a;
		w->idx = i;
		/* Not connected yet: retrying from the start. */
		w->retry_since_ns = nsdp_mono_ns();
		w->seg_low_ns = UINT64_MAX;
		w->publisher_id = (rnd & 0xffffffu) << 8 | (i & 0xffu);
		w->epoch_seen = conf->epoch;
		w->err_backoff_ms = NSA_ERR_BACKOFF_MIN_MS;
		if (nsa_replay_init(&w->replay, conf->replay_ms > 0
							? conf->replay_records
							: 0) != 0) {
			nsa_active_free(a);
			errno = ENOMEM;
			return NULL;
		}
		for (l = i; l < n_lanes; l += n_writers)
			w->lanes[w->n_lanes++] = lanes[l];
	}
	return a;
}

/* ---- the log layout's compactor --------------------------------------- */

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
		if (rc != 0)
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

int nsa_active_start(struct nsa_active *a)
{
	unsigned int i;

	if (a == NULL || a->running)
		return -EINVAL;
	__atomic_store_n(&a->stop, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < a->n_writers; i++) {
		int rc = pthread_create(&a->w[i]->thread, NULL, writer_main,
					a->w[i]);

		if (rc != 0) {
			nsa_active_stop(a);
			return -rc;
		}
		a->w[i]->started = 1;
		a->running = 1;
	}
	if (a->conf.store.layout == NSA_LAYOUT_LOG &&
	    a->conf.log_compact_pct > 0 && a->n_writers > 0) {
		int rc = pthread_create(&a->compactor, NULL, compactor_main, a);

		if (rc != 0) {
			nsa_active_stop(a);
			return -rc;
		}
		a->compactor_started = 1;
	}
	return 0;
}

void nsa_active_stats(const struct nsa_active *a, struct nsa_active_stats *s)
{
	const size_t nf = sizeof(*s) / sizeof(uint64_t);
	unsigned int i;
	size_t f;

	memset(s, 0, sizeof(*s));
	if (a == NULL)
		return;
	for (i = 0; i < a->n_writers; i++) {
		const uint64_t *src = (const uint64_t *)&a->w[i]->st;
		uint64_t *dst = (uint64_t *)s;

		for (f = 0; f < nf; f++)
			dst[f] += __atomic_load_n(&src[f], __ATOMIC_RELAXED);
	}
	for (i = 0; i < a->n_lanes; i++)
		s->lane_drops += __atomic_load_n(&a->lanes[i]->dropped,
						 __ATOMIC_RELAXED);
	s->compactions = __atomic_load_n(&a->compactions, __ATOMIC_RELAXED);
	s->compact_bytes = __atomic_load_n(&a->compact_bytes, __ATOMIC_RELAXED);
	s->compact_peak = __atomic_load_n(&a->compact_peak, __ATOMIC_RELAXED);
	s->compact_marks_refused =
		__atomic_load_n(&a->compact_marks_refused, __ATOMIC_RELAXED);
	s->inflight = s->records - s->acked - s->dropped;
}

/* ---- health ------------------------------------------------------------ */

void nsa_writer_health_retrying(struct nsa_writer *w)
{
	if (__atomic_load_n(&w->retry_since_ns, __ATOMIC_RELAXED) == 0)
		__atomic_store_n(&w->retry_since_ns, nsdp_mono_ns(),
				 __ATOMIC_RELAXED);
}

/* Connected to every master of w->topo: publish them (a seqlock: the
 * reader retries while health_seq is odd or moved). */
void nsa_writer_health_connected(struct nsa_writer *w)
{
	unsigned int i, k, n = w->topo.n_nodes;
	uint32_t seq = w->health_seq;

	if (n > NSA_MAX_NODES)
		n = NSA_MAX_NODES;
	__atomic_store_n(&w->health_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < n; i++) {
		char text[NSA_WRITER_MASTER_LEN] = {0};
		uint64_t word;

		snprintf(text, sizeof(text), "%s:%u",
			 w->topo.nodes[i].addr.host,
			 w->topo.nodes[i].addr.port);
		for (k = 0; k < NSA_WRITER_MASTER_LEN / 8; k++) {
			memcpy(&word, text + 8 * k, 8);
			__atomic_store_n(&w->masters_pub[i][k], word,
					 __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&w->n_masters_pub, n, __ATOMIC_RELAXED);
	__atomic_store_n(&w->health_seq, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&w->retry_since_ns, 0, __ATOMIC_RELAXED);
}

unsigned int nsa_active_writers(const struct nsa_active *a)
{
	return a ? a->n_writers : 0;
}

void nsa_active_writer_health(const struct nsa_active *a, unsigned int i,
			      struct nsa_writer_health *h)
{
	const struct nsa_writer *w = a->w[i];
	uint64_t since, now = nsdp_mono_ns();
	unsigned int tries, m, k;

	memset(h, 0, sizeof(*h));
	since = __atomic_load_n(&w->retry_since_ns, __ATOMIC_RELAXED);
	h->connected = since == 0;
	h->retry_ms = since && now > since ? (now - since) / 1000000 : 0;
	h->acked = __atomic_load_n(&w->st.acked, __ATOMIC_RELAXED);
	for (tries = 0; tries < 8; tries++) {
		uint32_t seq =
			__atomic_load_n(&w->health_seq, __ATOMIC_ACQUIRE);

		if (seq & 1)
			continue;
		h->n_masters =
			__atomic_load_n(&w->n_masters_pub, __ATOMIC_RELAXED);
		for (m = 0; m < h->n_masters; m++)
			for (k = 0; k < NSA_WRITER_MASTER_LEN / 8; k++) {
				uint64_t word =
					__atomic_load_n(&w->masters_pub[m][k],
							__ATOMIC_RELAXED);

				memcpy(h->masters[m] + 8 * k, &word, 8);
			}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&w->health_seq, __ATOMIC_RELAXED) == seq)
			break;
	}
	/* Rewritten all along: the next scrape has them. */
	if (tries == 8)
		h->n_masters = 0;
	for (m = 0; m < h->n_masters; m++)
		h->masters[m][NSA_WRITER_MASTER_LEN - 1] = 0;
}

uint32_t nsa_active_fence(const struct nsa_active *a)
{
	uint32_t max = 0;

	for (unsigned int i = 0; a && i < a->n_writers; i++) {
		uint32_t f = __atomic_load_n(&a->w[i]->fence, __ATOMIC_RELAXED);

		if (f > max)
			max = f;
	}
	return max;
}

static int drained(const struct nsa_active *a)
{
	struct nsa_active_stats s;
	unsigned int i;

	for (i = 0; i < a->n_lanes; i++)
		if (!rte_ring_empty(a->lanes[i]->ring))
			return 0;
	/* A writer that emptied a lane raised in_burst first and lowers it
	 * only after counting the records, so reading it after the lanes
	 * closes the window between dequeue and count. */
	for (i = 0; i < a->n_writers; i++)
		if (__atomic_load_n(&a->w[i]->in_burst, __ATOMIC_SEQ_CST))
			return 0;
	nsa_active_stats(a, &s);
	return s.inflight == 0 && s.replay_inflight == 0 &&
	       s.corrections_due == 0;
}

int nsa_active_drain(struct nsa_active *a, int timeout_ms)
{
	uint64_t deadline =
		nsdp_mono_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

	if (a == NULL)
		return -EINVAL;
	for (;;) {
		if (drained(a))
			return 0;
		if (nsdp_mono_ns() >= deadline)
			return -ETIMEDOUT;
		nsdp_sleep_ms(1);
	}
}

void nsa_active_stop(struct nsa_active *a)
{
	unsigned int i;

	if (a == NULL)
		return;
	__atomic_store_n(&a->stop, 1, __ATOMIC_SEQ_CST);
	if (a->compactor_started) {
		struct nsa_active_stats st;

		pthread_join(a->compactor, NULL);
		a->compactor_started = 0;
		nsa_active_stats(a, &st);
		NSA_INFO("compactor: %llu round(s); segments %llu bytes, "
			 "checkpoints %llu bytes; write amplification %.2f",
			 (unsigned long long)st.compactions,
			 (unsigned long long)st.log_bytes,
			 (unsigned long long)st.compact_bytes,
			 st.acked ? (double)(st.log_bytes + st.compact_bytes) /
					    ((double)st.acked *
					     NS_RECORD_V1_IPV4_LEN)
				  : 0.0);
	}
	for (i = 0; i < a->n_writers; i++) {
		struct nsa_writer *w = a->w[i];
		uint64_t left;

		if (w == NULL || !w->started)
			continue;
		pthread_join(w->thread, NULL);
		w->started = 0;
		left = w->st.records - w->st.acked - w->st.dropped;
		if (left > 0) {
			NSA_WARN("writer %u: stopped with %llu unacknowledged "
				 "record(s), counted as dropped",
				 w->idx, (unsigned long long)left);
			W_STAT_ADD(w, dropped, left);
		}
	}
	a->running = 0;
}

void nsa_active_free(struct nsa_active *a)
{
	unsigned int i, j;

	if (a == NULL)
		return;
	nsa_active_stop(a);
	for (i = 0; i < a->n_writers; i++) {
		struct nsa_writer *w = a->w[i];

		if (w == NULL)
			continue;
		for (j = 0; j < w->n_conns; j++) {
			struct nsa_link *c = w->conns[j];

			/* A closed batch is owned by the replies it awaits. */
			while (c->conn.exp_count > 0) {
				struct nsa_batch *b =
					nsa_conn_exp_pop(&c->conn).ptr;

				if (b == NULL) /* a read-back's GET */
					continue;
				if (--b->pending == 0 && b->closed)
					nsa_batch_put(w, b);
			}
		}
		for (j = 0; j < w->n_conns; j++) {
			if (w->conns[j]->open != NULL)
				nsa_batch_put(w, w->conns[j]->open);
			nsa_link_free(w->conns[j]);
		}
		for (j = 0; j < w->n_held; j++)
			nsa_batch_put(w, w->held[j]);
		free(w->held);
		free(w->rb);
		nsa_batch_free_all(w);
		nsa_resend_fini(&w->resend);
		nsa_replay_fini(&w->replay);
		free(w);
	}
	free(a);
}
