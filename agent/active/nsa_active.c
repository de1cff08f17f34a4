/*
 * nsa_active.c - the active role's writers: lanes in, pipelined SETs/DELs
 * and batch notifications out, replies accounted, errors retried in order;
 * the writer threads' loop and the role's life (create, start, drain,
 * stop, free).
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
 * Not here: the writer's machinery below its loop (writer/: batches,
 * pipeline, read-back, replies, links and the resend; nsa_writer.h lists
 * its files), the counters and health other threads read
 * (nsa_active_health.c), the log layout's compactor (nsa_compactor.c), the
 * replay window (nsa_replay.c), the wire formats (schema/).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "nsa_active.h"
#include "nsa_compactor.h"
#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wlink.h"
#include "nsa_wpipe.h"
#include "nsa_wreadback.h"
#include "nsa_wreply.h"
#include "nsa_wsettle.h"
#include "nsdp_time.h"

#include <rte_lcore.h>

/* A connection with replies due and silent for this long is dead. */
#define NSA_REPLY_TIMEOUT_NS (5000ull * 1000000ull)
/* Spin this long without work before sleeping in poll(). */
#define NSA_SPIN_NS (50ull * 1000ull)
#define NSA_POLL_MAX_NS (1000ull * 1000ull)
/* Records taken this recently: the stream is live, and a lane is looked
 * at again within flush_us (no lane wakes a sleeping writer). */
#define NSA_LIVE_NS (100ull * 1000ull * 1000ull)
/* The shortest idle wait (a flush_us of 0 would spin in ppoll). */
#define NSA_POLL_MIN_NS (20ull * 1000ull)

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

/* Records still to append from line i of the n lines at s. */
static unsigned int records_left(const struct ns_session *s, unsigned int i,
				 unsigned int n)
{
	unsigned int left = 0;

	for (; i < n; i += ns_session_lines(&s[i]))
		left++;
	return left;
}

/* n lines, an IPv6 record's two in a row; flags: NSA_REC_* per line (a
 * second line's NSA_REC_LINE2), or NULL for records new from a lane. */
static int append_burst(struct nsa_writer *w, const struct ns_session *s,
			const uint8_t *flags, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i += ns_session_lines(&s[i])) {
		int rc = nsa_append_record(w, &s[i], flags ? flags[i] : 0);

		if (rc != 0) {
			/* Only allocation fails here; the records are lost. */
			NSA_ERR("writer %u: out of memory, %u record(s) "
				"dropped",
				w->idx,
				flags ? nsa_records_lost(w, flags + i, n - i)
				      : nsa_records_lost(
						w, NULL,
						records_left(s, i, n)));
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
		/* never between an IPv6 record's two lines */
		if (rs->pos + n < rs->len &&
		    (rs->flags[rs->pos + n] & NSA_REC_LINE2))
			n++;
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
		unsigned int l = w->next_lane, n;
		struct nsdp_lane *lane = w->lanes[l];
		uint64_t before = NSDP_STAT_READ(lane->drained);

		w->next_lane = (w->next_lane + 1) % w->n_lanes;
		__atomic_store_n(&w->in_burst, 1, __ATOMIC_SEQ_CST);
		/* Lines: an IPv6 record takes two, and a drain needs room
		 * for one (with batch_size 1 a lane that carries IPv6 may
		 * then give two IPv4 records in one burst). */
		n = nsdp_lane_drain(
			lane, w->burst,
			burst < 2 && __atomic_load_n(&lane->has_v6,
						     __ATOMIC_RELAXED)
				? 2
				: burst);
		if (n > 0) {
			W_STAT_ADD(w, records,
				   NSDP_STAT_READ(lane->drained) - before);
			nsa_settle_open(w, l);
			append_burst(w, w->burst, NULL, n);
			nsa_settle_close(w);
			taken += n;
		}
		__atomic_store_n(&w->in_burst, 0, __ATOMIC_SEQ_CST);
	}
	return taken;
}

/* Close batches whose oldest record waited flush_us, or every batch when
 * a held packet waits for a record in one (defer); returns the ns until
 * the next deadline (or NSA_POLL_MAX_NS; NSA_SETTLE_POLL_NS when a lane's
 * producer defers; flush_us while the stream is live, since a record that
 * comes into a lane while the writer sleeps waits for the wait's end: with
 * 1 ms it waited 0.5 ms on average before its batch even opened). */
static uint64_t flush_due(struct nsa_writer *w)
{
	uint64_t flush_ns = (uint64_t)w->a->conf.flush_us * 1000ull;
	uint64_t next =
		nsa_settle_deferring(w) ? NSA_SETTLE_POLL_NS : NSA_POLL_MAX_NS;
	unsigned int i;

	/* A packet waits for a record in an open batch (defer). */
	if (nsa_settle_urgent(w))
		flush_ns = 0;
	if (w->now_ns - w->took_ns < NSA_LIVE_NS && flush_ns < next)
		next = flush_ns > NSA_POLL_MIN_NS ? flush_ns : NSA_POLL_MIN_NS;

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
	int rc;

	snprintf(name, sizeof(name), "nsa-writer-%u", w->idx);
	pthread_setname_np(pthread_self(), name);
	if (w->a->writer_pinned &&
	    (rc = pthread_setaffinity_np(pthread_self(),
					 sizeof(w->a->writer_set),
					 &w->a->writer_set)) != 0)
		NSA_WARN("writer %u: could not keep to [active] writer_cpus "
			 "(%s): it runs on any CPU",
			 w->idx, strerror(rc));
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

		if (taken > 0)
			w->took_ns = w->now_ns;
		if (taken > 0 || io > 0) {
			idle_since = 0;
			continue;
		}
		check_timeouts(w);
		nsa_writer_replay_trim(w);
		nsa_settle_advance(w);
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
							: 0) != 0 ||
		    nsa_settle_init(w) != 0) {
			nsa_active_free(a);
			errno = ENOMEM;
			return NULL;
		}
		for (l = i; l < n_lanes; l += n_writers)
			w->lanes[w->n_lanes++] = lanes[l];
	}
	return a;
}

void nsa_active_polling_lcores(struct nsa_active *a, const unsigned int *lcores,
			       unsigned int n)
{
	CPU_ZERO(&a->polling);
	for (unsigned int i = 0; i < n; i++) {
		rte_cpuset_t cs = rte_lcore_cpuset(lcores[i]);

		CPU_OR(&a->polling, &a->polling, &cs);
	}
}

/* Whether every seed of the store is a loopback address: the store runs
 * on this host, on its CPUs. */
static int store_on_loopback(const struct nsa_store_conf *st)
{
	for (unsigned int i = 0; i < st->n_seeds; i++) {
		const char *h = st->seeds[i].host;
		struct in_addr a4;
		struct in6_addr a6;

		if (strcmp(h, "localhost") == 0)
			continue;
		if (inet_pton(AF_INET, h, &a4) == 1 &&
		    (ntohl(a4.s_addr) >> 24) == 127)
			continue;
		if (inet_pton(AF_INET6, h, &a6) == 1 &&
		    (IN6_IS_ADDR_LOOPBACK(&a6) ||
		     (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127)))
			continue;
		return 0;
	}
	return st->n_seeds > 0;
}

/* [active] writer_cpus: the set the writers keep to, or none (pinned 0).
 * auto: the online CPUs less those of the lcores that poll (a writer that
 * shares a CPU with one waits for it while the lcore waits for the writer:
 * natsync-bench flat out on 2 CPUs, median 6.2 M records/s with the writer
 * off the source's CPU against 5.5 M left to the scheduler;
 * docs/performance.md), unless there are none or that leaves none, or the
 * keys layout's store is on this host: there the store, one command a
 * session, needs a CPU of its own more than the writers do (456 000-507 000
 * sessions/s with the writer kept to the other CPU, 557 000-653 000 left to
 * the scheduler, which put the store alone on it). */
static void writer_cpus_resolve(struct nsa_active *a)
{
	const char *want = a->conf.writer_cpus;
	const long online = sysconf(_SC_NPROCESSORS_ONLN);
	char why[160], list[256];

	a->writer_pinned = 0;
	if (strcmp(want, "all") == 0)
		return;
	if (strcmp(want, "auto") != 0) {
		if (nsa_cpu_list_parse(want, &a->writer_set, why,
				       sizeof(why)) != 0) {
			NSA_WARN("active: [active] writer_cpus: %s: writers "
				 "run on any CPU",
				 why);
			return;
		}
		a->writer_pinned = 1;
		NSA_INFO("active: writers on CPUs %s ([active] writer_cpus)",
			 want);
		return;
	}
	if (CPU_COUNT(&a->polling) == 0)
		return;
	if (a->conf.store.layout == NSA_LAYOUT_KEYS &&
	    store_on_loopback(&a->conf.store)) {
		NSA_INFO("active: writer_cpus = auto: the keys layout's store "
			 "is on this host (loopback), whose CPUs it needs more "
			 "than the writers; writers run on any CPU");
		return;
	}
	CPU_ZERO(&a->writer_set);
	for (long c = 0; c < online && c < CPU_SETSIZE; c++)
		if (!CPU_ISSET(c, &a->polling))
			CPU_SET(c, &a->writer_set);
	if (CPU_COUNT(&a->writer_set) == 0) {
		NSA_INFO("active: writer_cpus = auto: a polling lcore runs on "
			 "every CPU; writers run on any CPU");
		return;
	}
	nsa_cpu_list_format(&a->writer_set, list, sizeof(list));
	NSA_INFO("active: writers on CPUs %s (writer_cpus = auto: not on "
		 "the CPUs of the lcores that poll)",
		 list);
	a->writer_pinned = 1;
}

int nsa_active_start(struct nsa_active *a)
{
	unsigned int i;
	int rc;

	if (a == NULL || a->running)
		return -EINVAL;
	writer_cpus_resolve(a);
	__atomic_store_n(&a->stop, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < a->n_writers; i++) {
		rc = pthread_create(&a->w[i]->thread, NULL, writer_main,
				    a->w[i]);
		if (rc != 0) {
			nsa_active_stop(a);
			return -rc;
		}
		a->w[i]->started = 1;
		a->running = 1;
	}
	rc = nsa_compactor_start(a);
	if (rc != 0)
		nsa_active_stop(a);
	return rc;
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
	nsa_compactor_stop(a);
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
		for (j = 0; j < w->n_lost; j++)
			nsa_batch_put(w, w->lost[j]);
		free(w->held);
		free(w->rb);
		nsa_batch_free_all(w);
		nsa_resend_fini(&w->resend);
		nsa_replay_fini(&w->replay);
		nsa_settle_fini(w);
		free(w);
	}
	free(a);
}
