/*
 * test_synth.c - the synthetic source is deterministic, its counters add
 * up, its final table is what a consumer of its lanes would hold, it paces
 * itself and it either waits on or drops at a full ring as configured.
 *
 * Workers run on plain pthreads; one consumer thread drains every lane into
 * per-lane logs, from which the tests rebuild the table independently.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "nsdp_synth.h"
#include "nsdp_table.h"
#include "nst_store.h"
#include "nsdp_time.h"

#define MAX_WORKERS 8
#define DEADLINE_S 60.0

static void eal_up(void)
{
	cr_assert_eq(nst_eal_init(256), 0, "EAL init failed");
}

TestSuite(synth, .init = eal_up, .timeout = 120);

struct run {
	unsigned int nworkers;
	struct nsdp_lane *lanes[MAX_WORKERS];
	struct nsdp_synth *synth;
	/* What came out of each lane, in order. */
	struct ns_session *log[MAX_WORKERS];
	size_t len[MAX_WORKERS], cap[MAX_WORKERS];
	int slow_consumer;
	int producers_done;
	int consumer_timed_out;
	double elapsed_s;
};

struct worker_arg {
	struct run *r;
	unsigned int w;
	int rc;
};

static void run_open(struct run *r, const struct nsdp_synth_conf *conf,
		     unsigned int nworkers, unsigned int ring_size)
{
	unsigned int w;

	memset(r, 0, sizeof(*r));
	r->nworkers = nworkers;
	for (w = 0; w < nworkers; w++) {
		r->lanes[w] = nsdp_lane_create(w, ring_size, SOCKET_ID_ANY);
		cr_assert_not_null(r->lanes[w]);
	}
	r->synth = nsdp_synth_create(conf, r->lanes, nworkers);
	cr_assert_not_null(r->synth);
}

static void run_close(struct run *r)
{
	unsigned int w;

	nsdp_synth_free(r->synth);
	for (w = 0; w < r->nworkers; w++) {
		nsdp_lane_free(r->lanes[w]);
		free(r->log[w]);
	}
}

static unsigned int drain_lane(struct run *r, unsigned int w, unsigned int max)
{
	struct ns_session buf[256];
	unsigned int n = nsdp_lane_drain(r->lanes[w], buf, max);

	if (n == 0)
		return 0; /* r->log[w] may still be NULL */
	if (r->len[w] + n > r->cap[w]) {
		r->cap[w] = (r->cap[w] + n) * 2;
		r->log[w] = realloc(r->log[w], r->cap[w] * sizeof(buf[0]));
		if (r->log[w] == NULL)
			abort();
	}
	memcpy(&r->log[w][r->len[w]], buf, n * sizeof(buf[0]));
	r->len[w] += n;
	return n;
}

static void drain_all(struct run *r)
{
	unsigned int w;

	for (w = 0; w < r->nworkers; w++)
		while (drain_lane(r, w, 256) > 0) {
		}
}

static void *consumer(void *arg)
{
	struct run *r = arg;
	double deadline = nsdp_now_s() + DEADLINE_S;

	for (;;) {
		int done =
			__atomic_load_n(&r->producers_done, __ATOMIC_ACQUIRE);
		unsigned int got = 0, w;

		for (w = 0; w < r->nworkers; w++)
			got += drain_lane(r, w, r->slow_consumer ? 4 : 256);
		if (done && got == 0)
			return NULL;
		if (nsdp_now_s() > deadline) {
			r->consumer_timed_out = 1;
			return NULL;
		}
		if (r->slow_consumer)
			nsdp_sleep_us(20);
		else if (got == 0)
			sched_yield(); /* workers may share our CPU */
	}
}

static void *worker(void *arg)
{
	struct worker_arg *a = arg;

	a->rc = nsdp_synth_run(a->r->synth, a->w);
	return NULL;
}

/* Run every worker on its own thread, with or without a consumer. */
static void run_workers(struct run *r, int with_consumer)
{
	struct worker_arg args[MAX_WORKERS];
	pthread_t wt[MAX_WORKERS], ct;
	double t0 = nsdp_now_s();
	unsigned int w;

	if (with_consumer)
		cr_assert_eq(pthread_create(&ct, NULL, consumer, r), 0);
	for (w = 0; w < r->nworkers; w++) {
		args[w] = (struct worker_arg){.r = r, .w = w};
		cr_assert_eq(pthread_create(&wt[w], NULL, worker, &args[w]), 0);
	}
	for (w = 0; w < r->nworkers; w++) {
		pthread_join(wt[w], NULL);
		cr_assert_eq(args[w].rc, 0, "worker %u returned %d", w,
			     args[w].rc);
	}
	r->elapsed_s = nsdp_now_s() - t0;
	__atomic_store_n(&r->producers_done, 1, __ATOMIC_RELEASE);
	if (with_consumer) {
		pthread_join(ct, NULL);
		cr_assert_not(r->consumer_timed_out, "consumer timed out");
	}
}

/* The final table, collected in flow order. */
struct table {
	struct ns_session *rec;
	size_t len, cap;
};

static void table_add(const struct ns_session *s, void *arg)
{
	struct table *t = arg;

	if (t->len == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->rec = realloc(t->rec, t->cap * sizeof(*t->rec));
		if (t->rec == NULL)
			abort();
	}
	t->rec[t->len++] = *s;
}

static uint64_t final_table(const struct run *r, struct table *t)
{
	memset(t, 0, sizeof(*t));
	return nsdp_synth_final_table(r->synth, table_add, t);
}

/* Equal in every field except when it happened. */
static int same_but_time(const struct ns_session *a, const struct ns_session *b)
{
	struct ns_session x = *a, y = *b;

	x.timestamp_ns = 0;
	y.timestamp_ns = 0;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

/*
 * An independent table rebuilt from the lane logs: open addressing keyed
 * by the orig tuple and protocol, the table's identity of a flow.
 */
struct rebuilt {
	struct ns_session *slot;
	uint8_t *used; /* 0 free, 1 live, 2 deleted (kept for probing) */
	size_t size;
	size_t live;
	int bad_event; /* create of a live flow or update of a dead one */
};

static size_t flow_hash(const struct ns_session *s, size_t size)
{
	uint64_t h = ((uint64_t)s->orig.saddr << 32 | s->orig.daddr) ^
		     ((uint64_t)s->orig.sport << 24 |
		      (uint64_t)s->orig.dport << 8 | s->proto);

	h *= 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & (size_t)(size - 1);
}

static size_t rebuilt_find(struct rebuilt *t, const struct ns_session *s)
{
	size_t i = flow_hash(s, t->size);

	while (t->used[i] != 0 && !ns_session_same_flow(&t->slot[i], s))
		i = (i + 1) & (t->size - 1);
	return i;
}

static void rebuild(const struct run *r, struct rebuilt *t, size_t flows)
{
	unsigned int w;
	size_t k;

	t->size = 1;
	while (t->size < flows * 2)
		t->size <<= 1;
	t->slot = calloc(t->size, sizeof(*t->slot));
	t->used = calloc(t->size, 1);
	t->live = 0;
	t->bad_event = 0;
	cr_assert(t->slot && t->used);
	for (w = 0; w < r->nworkers; w++)
		for (k = 0; k < r->len[w]; k++) {
			const struct ns_session *s = &r->log[w][k];
			size_t i = rebuilt_find(t, s);
			int live = t->used[i] == 1;

			if ((s->event == NS_EV_CREATE) == live)
				t->bad_event = 1;
			if (s->event == NS_EV_DELETE) {
				if (live)
					t->live--;
				if (t->used[i] != 0)
					t->used[i] = 2;
			} else {
				if (!live)
					t->live++;
				t->used[i] = 1;
				t->slot[i] = *s;
			}
		}
}

static void rebuilt_free(struct rebuilt *t)
{
	free(t->slot);
	free(t->used);
}

/* The source's final table is exactly the table rebuilt from its lanes. */
static void assert_final_matches_lanes(const struct run *r, uint64_t flows)
{
	struct rebuilt rb;
	struct table t;
	uint64_t live = final_table(r, &t);
	size_t i;

	rebuild(r, &rb, flows);
	cr_assert_not(rb.bad_event, "a create for a live flow or an update "
				    "for a dead one came out of a lane");
	cr_assert_eq(live, t.len);
	cr_assert_eq(live, rb.live, "source has %llu live flows, lanes %zu",
		     (unsigned long long)live, rb.live);
	for (i = 0; i < t.len; i++) {
		size_t j = rebuilt_find(&rb, &t.rec[i]);

		cr_assert_eq(rb.used[j], 1, "flow %zu of the table is not live",
			     i);
		cr_assert_eq(memcmp(&rb.slot[j], &t.rec[i], sizeof(t.rec[i])),
			     0, "flow %zu: table is not the lane's last record",
			     i);
	}
	rebuilt_free(&rb);
	free(t.rec);
}

/* Open a run, run its workers (with a consumer if with_consumer) and
 * read the source's stats into st. */
static void run_synth(struct run *r, const struct nsdp_synth_conf *conf,
		      unsigned int nworkers, unsigned int ring_size,
		      int with_consumer, struct nsdp_synth_stats *st)
{
	run_open(r, conf, nworkers, ring_size);
	run_workers(r, with_consumer);
	nsdp_synth_stats(r->synth, st);
}

/* Lanes are named by index: a second run in the same test needs the names
 * back. What the lanes carried stays in the run's logs. */
static void run_free_lanes(struct run *r)
{
	for (unsigned int w = 0; w < r->nworkers; w++) {
		nsdp_lane_free(r->lanes[w]);
		r->lanes[w] = NULL;
	}
}

static struct nsdp_synth_conf base_conf(void)
{
	return (struct nsdp_synth_conf){
		.flows = 2000,
		.events = 60000,
		.rate = 0,
		.seed = 42,
		.refresh_pct = 60,
		.gateway_id = 9,
		.epoch = 2,
		.timeout_ms = 30000,
		.wait_when_full = 1,
	};
}

/* base_conf() with that many events over that many flows. */
static struct nsdp_synth_conf conf_of(uint64_t events, uint64_t flows)
{
	struct nsdp_synth_conf c = base_conf();

	c.events = events;
	c.flows = flows;
	return c;
}

Test(synth, same_seed_gives_identical_events_and_final_table)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run a, b;
	struct table ta, tb;
	unsigned int w;
	size_t k;

	run_open(&a, &conf, 4, 1024);
	run_workers(&a, 1);
	final_table(&a, &ta);
	run_free_lanes(&a);
	run_open(&b, &conf, 4, 1024);
	run_workers(&b, 1);
	final_table(&b, &tb);

	for (w = 0; w < 4; w++) {
		cr_assert_eq(a.len[w], b.len[w]);
		for (k = 0; k < a.len[w]; k++)
			cr_assert(same_but_time(&a.log[w][k], &b.log[w][k]),
				  "lane %u record %zu differs", w, k);
	}
	cr_assert_eq(ta.len, tb.len);
	cr_assert_gt(ta.len, 0);
	for (k = 0; k < ta.len; k++)
		cr_assert(same_but_time(&ta.rec[k], &tb.rec[k]),
			  "final table entry %zu differs", k);
	free(ta.rec);
	free(tb.rec);
	run_close(&a);
	run_close(&b);
}

Test(synth, different_seeds_give_different_events)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run a, b;
	unsigned int w;
	size_t k, differ = 0;

	conf.events = 5000;
	run_open(&a, &conf, 2, 8192);
	run_workers(&a, 0);
	drain_all(&a);
	run_free_lanes(&a);
	conf.seed = 43;
	run_open(&b, &conf, 2, 8192);
	run_workers(&b, 0);
	drain_all(&b);

	for (w = 0; w < 2; w++) {
		cr_assert_eq(a.len[w], b.len[w]);
		for (k = 0; k < a.len[w]; k++)
			differ += !same_but_time(&a.log[w][k], &b.log[w][k]);
	}
	cr_assert_gt(differ, 1000, "only %zu of 5000 events differ", differ);
	run_close(&a);
	run_close(&b);
}

/* Two gateway pairs' sources (gateway_id >> 8) never share an inside
 * source, hence no session key; pair 0 keeps 10.0.0.0/8. */
Test(synth, two_pairs_sources_share_no_inside_address)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run a, b;
	struct table ta, tb;
	size_t k;

	conf.gateway_id = 1;
	run_open(&a, &conf, 2, 8192);
	run_workers(&a, 1);
	final_table(&a, &ta);
	run_free_lanes(&a);
	conf.gateway_id = 2 << 8 | 1;
	run_open(&b, &conf, 2, 8192);
	run_workers(&b, 1);
	final_table(&b, &tb);

	cr_assert_eq(ta.len, tb.len);
	cr_assert_gt(ta.len, 0);
	for (k = 0; k < ta.len; k++) {
		cr_assert_eq(ta.rec[k].orig.saddr >> 24, 10);
		cr_assert_eq(tb.rec[k].orig.saddr >> 24, 12);
		cr_assert_eq(tb.rec[k].orig.saddr & 0xffffff,
			     ta.rec[k].orig.saddr & 0xffffff);
	}
	free(ta.rec);
	free(tb.rec);
	run_close(&a);
	run_close(&b);
}

Test(synth, counts_add_up)
{
	struct nsdp_synth_conf conf = base_conf();
	struct nsdp_synth_stats st;
	struct run r;
	uint64_t live, recorded = 0;
	unsigned int w;

	conf.events = 50003; /* not a multiple of the worker count */
	run_synth(&r, &conf, 3, 1024, 1, &st);
	live = nsdp_synth_final_table(r.synth, NULL, NULL);

	cr_assert_eq(st.done, 1);
	cr_assert_eq(st.produced, conf.events);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.creates + st.refreshes + st.deletes, conf.events);
	cr_assert_eq(st.creates - st.deletes, live);
	cr_assert_gt(st.refreshes, 0);
	cr_assert_gt(st.deletes, 0);
	for (w = 0; w < 3; w++) {
		uint64_t share = conf.events / 3 + (w < conf.events % 3);

		cr_assert_eq(r.len[w], share, "lane %u carried %zu", w,
			     r.len[w]);
		cr_assert_eq(r.lanes[w]->dropped, 0);
		recorded += r.lanes[w]->recorded;
	}
	cr_assert_eq(recorded, conf.events);
	run_close(&r);
}

Test(synth, stats_report_not_done_before_workers_ran)
{
	struct nsdp_synth_conf conf = base_conf();
	struct nsdp_synth_stats st;
	struct run r;

	run_open(&r, &conf, 2, 64);
	nsdp_synth_stats(r.synth, &st);
	cr_assert_eq(st.done, 0);
	cr_assert_eq(st.produced, 0);
	cr_assert_eq(nsdp_synth_run(r.synth, 2), -EINVAL);
	run_close(&r);
}

Test(synth, final_table_holds_the_last_lane_record_of_every_live_flow)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run r;

	conf.refresh_pct = 30;
	run_open(&r, &conf, 4, 512);
	run_workers(&r, 1);
	assert_final_matches_lanes(&r, conf.flows);
	run_close(&r);
}

Test(synth, every_lane_carries_only_its_workers_flows)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run r;
	unsigned int w, v;
	size_t k, j;

	conf.events = 20000;
	run_open(&r, &conf, 3, 1024);
	run_workers(&r, 1);
	/* A flow seen on lane w is never seen on another lane. */
	for (w = 0; w < 3; w++)
		for (v = w + 1; v < 3; v++)
			for (k = 0; k < r.len[w]; k += 97)
				for (j = 0; j < r.len[v]; j++)
					cr_assert_not(ns_session_same_flow(
						&r.log[w][k], &r.log[v][j]));
	run_close(&r);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(synth, translated_tuples_are_unique_among_live_flows)
{
	struct nsdp_synth_conf conf = base_conf();
	struct run r;
	struct table t;
	uint64_t *xkeys, *okeys;
	size_t i;

	conf.flows = 100000;
	conf.events = 150000;
	conf.refresh_pct = 20;
	run_open(&r, &conf, 2, 4096);
	run_workers(&r, 1);
	final_table(&r, &t);
	cr_assert_gt(t.len, 30000);
	xkeys = malloc(t.len * sizeof(*xkeys));
	okeys = malloc(t.len * sizeof(*okeys));
	cr_assert(xkeys && okeys);
	for (i = 0; i < t.len; i++) {
		const struct ns_session *s = &t.rec[i];

		cr_assert_eq(s->xlat.daddr, s->orig.daddr);
		cr_assert_eq(s->xlat.dport, s->orig.dport);
		cr_assert(s->proto == 6 || s->proto == 17);
		xkeys[i] = (uint64_t)s->xlat.saddr << 16 | s->xlat.sport;
		okeys[i] = (uint64_t)s->orig.saddr << 16 | s->orig.sport;
	}
	qsort(xkeys, t.len, sizeof(*xkeys), cmp_u64);
	qsort(okeys, t.len, sizeof(*okeys), cmp_u64);
	for (i = 1; i < t.len; i++) {
		cr_assert_neq(xkeys[i], xkeys[i - 1],
			      "translated tuple used twice");
		cr_assert_neq(okeys[i], okeys[i - 1], "orig tuple used twice");
	}
	free(xkeys);
	free(okeys);
	free(t.rec);
	run_close(&r);
}

Test(synth, waiting_source_with_tiny_ring_and_slow_consumer_loses_nothing)
{
	struct nsdp_synth_conf conf = conf_of(8000, 300);
	struct nsdp_synth_stats st;
	struct run r;

	run_open(&r, &conf, 2, 16);
	r.slow_consumer = 1;
	run_workers(&r, 1);
	nsdp_synth_stats(r.synth, &st);

	cr_assert_eq(st.produced, conf.events);
	cr_assert_eq(st.dropped, 0);
	cr_assert_gt(st.full_waits, 0, "the tiny ring never filled");
	cr_assert_eq(r.len[0] + r.len[1], conf.events);
	cr_assert_eq(r.lanes[0]->dropped + r.lanes[1]->dropped, 0);
	assert_final_matches_lanes(&r, conf.flows);
	run_close(&r);
}

Test(synth, dropping_source_without_consumer_drops_counts_and_keeps_table)
{
	struct nsdp_synth_conf conf = conf_of(1000, 40);
	struct nsdp_synth_stats st;
	struct run r;
	uint64_t live;

	conf.wait_when_full = 0;
	run_synth(&r, &conf, 2, 64, 0, &st);
	live = nsdp_synth_final_table(r.synth, NULL, NULL);

	cr_assert_eq(st.done, 1);
	cr_assert_eq(st.produced, conf.events);
	cr_assert_eq(st.dropped, conf.events - 2 * 64);
	cr_assert_eq(st.full_waits, 0);
	cr_assert_eq(r.lanes[0]->recorded + r.lanes[1]->recorded, 128);
	cr_assert_eq(r.lanes[0]->dropped + r.lanes[1]->dropped, st.dropped);
	/* Only accepted events count as creates, refreshes, deletes. */
	cr_assert_eq(st.creates + st.refreshes + st.deletes, 128);
	cr_assert_eq(st.creates - st.deletes, live);

	drain_all(&r);
	cr_assert_eq(r.len[0] + r.len[1], 128);
	assert_final_matches_lanes(&r, conf.flows);
	run_close(&r);
}

Test(synth, rate_limit_paces_the_source)
{
	struct nsdp_synth_conf conf = base_conf();
	struct nsdp_synth_stats st;
	struct run r;

	conf.events = 20000;
	conf.rate = 100000; /* 0.2 s */
	run_synth(&r, &conf, 2, 4096, 1, &st);

	cr_assert_eq(st.produced, conf.events);
	cr_assert_geq(r.elapsed_s, 0.15, "too fast: %.3f s", r.elapsed_s);
	cr_assert_leq(r.elapsed_s, 1.0, "too slow: %.3f s", r.elapsed_s);
	run_close(&r);
}

Test(synth, stop_ends_every_worker_promptly)
{
	struct nsdp_synth_conf conf = base_conf();
	struct nsdp_synth_stats st;
	struct worker_arg args[2];
	pthread_t wt[2];
	struct run r;
	double t0;
	unsigned int w;

	conf.events = 10000000;
	conf.rate = 20000; /* would take 500 s */
	run_open(&r, &conf, 2, 64); /* and no consumer: rings fill */
	for (w = 0; w < 2; w++) {
		args[w] = (struct worker_arg){.r = &r, .w = w};
		cr_assert_eq(pthread_create(&wt[w], NULL, worker, &args[w]), 0);
	}
	nsdp_sleep_ms(100);
	nsdp_synth_stats(r.synth, &st);
	cr_assert_eq(st.done, 0);
	t0 = nsdp_now_s();
	nsdp_synth_stop(r.synth);
	for (w = 0; w < 2; w++)
		pthread_join(wt[w], NULL);
	cr_assert_leq(nsdp_now_s() - t0, 1.0, "workers took too long to stop");
	nsdp_synth_stats(r.synth, &st);
	cr_assert_eq(st.done, 1);
	cr_assert_lt(st.produced, conf.events);
	cr_assert_eq(st.produced, 128, "only what fit in the rings");
	cr_assert_gt(st.full_waits, 0);
	drain_all(&r);
	assert_final_matches_lanes(&r, conf.flows);
	run_close(&r);
}

Test(synth, dump_writes_the_final_table_as_wire_records)
{
	struct nsdp_synth_conf conf = base_conf();
	char path[] = "/tmp/nst_synth_dumpXXXXXX";
	uint8_t *buf;
	struct table t;
	struct run r;
	size_t size, off = 0, i = 0;
	int64_t n;
	FILE *f;
	int fd;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	conf.events = 10000;
	run_open(&r, &conf, 2, 16384);
	run_workers(&r, 0);
	final_table(&r, &t);
	n = nsdp_synth_dump(r.synth, path);
	cr_assert_eq(n, (int64_t)t.len, "dump returned %lld", (long long)n);

	f = fopen(path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	size = (size_t)ftell(f);
	rewind(f);
	cr_assert_eq(size, t.len * NS_RECORD_V1_IPV4_LEN);
	buf = malloc(size + 1);
	cr_assert_eq(fread(buf, 1, size, f), size);
	fclose(f);
	while (off < size) {
		struct ns_session s;
		int used = ns_record_decode(buf + off, size - off, &s);

		cr_assert_gt(used, 0, "record %zu does not decode: %d", i,
			     used);
		cr_assert_lt(i, t.len);
		cr_assert_eq(memcmp(&s, &t.rec[i], sizeof(s)), 0,
			     "record %zu differs from the table", i);
		off += (size_t)used;
		i++;
	}
	cr_assert_eq(i, t.len);
	unlink(path);
	free(buf);
	free(t.rec);
	run_close(&r);
}

/* The wall clock stepped back by 10 s halfway through: on every lane the
 * stamps still rise record after record, and a session table fed with the
 * lanes (the standby's, which orders a flow's records by epoch and then
 * stamp) ends up equal to the source's final table, ignoring nothing. */
Test(synth, stamps_keep_rising_on_each_lane_when_the_clock_steps_back)
{
	struct nsdp_synth_conf conf = base_conf();
	struct nsdp_table_stats ts;
	struct nsdp_synth_stats st;
	struct nsdp_table *tab;
	uint64_t backwards = 0, ties = 0, older = 0, missing = 0, live;
	struct table t;
	struct run r;
	size_t i;

	conf.clock_step_back_ms = 10000;
	run_synth(&r, &conf, 2, 4096, 1, &st);
	cr_assert_eq(st.produced, conf.events);
	tab = nsdp_table_create("synth_step", (uint32_t)conf.flows * 2);
	cr_assert_not_null(tab);
	for (unsigned int w = 0; w < r.nworkers; w++)
		for (i = 0; i < r.len[w]; i++) {
			const struct ns_session *s = &r.log[w][i];

			if (i > 0 && s->timestamp_ns < s[-1].timestamp_ns)
				backwards++;
			if (i > 0 && s->timestamp_ns == s[-1].timestamp_ns)
				ties++;
			cr_assert_eq(nsdp_table_apply(tab, s), 0);
		}
	nsdp_table_stats(tab, &ts);
	live = final_table(&r, &t);
	cr_expect_eq(backwards, 0, "%llu steps back of the stamps on a lane",
		     (unsigned long long)backwards);
	cr_expect_eq(ties, 0, "%llu records stamped as their predecessor",
		     (unsigned long long)ties);
	cr_expect_eq(ts.stale_ignored, 0,
		     "the table ignored %llu of %llu records as older",
		     (unsigned long long)ts.stale_ignored,
		     (unsigned long long)conf.events);
	cr_expect_eq(ts.live, live, "table %llu live, source %llu",
		     (unsigned long long)ts.live, (unsigned long long)live);
	for (i = 0; i < t.len; i++) {
		struct ns_session got;

		if (nsdp_table_lookup(tab, t.rec[i].proto, &t.rec[i].orig,
				      &got) != 0)
			missing++;
		else if (!ns_session_equal_state(&got, &t.rec[i]))
			older++;
	}
	cr_expect_eq(missing, 0, "%llu of %zu live flows missing",
		     (unsigned long long)missing, t.len);
	cr_expect_eq(older, 0, "%llu of %zu live flows hold an older record",
		     (unsigned long long)older, t.len);
	free(t.rec);
	nsdp_table_free(tab);
	run_close(&r);
}
