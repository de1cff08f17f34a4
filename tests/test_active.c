/*
 * test_active.c - the active writers against real Redis stores: what ends
 * up in the store (exactly the live sessions, their last record, with a
 * TTL), what a subscriber receives (every record, in per-flow order, with
 * consecutive sequence numbers), the flush deadline, and recovery from a
 * store that starts late or restarts mid-stream, and a standby that ends
 * with what the store holds when the store refuses writes for good. One
 * test prints the throughput against a plain server (and checks its
 * outcome exactly).
 *
 * Ports: 7200-7202 and 7203-7205 clusters, 7210-7216 plain servers.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_fence.h"
#include "nsa_config.h"
#include "nsa_loader.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_lane.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"
#include "nst_agents.h"
#include "nsdp_time.h"
#include "nst_session.h"
#include "nst_store.h"
#include "nst_sub.h"

#define PORT_CLUSTER 7200
#define PORT_PLAIN 7210
#define PORT_LATE 7211
#define PORT_RESTART 7212
#define PORT_ACL 7213
#define PORT_NOREPLICAS 7214
#define PORT_OOM 7215
#define PORT_ACL_STANDBY 7216
#define PORT_SETTLE 7217
#define PORT_LOG_REWRITE 7218
#define PORT_GROW 7219
#define PORT_FENCE 7220 /* 7220-7222 */
#define PORT_RESHARD 7203
#define PORT_ASK 7206 /* 7206-7208 */
/* Each test's stores stop with it (teardown): the log layout's OOM test
 * reuses the keys layout's port. */
#define PORT_LOG_OOM PORT_OOM

#define TIMEOUT_CREATE_MS 300000u
#define TIMEOUT_REFRESH_MS 600000u
#define MAX_EVENTS 3

static int used_ports[8];
static unsigned int n_used_ports;

static void setup(void)
{
	cr_assert_eq(nst_eal_init(256), 0, "EAL init");
}

static void teardown(void)
{
	unsigned int i;

	for (i = 0; i < n_used_ports; i++)
		nst_store_stop(used_ports[i]);
	n_used_ports = 0;
}

TestSuite(active, .init = setup, .fini = teardown);

static void store_up(int port, int masters)
{
	used_ports[n_used_ports++] = port;
	cr_assert_eq(nst_store_start(port, masters, 0), 0, "store on %d", port);
}

static uint64_t mono_ms(void)
{
	return nsdp_mono_ns() / 1000000;
}

static void conf_for(struct nsa_config *c, int port, unsigned int workers,
		     enum nsa_publish_mode publish)
{
	memset(c, 0, sizeof(*c));
	c->role = NSA_ROLE_ACTIVE;
	c->gateway_id = 7;
	c->epoch = 1;
	snprintf(c->store.seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	c->store.seeds[0].port = (uint16_t)port;
	c->store.n_seeds = 1;
	c->store.connect_timeout_ms = 1000;
	c->store.publish = publish;
	c->workers = workers;
	c->batch_size = 256;
	c->flush_us = 1000;
	c->max_inflight = 8;
}

/* Flow i's session: the inside tuple derives from i, so a record names its
 * flow (saddr's low 24 bits). */
static struct ns_session flow_record(uint32_t i, uint8_t event, uint64_t ts)
{
	struct ns_session s = nst_session(
		6, event, 7, 1,
		event == NS_EV_REFRESH ? TIMEOUT_REFRESH_MS : TIMEOUT_CREATE_MS,
		ts);

	nst_session_snat(&s, 0x0a000000u | i, (uint16_t)(1000 + i % 50000),
			 0xc0a80001u, 443, 0x64400001u,
			 (uint16_t)(1024 + i % 60000));
	return s;
}

static uint32_t record_flow(const struct ns_session *s)
{
	return s->orig.saddr & 0xffffffu;
}

static struct nsdp_lane **lanes_create(unsigned int n, unsigned int size)
{
	static struct nsdp_lane *lanes[NSDP_MAX_LANES];
	unsigned int i;

	for (i = 0; i < n; i++) {
		lanes[i] = nsdp_lane_create(i, size, SOCKET_ID_ANY);
		cr_assert_not_null(lanes[i], "lane %u", i);
	}
	return lanes;
}

/* The producer here waits for room instead of dropping. */
static void push_wait(struct nsdp_lane *lane, const struct ns_session *s)
{
	uint64_t deadline = mono_ms() + 60000;

	while (rte_ring_free_count(lane->ring) == 0) {
		cr_assert_lt(mono_ms(), deadline, "lane stayed full");
		nsdp_sleep_us(100);
	}
	cr_assert_eq(nsdp_record(lane, s), 0);
}

/* ---- what was written ------------------------------------------------- */

struct plan {
	uint32_t n_flows;
	uint8_t *n_ev; /* [n_flows] */
	struct ns_session *ev; /* [n_flows][MAX_EVENTS] */
	uint64_t n_records;
	uint64_t ts;
};

static void plan_init(struct plan *p, uint32_t n_flows)
{
	p->n_flows = n_flows;
	p->n_ev = calloc(n_flows, 1);
	p->ev = calloc((size_t)n_flows * MAX_EVENTS, sizeof(*p->ev));
	p->n_records = 0;
	p->ts = 1000;
	cr_assert(p->n_ev && p->ev);
}

static void plan_free(struct plan *p)
{
	free(p->n_ev);
	free(p->ev);
}

static void plan_write(struct plan *p, struct nsdp_lane **lanes,
		       unsigned int n_lanes, uint32_t flow, uint8_t event)
{
	struct ns_session s = flow_record(flow, event, p->ts++);
	uint8_t k = p->n_ev[flow];

	cr_assert_lt(k, MAX_EVENTS);
	p->ev[(size_t)flow * MAX_EVENTS + k] = s;
	/* The subscriber thread reads the plan while it grows: publish the
	 * event before its count (sub_batch loads the count with acquire). */
	__atomic_store_n(&p->n_ev[flow], (uint8_t)(k + 1), __ATOMIC_RELEASE);
	p->n_records++;
	push_wait(lanes[flow % n_lanes], &s);
}

static const struct ns_session *plan_last(const struct plan *p, uint32_t f)
{
	if (p->n_ev[f] == 0)
		return NULL;
	return &p->ev[(size_t)f * MAX_EVENTS + p->n_ev[f] - 1];
}

/* creates for all, refreshes for every third, deletes for every fifth */
static void plan_write_standard(struct plan *p, struct nsdp_lane **lanes,
				unsigned int n_lanes)
{
	uint32_t i;

	for (i = 0; i < p->n_flows; i++)
		plan_write(p, lanes, n_lanes, i, NS_EV_CREATE);
	for (i = 0; i < p->n_flows; i += 3)
		plan_write(p, lanes, n_lanes, i, NS_EV_REFRESH);
	for (i = 0; i < p->n_flows; i += 5)
		plan_write(p, lanes, n_lanes, i, NS_EV_DELETE);
}

static int same_record(const struct ns_session *a, const struct ns_session *b)
{
	return a->event == b->event && a->timestamp_ns == b->timestamp_ns &&
	       a->timeout_ms == b->timeout_ms && ns_session_equal_state(a, b);
}

/* ---- the store -------------------------------------------------------- */

struct store_view {
	struct nsa_topology topo;
	redisContext *c[NSA_MAX_NODES];
};

static void store_view_open(struct store_view *v, int port)
{
	struct nsa_store_conf sc;
	char err[256];
	unsigned int i;

	memset(&sc, 0, sizeof(sc));
	snprintf(sc.seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	sc.seeds[0].port = (uint16_t)port;
	sc.n_seeds = 1;
	sc.connect_timeout_ms = 1000;
	cr_assert_eq(nsa_topology_fetch(&sc, &v->topo, err, sizeof(err)), 0,
		     "topology: %s", err);
	for (i = 0; i < v->topo.n_nodes; i++) {
		v->c[i] = redisConnect(v->topo.nodes[i].addr.host,
				       v->topo.nodes[i].addr.port);
		cr_assert(v->c[i] && !v->c[i]->err, "connect node %u", i);
	}
}

static void store_view_close(struct store_view *v)
{
	unsigned int i;

	for (i = 0; i < v->topo.n_nodes; i++)
		redisFree(v->c[i]);
}

static unsigned int node_of(const struct store_view *v, uint32_t flow)
{
	struct ns_session s = flow_record(flow, NS_EV_CREATE, 0);
	uint8_t key[NS_KEY_LEN];

	if (!v->topo.cluster)
		return 0;
	ns_key_build(s.proto, &s.orig, key);
	return v->topo.slot_node[ns_key_slot(key, NS_KEY_LEN)];
}

static uint64_t store_count_keys(struct store_view *v)
{
	uint64_t total = 0;
	unsigned int i;

	for (i = 0; i < v->topo.n_nodes; i++) {
		char cursor[32] = "0";
		int rounds = 0;

		do {
			redisReply *r = redisCommand(
				v->c[i], "SCAN %s MATCH ns:* COUNT 1000",
				cursor);

			cr_assert(r && r->type == REDIS_REPLY_ARRAY &&
				  r->elements == 2);
			snprintf(cursor, sizeof(cursor), "%s",
				 r->element[0]->str);
			total += r->element[1]->elements;
			freeReplyObject(r);
			cr_assert_lt(++rounds, 1000000);
		} while (strcmp(cursor, "0") != 0);
	}
	return total;
}

/* Check flows [from, to) against the plan: a live flow's key holds its
 * last record with a TTL, a deleted or never written flow has no key.
 * Returns the number of flows that do not match. */
static uint32_t store_check_flows(struct store_view *v, const struct plan *p,
				  uint32_t from, uint32_t to)
{
	uint32_t bad = 0, f;
	unsigned int node;

	for (node = 0; node < v->topo.n_nodes; node++) {
		for (f = from; f < to; f++) {
			struct ns_session s = flow_record(f, NS_EV_CREATE, 0);
			uint8_t key[NS_KEY_LEN];

			if (node_of(v, f) != node)
				continue;
			ns_key_build(s.proto, &s.orig, key);
			redisAppendCommand(v->c[node], "GET %b", key,
					   (size_t)NS_KEY_LEN);
			redisAppendCommand(v->c[node], "PTTL %b", key,
					   (size_t)NS_KEY_LEN);
		}
		for (f = from; f < to; f++) {
			const struct ns_session *want = plan_last(p, f);
			redisReply *g = NULL, *t = NULL;
			struct ns_session got;

			if (node_of(v, f) != node)
				continue;
			cr_assert_eq(redisGetReply(v->c[node], (void **)&g),
				     REDIS_OK);
			cr_assert_eq(redisGetReply(v->c[node], (void **)&t),
				     REDIS_OK);
			if (want == NULL || want->event == NS_EV_DELETE) {
				bad += g->type != REDIS_REPLY_NIL;
			} else if (g->type != REDIS_REPLY_STRING ||
				   ns_record_decode((const uint8_t *)g->str,
						    g->len, &got) < 0 ||
				   !same_record(&got, want) ||
				   t->type != REDIS_REPLY_INTEGER ||
				   t->integer <= 0 ||
				   t->integer > (long long)want->timeout_ms) {
				if (bad < 5)
					cr_log_error(
						"flow %u: wrong or missing "
						"in the store (type %d)",
						f, g->type);
				bad++;
			}
			freeReplyObject(g);
			freeReplyObject(t);
		}
	}
	return bad;
}

static uint32_t plan_live(const struct plan *p)
{
	uint32_t f, n = 0;

	for (f = 0; f < p->n_flows; f++) {
		const struct ns_session *l = plan_last(p, f);

		n += l != NULL && l->event != NS_EV_DELETE;
	}
	return n;
}

/* ---- a subscriber ----------------------------------------------------- */

struct pubseq {
	uint32_t publisher;
	char channel[NS_CHANNEL_MAX];
	uint64_t last;
};

struct sub {
	redisContext *c[NSA_MAX_NODES];
	unsigned int n;
	pthread_t thread;
	int stop; /* set by the test, read relaxed by the thread */
	const struct plan *plan;
	uint8_t *next_ev; /* [n_flows] next expected event per flow */
	uint64_t n_records; /* written by the thread, NSDP_STAT_* */
	uint64_t n_batches, bad_decode, bad_seq, bad_order;
	/* The most records in one batch, and the batches above 256 (the
	 * tests' batch_size); NSDP_STAT_*: read while the thread runs. */
	uint64_t max_batch, over_256;
	struct pubseq ps[64];
	unsigned int n_ps;
};

static void sub_batch(struct sub *s, const char *channel, const uint8_t *buf,
		      size_t len)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	struct ns_batch_iter it;
	struct ns_session r;
	unsigned int i;
	uint64_t n;
	int rc;

	if (ns_batch_decode(buf, len, &h, &body) != 0) {
		s->bad_decode++;
		return;
	}
	s->n_batches++;
	for (i = 0; i < s->n_ps; i++)
		if (s->ps[i].publisher == h.publisher_id &&
		    strcmp(s->ps[i].channel, channel) == 0)
			break;
	if (i == s->n_ps && s->n_ps < 64) {
		s->ps[i].publisher = h.publisher_id;
		snprintf(s->ps[i].channel, NS_CHANNEL_MAX, "%s", channel);
		s->ps[i].last = 0;
		s->n_ps++;
	}
	if (i < s->n_ps) {
		s->bad_seq += h.seq != s->ps[i].last + 1;
		s->ps[i].last = h.seq;
	}
	ns_batch_iter_init(&it, body, h.body_len);
	n = 0;
	while ((rc = ns_batch_iter_next(&it, &r)) == 1) {
		n++;
		uint32_t f = record_flow(&r);
		const struct plan *p = s->plan;
		uint8_t n_ev =
			f < p->n_flows
				? __atomic_load_n(&p->n_ev[f], __ATOMIC_ACQUIRE)
				: 0;

		if (f >= p->n_flows || s->next_ev[f] >= n_ev ||
		    !same_record(
			    &r, &p->ev[(size_t)f * MAX_EVENTS + s->next_ev[f]]))
			s->bad_order++;
		else
			s->next_ev[f]++;
		NSDP_STAT_INC(s->n_records);
	}
	if (rc < 0)
		s->bad_decode++;
	if (n > NSDP_STAT_READ(s->max_batch))
		NSDP_STAT_ADD(s->max_batch, n - s->max_batch);
	if (n > 256)
		NSDP_STAT_INC(s->over_256);
}

static void sub_reply(struct sub *s, redisReply *r)
{
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    (strcmp(r->element[0]->str, "smessage") == 0 ||
	     strcmp(r->element[0]->str, "message") == 0))
		sub_batch(s, r->element[1]->str,
			  (const uint8_t *)r->element[2]->str,
			  r->element[2]->len);
}

static void *sub_main(void *arg)
{
	struct sub *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		struct pollfd pfd[NSA_MAX_NODES];
		unsigned int i;

		for (i = 0; i < s->n; i++) {
			pfd[i].fd = s->c[i]->fd;
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		if (poll(pfd, s->n, 50) <= 0)
			continue;
		for (i = 0; i < s->n; i++) {
			void *r;

			if (!(pfd[i].revents & POLLIN))
				continue;
			if (redisBufferRead(s->c[i]) != REDIS_OK)
				return NULL;
			while (redisGetReplyFromReader(s->c[i], &r) ==
				       REDIS_OK &&
			       r != NULL) {
				sub_reply(s, r);
				freeReplyObject(r);
			}
		}
	}
	return NULL;
}

/* Subscribe to every master's channel before the writers start. */
static void sub_start(struct sub *s, int port, const struct plan *p,
		      enum nsa_publish_mode publish)
{
	memset(s, 0, sizeof(*s));
	s->plan = p;
	s->next_ev = calloc(p->n_flows, 1);
	s->n = nst_subscribe_every_master(port, publish, s->c);
	cr_assert_eq(pthread_create(&s->thread, NULL, sub_main, s), 0);
}

static void sub_finish(struct sub *s, uint64_t expect)
{
	uint64_t deadline = mono_ms() + 15000;
	unsigned int i;

	while (NSDP_STAT_READ(s->n_records) < expect && mono_ms() < deadline)
		nsdp_sleep_ms(5);
	nsdp_sleep_ms(100); /* anything extra would show up now */
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	pthread_join(s->thread, NULL);
	for (i = 0; i < s->n; i++)
		redisFree(s->c[i]);
}

static void sub_assert_complete(struct sub *s, const struct plan *p)
{
	uint32_t f, missing = 0;

	cr_expect_eq(s->bad_decode, 0, "undecodable batches");
	cr_expect_eq(s->bad_seq, 0, "sequence gaps");
	cr_expect_eq(s->bad_order, 0, "records out of per-flow order");
	for (f = 0; f < p->n_flows; f++)
		missing += s->next_ev[f] != p->n_ev[f];
	cr_expect_eq(missing, 0, "flows with records never notified");
	cr_assert_eq(NSDP_STAT_READ(s->n_records), p->n_records,
		     "notified %llu records, wrote %llu",
		     (unsigned long long)NSDP_STAT_READ(s->n_records),
		     (unsigned long long)p->n_records);
	free(s->next_ev);
}

/* ---- scenarios -------------------------------------------------------- */

/* Every one of the n records drained was acknowledged: none dropped,
 * none refused by a full lane, none still in flight. */
static void assert_every_record_acked(const struct nsa_active_stats *st,
				      uint64_t n)
{
	cr_assert_eq(st->records, n);
	cr_assert_eq(st->acked, n);
	cr_assert_eq(st->dropped, 0);
	cr_assert_eq(st->lane_drops, 0);
	cr_assert_eq(st->inflight, 0);
}

/* The writers over lanes[0..n), started (start does not need the store). */
static struct nsa_active *writer_up(const struct nsa_config *c,
				    struct nsdp_lane **lanes, unsigned int n)
{
	struct nsa_active *a = nsa_active_create(c, lanes, n);

	cr_assert_not_null(a);
	cr_assert_eq(nsa_active_start(a), 0);
	return a;
}

/* Stop and free the writers, and the plan if there is one. */
static void writer_down(struct nsa_active *a, struct plan *p)
{
	nsa_active_stop(a);
	nsa_active_free(a);
	if (p)
		plan_free(p);
}

/* Every flow of p once more, with event ev, in flow order. */
static void plan_write_all(struct plan *p, struct nsdp_lane **lanes,
			   unsigned int n_lanes, uint8_t ev)
{
	for (uint32_t i = 0; i < p->n_flows; i++)
		plan_write(p, lanes, n_lanes, i, ev);
}

/* Expect the store at port to hold keys keys, and each flow of p with its
 * last record. */
static void expect_store_holds(int port, const struct plan *p, uint64_t keys)
{
	struct store_view v;

	store_view_open(&v, port);
	cr_expect_eq(store_count_keys(&v), keys, "keys in the store");
	cr_expect_eq(store_check_flows(&v, p, 0, p->n_flows), 0,
		     "flows not matching the store");
	store_view_close(&v);
}

/* Write the standard plan through 2 workers and 2 lanes with a subscriber
 * attached, then check the store and the notifications. */
static void replicate_and_check(int port, uint32_t n_flows,
				enum nsa_publish_mode publish)
{
	struct nsdp_lane **lanes = lanes_create(2, 65536);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;
	struct sub s;

	plan_init(&p, n_flows);
	conf_for(&c, port, 2, publish);
	sub_start(&s, port, &p, publish);
	a = writer_up(&c, lanes, 2);
	plan_write_standard(&p, lanes, 2);
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	assert_every_record_acked(&st, p.n_records);
	cr_expect_gt(st.batches, 0);

	sub_finish(&s, p.n_records);
	sub_assert_complete(&s, &p);

	expect_store_holds(port, &p, plan_live(&p));

	writer_down(a, &p);
}

Test(active, cluster_store_and_notifications_hold_every_record_in_order,
     .timeout = 240)
{
	store_up(PORT_CLUSTER, 3);
	replicate_and_check(PORT_CLUSTER, 50000, NSA_PUBLISH_AUTO);
}

Test(active, plain_server_with_classic_publish_holds_every_record,
     .timeout = 120)
{
	store_up(PORT_PLAIN, 0);
	replicate_and_check(PORT_PLAIN, 5000, NSA_PUBLISH_CLASSIC);
}

Test(active, plain_server_with_auto_publish_holds_every_record, .timeout = 120)
{
	store_up(PORT_PLAIN, 0);
	replicate_and_check(PORT_PLAIN, 5000, NSA_PUBLISH_AUTO);
}

static int store_has(redisContext *rc, const struct ns_session *want)
{
	uint8_t key[NS_KEY_LEN];
	struct ns_session got;
	redisReply *r;
	int ok;

	ns_key_build(want->proto, &want->orig, key);
	r = redisCommand(rc, "GET %b", key, (size_t)NS_KEY_LEN);
	ok = r && r->type == REDIS_REPLY_STRING &&
	     ns_record_decode((const uint8_t *)r->str, r->len, &got) > 0 &&
	     same_record(&got, want);
	freeReplyObject(r);
	return ok;
}

/* A writer behind (a lane a quarter full or more) lets a batch grow from
 * batch_size up to 4 times that; once it keeps up every batch closes at
 * batch_size again. Every record is notified either way, in order. */
Test(active, a_writer_behind_grows_its_batches_one_that_keeps_up_does_not,
     .timeout = 120)
{
	struct nsdp_lane **lanes = lanes_create(1, 65536);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	uint64_t batches, over;
	struct plan p;
	struct sub s;

	store_up(PORT_GROW, 0);
	plan_init(&p, 45000);
	conf_for(&c, PORT_GROW, 1, NSA_PUBLISH_AUTO);
	c.flush_us = 200000; /* batches close full, not on time */
	sub_start(&s, PORT_GROW, &p, NSA_PUBLISH_AUTO);
	/* 40 000 records wait before the writer starts: over a quarter of
	 * the lane, behind. */
	for (uint32_t i = 0; i < 40000; i++)
		plan_write(&p, lanes, 1, i, NS_EV_CREATE);
	a = writer_up(&c, lanes, 1);
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	for (int i = 0; i < 3000 && NSDP_STAT_READ(s.n_records) < 40000; i++)
		nsdp_sleep_ms(5);
	cr_assert_eq(NSDP_STAT_READ(s.n_records), 40000);
	batches = NSDP_STAT_READ(s.n_batches);
	over = NSDP_STAT_READ(s.over_256);
	cr_expect_eq(NSDP_STAT_READ(s.max_batch), 1024,
		     "the largest batch behind: %llu records",
		     (unsigned long long)NSDP_STAT_READ(s.max_batch));
	cr_expect_gt(over, 0);
	/* 157 batches of 256 at least without growing. */
	cr_expect_lt(batches, 157, "%llu batches for 40 000 records",
		     (unsigned long long)batches);
	/* Then 5 000 more, 100 at a time, 50 000 /s: the writer keeps up. */
	for (uint32_t i = 40000; i < 45000; i++) {
		plan_write(&p, lanes, 1, i, NS_EV_CREATE);
		if (i % 100 == 99)
			nsdp_sleep_ms(2);
	}
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	assert_every_record_acked(&st, p.n_records);
	sub_finish(&s, p.n_records);
	sub_assert_complete(&s, &p);
	cr_expect_eq(s.over_256, over,
		     "%llu batches above 256 records while keeping up",
		     (unsigned long long)(s.over_256 - over));
	writer_down(a, &p);
}

Test(active, lone_record_is_flushed_within_the_deadline, .timeout = 60)
{
	struct nsdp_lane **lanes = lanes_create(1, 1024);
	struct ns_session warm = flow_record(1, NS_EV_CREATE, 1);
	struct ns_session lone = flow_record(2, NS_EV_CREATE, 2);
	struct nsa_config c;
	struct nsa_active *a;
	redisContext *rc;
	uint64_t t0, limit;

	store_up(PORT_PLAIN, 0);
	conf_for(&c, PORT_PLAIN, 1, NSA_PUBLISH_AUTO);
	c.flush_us = 2000;
	a = writer_up(&c, lanes, 1);
	/* a first record makes sure the writer is connected */
	push_wait(lanes[0], &warm);
	cr_assert_eq(nsa_active_drain(a, 10000), 0);
	nsdp_sleep_ms(20); /* let the writer go idle */

	rc = redisConnect("127.0.0.1", PORT_PLAIN);
	cr_assert(rc && !rc->err);
	limit = c.flush_us / 1000 + 50;
	t0 = mono_ms();
	push_wait(lanes[0], &lone);
	while (!store_has(rc, &lone) && mono_ms() - t0 <= limit)
		nsdp_sleep_us(500);
	cr_expect_leq(mono_ms() - t0, limit, "a lone record took %llu ms",
		      (unsigned long long)(mono_ms() - t0));
	cr_expect(store_has(rc, &lone), "the lone record is in the store");
	cr_expect_eq(nsa_active_drain(a, 10000), 0);
	redisFree(rc);
	writer_down(a, NULL);
}

Test(active, store_starting_late_receives_everything, .timeout = 120)
{
	struct nsdp_lane **lanes = lanes_create(1, 8192);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;

	plan_init(&p, 2000);
	conf_for(&c, PORT_LATE, 1, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);
	plan_write_all(&p, lanes, 1, NS_EV_CREATE);
	nsdp_sleep_ms(1000);
	nsa_active_stats(a, &st);
	cr_expect_eq(st.acked, 0);
	store_up(PORT_LATE, 0);
	cr_assert_eq(nsa_active_drain(a, 30000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_expect_eq(st.acked, p.n_records);

	expect_store_holds(PORT_LATE, &p, p.n_flows);
	writer_down(a, &p);
}

/* Defer's signal back to the gateway (nsdp_lane_settled): a lane is
 * settled exactly up to what the store acknowledged, never past a record
 * the store has not answered for; a burst unanswered for a second is
 * given up (counted) and the count moves on. */
Test(active, a_lane_is_settled_up_to_what_the_store_acknowledged, .timeout = 60)
{
	struct nsdp_lane **lanes = lanes_create(1, 8192);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;
	uint64_t t0;

	plan_init(&p, 3000);
	store_up(PORT_SETTLE, 0);
	conf_for(&c, PORT_SETTLE, 1, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);
	for (uint32_t i = 0; i < 1000; i++)
		plan_write(&p, lanes, 1, i, NS_EV_CREATE);
	cr_assert_eq(nsa_active_drain(a, 10000), 0, "drained");
	cr_assert_eq(nsdp_lane_settled(lanes[0]), 1000, "settled %lu",
		     (unsigned long)nsdp_lane_settled(lanes[0]));

	/* The store stops answering: nothing more is settled. */
	cr_assert_eq(nst_sh("kill -STOP $(cat %s/%d/%d/redis.pid)",
			    nst_build("tests/run"), PORT_SETTLE, PORT_SETTLE),
		     0);
	for (uint32_t i = 1000; i < 2000; i++)
		plan_write(&p, lanes, 1, i, NS_EV_CREATE);
	nsdp_sleep_ms(300);
	cr_expect_eq(nsdp_lane_settled(lanes[0]), 1000,
		     "settled %lu with the store stopped",
		     (unsigned long)nsdp_lane_settled(lanes[0]));
	nsa_active_stats(a, &st);
	cr_expect_eq(st.acked, 1000);
	cr_expect_eq(st.settle_abandoned, 0);

	/* After a second the bursts are given up, counted, and the lane is
	 * settled past them, up to what the writer drained: all 2000 unless
	 * its batches in flight reached max_inflight first (small batches
	 * of a slow run, as under ThreadSanitizer), the rest waiting in the
	 * lane, and a lane is never settled past a record not drained. Once
	 * the store answers again, new records are settled as they are
	 * acknowledged. */
	t0 = mono_ms();
	while ((nsdp_lane_settled(lanes[0]) <= 1000 ||
		nsdp_lane_settled(lanes[0]) !=
			NSDP_STAT_READ(lanes[0]->drained)) &&
	       mono_ms() - t0 < 10000)
		nsdp_sleep_ms(10);
	fprintf(stderr,
		"settle: %lu settled, %lu drained, %lu ms after the wait "
		"began\n",
		(unsigned long)nsdp_lane_settled(lanes[0]),
		(unsigned long)NSDP_STAT_READ(lanes[0]->drained),
		(unsigned long)(mono_ms() - t0));
	cr_expect_gt(nsdp_lane_settled(lanes[0]), 1000,
		     "nothing given up with the store stopped");
	cr_expect_eq(nsdp_lane_settled(lanes[0]),
		     NSDP_STAT_READ(lanes[0]->drained),
		     "settled %lu of the %lu records drained",
		     (unsigned long)nsdp_lane_settled(lanes[0]),
		     (unsigned long)NSDP_STAT_READ(lanes[0]->drained));
	cr_expect_geq(mono_ms() - t0, 500, "given up after %lu ms",
		      (unsigned long)(mono_ms() - t0));
	nsa_active_stats(a, &st);
	cr_expect_gt(st.settle_abandoned, 0);
	cr_assert_eq(nst_sh("kill -CONT $(cat %s/%d/%d/redis.pid)",
			    nst_build("tests/run"), PORT_SETTLE, PORT_SETTLE),
		     0);
	for (uint32_t i = 2000; i < 3000; i++)
		plan_write(&p, lanes, 1, i, NS_EV_CREATE);
	cr_assert_eq(nsa_active_drain(a, 20000), 0, "drained");
	cr_expect_eq(nsdp_lane_settled(lanes[0]), 3000);
	nsa_active_stats(a, &st);
	cr_expect_eq(st.acked, 3000);
	expect_store_holds(PORT_SETTLE, &p, p.n_flows);
	writer_down(a, &p);
}

struct producer {
	struct plan *p;
	struct nsdp_lane *lane;
};

static void *producer_main(void *arg)
{
	struct producer *pr = arg;
	uint32_t i;

	for (i = 0; i < pr->p->n_flows; i++) {
		plan_write(pr->p, &pr->lane, 1, i, NS_EV_CREATE);
		if (i % 256 == 255)
			nsdp_sleep_us(2000);
	}
	return NULL;
}

Test(active, restarted_server_gets_every_unacknowledged_record, .timeout = 180)
{
	struct nsdp_lane **lanes = lanes_create(1, 65536);
	struct nsa_active_stats st;
	struct producer pr;
	struct store_view v;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;
	pthread_t th;
	uint64_t acked_before, deadline;
	char pid_path[3100];
	uint32_t bad;
	int server;

	plan_init(&p, 40000);
	store_up(PORT_RESTART, 0);
	conf_for(&c, PORT_RESTART, 1, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);

	memset(&pr, 0, sizeof(pr));
	pr.p = &p;
	pr.lane = lanes[0];
	cr_assert_eq(pthread_create(&th, NULL, producer_main, &pr), 0);
	deadline = mono_ms() + 20000;
	do {
		nsdp_sleep_ms(2);
		nsa_active_stats(a, &st);
	} while (st.acked < 3000 && mono_ms() < deadline);
	cr_assert_geq(st.acked, 3000, "a first part was acknowledged");

	/* Freeze the server first, so that what the writer sends from then on
	 * stays unacknowledged, then kill it: the crash always finds records
	 * in flight, which the writer must resend. */
	snprintf(pid_path, sizeof(pid_path), "%.3000s/%d/%d/redis.pid",
		 nst_build("tests/run"), PORT_RESTART, PORT_RESTART);
	server = nst_read_pid(pid_path);
	cr_assert_gt(server, 0, "no pid in %s", pid_path);
	cr_assert_eq(kill(server, SIGSTOP), 0);
	deadline = mono_ms() + 10000;
	do {
		nsdp_sleep_ms(2);
		nsa_active_stats(a, &st);
	} while (st.inflight == 0 && mono_ms() < deadline);
	cr_assert_gt(st.inflight, 0, "records in flight at the freeze");
	cr_assert_eq(kill(server, SIGKILL), 0);
	nst_store_stop(PORT_RESTART);
	nsdp_sleep_ms(200);
	/* One lane and one connection: acknowledgements come in record
	 * order, so what was acknowledged before the crash is a prefix. */
	nsa_active_stats(a, &st);
	acked_before = st.acked;
	cr_assert_eq(nst_store_start(PORT_RESTART, 0, 0), 0);
	pthread_join(th, NULL);
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_expect_gt(st.reconnects, 0);
	cr_expect_gt(st.resent, 0);
	cr_expect_eq(st.acked + st.dropped, p.n_records);
	cr_expect_eq(st.dropped, 0);
	cr_log_info("acked before the crash %llu of %u, resent %llu",
		    (unsigned long long)acked_before, p.n_flows,
		    (unsigned long long)st.resent);
	cr_assert_lt(acked_before, p.n_flows, "the crash came mid-stream");

	store_view_open(&v, PORT_RESTART);
	bad = store_check_flows(&v, &p, (uint32_t)acked_before, p.n_flows);
	cr_expect_eq(bad, 0, "%u of the last %llu records missing", bad,
		     (unsigned long long)(p.n_flows - acked_before));
	store_view_close(&v);
	writer_down(a, &p);
}

Test(active, throughput_one_lane_plain_server, .timeout = 240)
{
	const uint32_t total = 1000000, flows = 100000;
	struct nsdp_lane **lanes = lanes_create(1, 65536);
	struct ns_session burst[256];
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct store_view v;
	uint64_t t0, ms;
	redisContext *rc;
	struct plan p;
	redisReply *r;
	uint32_t i = 0;

	store_up(PORT_PLAIN, 0);
	conf_for(&c, PORT_PLAIN, 1, NSA_PUBLISH_AUTO);
	c.batch_size = 512;
	c.max_inflight = 16;
	a = writer_up(&c, lanes, 1);
	/* a first record makes sure the writer is connected */
	burst[0] = flow_record(0, NS_EV_CREATE, 0);
	push_wait(lanes[0], &burst[0]);
	cr_assert_eq(nsa_active_drain(a, 10000), 0);

	t0 = mono_ms();
	while (i < total) {
		unsigned int n = 0, k;

		while (n < 256 && i + n < total) {
			uint32_t f = (i + n) % flows;

			burst[n] = flow_record(
				f, i + n < flows ? NS_EV_CREATE : NS_EV_REFRESH,
				i + n + 1);
			n++;
		}
		while (rte_ring_free_count(lanes[0]->ring) < n) {
			cr_assert_lt(mono_ms() - t0, 120000);
			nsdp_sleep_us(20);
		}
		k = nsdp_record_burst(lanes[0], burst, n);
		cr_assert_eq(k, n);
		i += n;
	}
	cr_assert_eq(nsa_active_drain(a, 120000), 0);
	ms = mono_ms() - t0;
	nsa_active_stats(a, &st);
	printf("active throughput: %u records in %llu ms = %.0f records/s "
	       "(%llu batches, plain server, 1 lane, 1 writer)\n",
	       total, (unsigned long long)ms,
	       ms ? total * 1000.0 / (double)ms : 0.0,
	       (unsigned long long)st.batches);
	fflush(stdout);
	/* Whatever the speed, the outcome is exact: every record acked,
	 * none dropped, one SET each, and the store holds each flow's last
	 * refresh. */
	assert_every_record_acked(&st, total + 1);
	cr_assert_eq(st.sets, total + 1);
	cr_assert_eq(st.dels, 0);
	cr_assert_eq(st.resent, 0);
	cr_assert_eq(st.other_errors, 0);

	rc = redisConnect("127.0.0.1", PORT_PLAIN);
	cr_assert(rc && !rc->err);
	r = redisCommand(rc, "DBSIZE");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, (long long)flows);
	freeReplyObject(r);
	redisFree(rc);

	/* Flow f's last record was number total - flows + f. */
	plan_init(&p, flows);
	for (i = 0; i < flows; i++) {
		p.ev[(size_t)i * MAX_EVENTS] = flow_record(
			i, NS_EV_REFRESH, (uint64_t)(total - flows + i) + 1);
		p.n_ev[i] = 1;
	}
	store_view_open(&v, PORT_PLAIN);
	cr_assert_eq(store_check_flows(&v, &p, 0, flows), 0);
	store_view_close(&v);
	plan_free(&p);
	writer_down(a, NULL);
}

struct paced_writer {
	struct plan *p;
	struct nsdp_lane **lanes;
	unsigned int n_lanes;
};

/* creates then refreshes for every flow, spread over about two seconds */
static void *paced_main(void *arg)
{
	struct paced_writer *pw = arg;
	uint32_t i;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < pw->p->n_flows; i++) {
			plan_write(pw->p, pw->lanes, pw->n_lanes, i,
				   pass == 0 ? NS_EV_CREATE : NS_EV_REFRESH);
			if (i % 100 == 99)
				nsdp_sleep_us(3000);
		}
	}
	return NULL;
}

static void *reshard_main(void *arg)
{
	const char *cmd = arg;

	return (void *)(intptr_t)nst_sh("%s", cmd);
}

/* Run one command (no '%' in it) on the server at port; its reply must be
 * of type, and a string reply is copied to out (len bytes) when out. */
static void store_command(int port, const char *cmd, int type, char *out,
			  size_t len)
{
	redisContext *rc = redisConnect("127.0.0.1", port);
	redisReply *r;

	cr_assert(rc && !rc->err, "connect to %d", port);
	r = redisCommand(rc, cmd);
	cr_assert(r && r->type == type, "%s", cmd);
	if (out)
		snprintf(out, len, "%s", r->str);
	freeReplyObject(r);
	redisFree(rc);
}

static void node_id(int port, char id[64])
{
	store_command(port, "CLUSTER MYID", REDIS_REPLY_STRING, id, 64);
}

/* An administrative command: it must answer OK. */
static void store_admin(int port, const char *cmd)
{
	store_command(port, cmd, REDIS_REPLY_STATUS, NULL, 0);
}

Test(active, resharding_under_load_keeps_every_latest_record, .timeout = 240)
{
	struct nsdp_lane **lanes = lanes_create(2, 65536);
	struct nsa_active_stats st;
	struct paced_writer pw;
	struct nsa_config c;
	struct nsa_active *a;
	char from[64], to[64];
	static char cmd[1024];
	pthread_t prod, resh;
	void *rc;
	struct plan p;

	store_up(PORT_RESHARD, 3);
	node_id(PORT_RESHARD, from);
	node_id(PORT_RESHARD + 1, to);
	snprintf(cmd, sizeof(cmd),
		 "redis-cli --cluster reshard 127.0.0.1:%d --cluster-from %s "
		 "--cluster-to %s --cluster-slots 1500 --cluster-yes "
		 "--cluster-pipeline 5 >%s 2>&1",
		 PORT_RESHARD, from, to, nst_build("tests/run/reshard.log"));

	plan_init(&p, 20000);
	conf_for(&c, PORT_RESHARD, 2, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 2);
	pw.p = &p;
	pw.lanes = lanes;
	pw.n_lanes = 2;
	cr_assert_eq(pthread_create(&prod, NULL, paced_main, &pw), 0);
	nsdp_sleep_ms(300);
	cr_assert_eq(pthread_create(&resh, NULL, reshard_main, cmd), 0);
	pthread_join(resh, &rc);
	pthread_join(prod, NULL);
	cr_expect_eq((intptr_t)rc, 0, "reshard failed, see %s",
		     nst_build("tests/run/reshard.log"));
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_log_info("reshard: moved %llu ask %llu resent %llu refreshes %llu",
		    (unsigned long long)st.moved, (unsigned long long)st.ask,
		    (unsigned long long)st.resent,
		    (unsigned long long)st.topology_refreshes);
	cr_expect_gt(st.moved + st.ask, 0, "the writers saw redirections");
	cr_expect_eq(st.acked, p.n_records);
	cr_expect_eq(st.dropped, 0);

	expect_store_holds(PORT_RESHARD, &p, plan_live(&p));
	writer_down(a, &p);
}

/* Whether key is on the master at port, asked with ASKING (a slot being
 * imported answers only then). */
static int key_on(int port, const uint8_t *key)
{
	redisContext *rc = redisConnect("127.0.0.1", port);
	redisReply *r;
	int on;

	cr_assert(rc && !rc->err, "connect to %d", port);
	r = redisCommand(rc, "ASKING");
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(rc, "EXISTS %b", key, (size_t)NS_KEY_LEN);
	cr_assert(r && r->type == REDIS_REPLY_INTEGER, "EXISTS on %d", port);
	on = (int)r->integer;
	freeReplyObject(r);
	redisFree(rc);
	return on;
}

/*
 * A slot being migrated, by hand as redis-cli --cluster reshard does it:
 * a session already on the migrating master (K1) and a new one in the same
 * slot (K2), written in one batch. K2 is answered ASK and goes to the
 * target; K1, still on the migrating master, must be written there, not
 * on the target: a second copy there makes MIGRATE of K1 fail with
 * BUSYKEY ("Target key exists", as a CI run's reshard did) and readers of
 * the target see it before its time. Then the slot moves, and the store
 * holds both, once.
 */
Test(active, a_key_still_on_a_migrating_slot_is_written_there, .timeout = 60)
{
	struct nsdp_lane **lanes = lanes_create(1, 1024);
	struct nsa_active_stats st;
	struct ns_session k1 = flow_record(1, NS_EV_CREATE, 1000), k2;
	uint8_t key1[NS_KEY_LEN], key2[NS_KEY_LEN];
	char cmd[256], src_id[64], dst_id[64];
	struct nsa_config c;
	struct nsa_active *a;
	static struct store_view v;
	redisContext *rc;
	redisReply *r;
	uint16_t slot;
	uint32_t j;
	int src, dst;

	store_up(PORT_ASK, 3);
	ns_key_build(k1.proto, &k1.orig, key1);
	slot = ns_key_slot(key1, NS_KEY_LEN);
	/* Another flow of the same slot. */
	for (j = 2; j < 2000000; j++) {
		k2 = flow_record(j, NS_EV_CREATE, 1000 + j);
		ns_key_build(k2.proto, &k2.orig, key2);
		if (ns_key_slot(key2, NS_KEY_LEN) == slot)
			break;
	}
	cr_assert_lt(j, 2000000);
	store_view_open(&v, PORT_ASK);
	src = v.topo.nodes[v.topo.slot_node[slot]].addr.port;
	store_view_close(&v);
	dst = src == PORT_ASK ? PORT_ASK + 1 : PORT_ASK;
	node_id(src, src_id);
	node_id(dst, dst_id);

	conf_for(&c, PORT_ASK, 1, NSA_PUBLISH_AUTO);
	c.flush_us = 100000; /* K2 and K1's refresh in one batch */
	a = writer_up(&c, lanes, 1);
	push_wait(lanes[0], &k1);
	cr_assert_eq(nsa_active_drain(a, 10000), 0);
	cr_assert(key_on(src, key1));

	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %u IMPORTING %s", slot,
		 src_id);
	store_admin(dst, cmd);
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %u MIGRATING %s", slot,
		 dst_id);
	store_admin(src, cmd);

	k1 = flow_record(1, NS_EV_REFRESH, 5000);
	push_wait(lanes[0], &k2);
	push_wait(lanes[0], &k1);
	cr_assert_eq(nsa_active_drain(a, 10000), 0);
	nsa_active_stats(a, &st);
	cr_expect_geq(st.ask, 1, "K2 was never answered ASK");
	cr_expect_eq(st.acked, 3);
	cr_assert(key_on(dst, key2), "K2 is not on the target");
	cr_assert(key_on(src, key1), "K1 left the migrating master");
	cr_assert_not(key_on(dst, key1),
		      "K1 was written to the target while still on the "
		      "migrating master");

	/* The move completes as redis-cli does it: K1 migrates. */
	rc = redisConnect("127.0.0.1", src);
	r = redisCommand(rc, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %b", dst, "",
			 key1, (size_t)NS_KEY_LEN);
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "MIGRATE of K1: %s",
		  r ? r->str : rc->errstr);
	freeReplyObject(r);
	redisFree(rc);
	snprintf(cmd, sizeof(cmd), "CLUSTER SETSLOT %u NODE %s", slot, dst_id);
	store_admin(dst, cmd);
	store_admin(src, cmd);
	cr_assert(key_on(dst, key1));
	cr_assert(key_on(dst, key2));
	writer_down(a, NULL);
}

/* The store on port, with a user natsync who may not DEL (ACL). */
static void acl_store_up(int port)
{
	store_up(port, 0);
	store_admin(port, "ACL SETUSER natsync on >secret ~* &* +@all -del");
}

/* An active as natsync on port's store (acl_store_up), c its
 * configuration, creates the 100 flows of p and deletes every other one:
 * the 50 refused deletes are counted as errors and dropped, the creates
 * acknowledged. Returns the drained active; its stats in *st. */
static struct nsa_active *acl_refused_deletes(int port, struct nsa_config *c,
					      struct nsdp_lane **lanes,
					      struct plan *p,
					      struct nsa_active_stats *st)
{
	struct nsa_active *a;
	uint32_t i;

	conf_for(c, port, 1, NSA_PUBLISH_AUTO);
	snprintf(c->store.user, sizeof(c->store.user), "natsync");
	snprintf(c->store.password, sizeof(c->store.password), "secret");
	a = writer_up(c, lanes, 1);
	plan_write_all(p, lanes, 1, NS_EV_CREATE);
	for (i = 0; i < p->n_flows; i += 2)
		plan_write(p, lanes, 1, i, NS_EV_DELETE);
	cr_assert_eq(nsa_active_drain(a, 10000), 0, "drained");
	nsa_active_stats(a, st);
	cr_expect_eq(st->other_errors, 50);
	cr_expect_eq(st->dropped, 50);
	cr_expect_eq(st->acked, 100);
	return a;
}

Test(active, refused_commands_are_counted_as_dropped_not_retried, .timeout = 60)
{
	struct nsdp_lane **lanes = lanes_create(1, 1024);
	struct nsa_active_stats st;
	struct store_view v;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;

	acl_store_up(PORT_ACL);
	plan_init(&p, 100);
	a = acl_refused_deletes(PORT_ACL, &c, lanes, &p, &st);
	cr_expect_eq(st.resent, 0);

	store_view_open(&v, PORT_ACL);
	cr_expect_eq(store_count_keys(&v), 100, "refused deletes left keys");
	store_view_close(&v);
	writer_down(a, &p);
}

/* A master that may not take writes for a while (here: min-replicas-to-write
 * without a replica, NOREPLICAS) loses nothing: the writer waits, resends,
 * and drops nothing once the store takes writes again. */
Test(active, passing_refusals_are_waited_out_and_resent, .timeout = 60)
{
	struct nsdp_lane **lanes = lanes_create(1, 1024);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;

	store_up(PORT_NOREPLICAS, 0);
	store_admin(PORT_NOREPLICAS, "CONFIG SET min-replicas-to-write 1");
	plan_init(&p, 100);
	conf_for(&c, PORT_NOREPLICAS, 1, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);
	plan_write_all(&p, lanes, 1, NS_EV_CREATE);
	cr_assert_neq(nsa_active_drain(a, 1000), 0,
		      "drained while the store refused every write");
	nsa_active_stats(a, &st);
	cr_expect_gt(st.tryagain, 0, "no NOREPLICAS seen");
	cr_expect_eq(st.acked, 0);

	store_admin(PORT_NOREPLICAS, "CONFIG SET min-replicas-to-write 0");
	cr_assert_eq(nsa_active_drain(a, 10000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_expect_eq(st.acked, 100);
	cr_expect_eq(st.dropped, 0);
	cr_expect_eq(st.other_errors, 0);
	expect_store_holds(PORT_NOREPLICAS, &p, 100);
	writer_down(a, &p);
}

/* ---- refusals and the standby ----------------------------------------- */

/* A standby on the plain server at port, synced (its cold load done). */
/* [store] layout of the standbys standby_up starts. */
static enum nsa_layout standby_layout = NSA_LAYOUT_KEYS;

static struct nsa_standby *standby_up(int port, uint32_t capacity)
{
	static struct nsa_config conf; /* the standby keeps it */
	uint64_t deadline = mono_ms() + 10000;
	struct nsa_standby_stats st;
	struct nsa_standby *sb;

	nsa_config_defaults(&conf);
	conf.role = NSA_ROLE_STANDBY;
	conf.gateway_id = 7;
	snprintf(conf.store.seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	conf.store.seeds[0].port = (uint16_t)port;
	conf.store.n_seeds = 1;
	conf.store.connect_timeout_ms = 1000;
	conf.store.publish = NSA_PUBLISH_AUTO;
	conf.table_capacity = capacity;
	conf.store.layout = standby_layout;
	sb = nsa_standby_create(&conf);
	cr_assert_not_null(sb);
	cr_assert_eq(nsa_standby_start(sb), 0);
	do {
		nsa_standby_stats(sb, &st);
		if (st.synced)
			return sb;
		nsdp_sleep_ms(5);
	} while (mono_ms() < deadline);
	cr_assert_fail("the standby did not sync within 10 s");
	return NULL;
}

/* How the standby's table and the store differ over flows [0, n). */
struct disagreement {
	uint32_t only_standby, only_store, differ;
};

static struct disagreement standby_vs_store(struct nsa_standby *sb,
					    struct store_view *v, uint32_t n)
{
	struct disagreement d = {0, 0, 0};
	uint32_t f;

	for (f = 0; f < n; f++) {
		struct ns_session s = flow_record(f, NS_EV_CREATE, 0), got,
				  held;
		uint8_t key[NS_KEY_LEN];
		redisReply *r;
		int in_store, in_standby;

		ns_key_build(s.proto, &s.orig, key);
		r = redisCommand(v->c[0], "GET %b", key, (size_t)NS_KEY_LEN);
		cr_assert(r && (r->type == REDIS_REPLY_NIL ||
				r->type == REDIS_REPLY_STRING),
			  "GET flow %u", f);
		in_store = r->type == REDIS_REPLY_STRING;
		if (in_store)
			cr_assert_gt(ns_record_decode((const uint8_t *)r->str,
						      r->len, &held),
				     0, "flow %u undecodable in the store", f);
		freeReplyObject(r);
		in_standby = nsdp_table_lookup(nsa_standby_table(sb), s.proto,
					       &s.orig, &got) == 0;
		if (in_standby && !in_store)
			d.only_standby++;
		else if (in_store && !in_standby)
			d.only_store++;
		else if (in_store && !ns_session_equal_state(&got, &held))
			d.differ++;
	}
	return d;
}

/* Wait (10 s at most) for the standby to agree with the store over flows
 * [0, n); the last difference seen. */
static struct disagreement wait_agreement(struct nsa_standby *sb, int port,
					  uint32_t n)
{
	uint64_t deadline = mono_ms() + 10000;
	struct disagreement d;
	struct store_view v;

	store_view_open(&v, port);
	for (;;) {
		d = standby_vs_store(sb, &v, n);
		if ((d.only_standby | d.only_store | d.differ) == 0 ||
		    mono_ms() >= deadline)
			break;
		nsdp_sleep_ms(50);
	}
	store_view_close(&v);
	return d;
}

static void expect_agreement(const struct disagreement *d)
{
	cr_expect_eq(d->only_standby, 0,
		     "sessions in the standby, not in the store: %u",
		     d->only_standby);
	cr_expect_eq(d->only_store, 0,
		     "sessions in the store, not in the standby: %u",
		     d->only_store);
	cr_expect_eq(d->differ, 0, "sessions that differ: %u", d->differ);
}

static long long info_field(int port, const char *section, const char *name)
{
	redisContext *rc = redisConnect("127.0.0.1", port);
	long long value = -1;
	redisReply *r;
	const char *at;

	cr_assert(rc && !rc->err, "connect to %d", port);
	r = redisCommand(rc, "INFO %s", section);
	cr_assert(r && r->type == REDIS_REPLY_STRING, "INFO %s", section);
	at = strstr(r->str, name);
	if (at != NULL && at[strlen(name)] == ':')
		value = atoll(at + strlen(name) + 1);
	freeReplyObject(r);
	redisFree(rc);
	return value;
}

/* A store out of memory (maxmemory, noeviction) refuses SETs with OOM for
 * good: neither the keys it never took nor the refreshes it refused may
 * stay in the standby, which must end holding what the store holds. */
Test(active, standby_agrees_with_a_store_refusing_sets_for_want_of_memory,
     .timeout = 90)
{
	const uint32_t n = 2000;
	struct nsdp_lane **lanes = lanes_create(1, 4096);
	struct nsa_active_stats st;
	struct nsa_standby *sb;
	struct disagreement d;
	struct store_view v;
	struct nsa_config c;
	struct nsa_active *a;
	uint64_t keys;
	long long used;
	char cmd[96];
	struct plan p;

	store_up(PORT_OOM, 0);
	sb = standby_up(PORT_OOM, 16384);
	/* Room for a few hundred of the 2000 sessions. */
	used = info_field(PORT_OOM, "memory", "used_memory");
	cr_assert_gt(used, 0);
	snprintf(cmd, sizeof(cmd), "CONFIG SET maxmemory %lld",
		 used + 100 * 1024);
	store_admin(PORT_OOM, cmd);
	store_admin(PORT_OOM, "CONFIG SET maxmemory-policy noeviction");

	plan_init(&p, n);
	conf_for(&c, PORT_OOM, 1, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);
	plan_write_all(&p, lanes, 1, NS_EV_CREATE);
	plan_write_all(&p, lanes, 1, NS_EV_REFRESH);
	cr_assert_eq(nsa_active_drain(a, 20000), 0, "drained");
	nsa_active_stats(a, &st);

	store_view_open(&v, PORT_OOM);
	keys = store_count_keys(&v);
	store_view_close(&v);
	d = wait_agreement(sb, PORT_OOM, n);
	cr_log_info("OOM: store keys %llu of %u, refused %llu, corrections "
		    "%llu; standby only %u, store only %u, differ %u",
		    (unsigned long long)keys, n,
		    (unsigned long long)st.other_errors,
		    (unsigned long long)st.store_corrections, d.only_standby,
		    d.only_store, d.differ);
	cr_expect_lt(keys, n, "the store took every session");
	/* Every refused create left a key out; refused refreshes too. */
	cr_expect_geq(st.other_errors, n - keys);
	cr_expect_eq(st.dropped, st.other_errors);
	cr_expect_eq(st.acked + st.dropped, p.n_records);
	cr_expect_eq(st.resent, 0);
	/* A refused record whose flow went out again before its read-back
	 * needs no correction of its own. */
	cr_expect_gt(st.store_corrections, 0);
	cr_expect_leq(st.store_corrections, st.dropped);
	cr_expect_eq(st.corrections_due, 0);
	expect_agreement(&d);
	writer_down(a, &p);
	nsa_standby_free(sb);
}

/* The log layout's store as a loader reads it (every segment merged):
 * present[f] and held[f] for flows [0, n). */
struct log_view {
	uint8_t *present;
	struct ns_session *held;
	uint32_t n;
};

static unsigned int log_view_take(void *arg, unsigned int node,
				  const struct ns_session *s, unsigned int n)
{
	struct log_view *v = arg;

	(void)node;
	for (unsigned int i = 0; i < n; i++) {
		uint32_t f = record_flow(&s[i]);

		cr_assert_lt(f, v->n, "a session of no flow of the test");
		v->present[f] = 1;
		v->held[f] = s[i];
	}
	return n;
}

static void log_view_bad(void *arg, uint64_t n)
{
	(void)arg;
	cr_assert_eq(n, 0, "%llu segments are not valid",
		     (unsigned long long)n);
}

static struct disagreement standby_vs_log(struct nsa_standby *sb, int port,
					  uint32_t n)
{
	static struct nsa_config conf;
	static struct nsa_topology topo;
	struct log_view v = {calloc(n, 1), calloc(n, sizeof(*v.held)), n};
	const struct nsa_loader_sink sink = {
		.apply = log_view_take, .bad = log_view_bad, .arg = &v};
	struct disagreement d = {0, 0, 0};
	char err[256];

	cr_assert(v.present && v.held);
	conf_for(&conf, port, 1, NSA_PUBLISH_AUTO);
	conf.store.layout = NSA_LAYOUT_LOG;
	cr_assert_eq(nsa_topology_fetch(&conf.store, &topo, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(nsa_loader_run(&conf.store, &topo, 0, 0, &sink, 5000, err,
				    sizeof(err)),
		     NSA_LOADER_DONE, "%s", err);
	for (uint32_t f = 0; f < n; f++) {
		struct ns_session s = flow_record(f, NS_EV_CREATE, 0), got;
		int in_standby = nsdp_table_lookup(nsa_standby_table(sb),
						   s.proto, &s.orig, &got) == 0;

		if (in_standby && !v.present[f])
			d.only_standby++;
		else if (v.present[f] && !in_standby)
			d.only_store++;
		else if (v.present[f] &&
			 !ns_session_equal_state(&got, &v.held[f]))
			d.differ++;
	}
	free(v.present);
	free(v.held);
	return d;
}

/* The log layout's store out of memory refuses whole segments with OOM
 * after their notifications went out: the writer publishes a RESYNC batch
 * on the channel and the standby reads the store again, ending with what
 * the store's log holds. */
Test(active, log_standby_agrees_with_a_store_refusing_segments, .timeout = 90)
{
	const uint32_t n = 4000;
	struct nsdp_lane **lanes = lanes_create(1, 8192);
	struct nsa_active_stats st;
	struct nsa_standby_stats sst;
	struct nsa_standby *sb;
	struct disagreement d;
	struct nsa_config c;
	struct nsa_active *a;
	uint64_t deadline;
	long long used;
	char cmd[96];
	struct plan p;

	store_up(PORT_LOG_OOM, 0);
	standby_layout = NSA_LAYOUT_LOG;
	sb = standby_up(PORT_LOG_OOM, 16384);
	standby_layout = NSA_LAYOUT_KEYS;
	/* Room for a few segments of 256 records (12 KiB each). */
	used = info_field(PORT_LOG_OOM, "memory", "used_memory");
	cr_assert_gt(used, 0);
	snprintf(cmd, sizeof(cmd), "CONFIG SET maxmemory %lld",
		 used + 100 * 1024);
	store_admin(PORT_LOG_OOM, cmd);
	store_admin(PORT_LOG_OOM, "CONFIG SET maxmemory-policy noeviction");

	plan_init(&p, n);
	conf_for(&c, PORT_LOG_OOM, 1, NSA_PUBLISH_AUTO);
	c.store.layout = NSA_LAYOUT_LOG;
	a = writer_up(&c, lanes, 1);
	plan_write_all(&p, lanes, 1, NS_EV_CREATE);
	plan_write_all(&p, lanes, 1, NS_EV_REFRESH);
	cr_assert_eq(nsa_active_drain(a, 20000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_log_info("log OOM: refused %llu, dropped %llu, acked %llu",
		    (unsigned long long)st.other_errors,
		    (unsigned long long)st.dropped,
		    (unsigned long long)st.acked);
	cr_expect_gt(st.other_errors, 0, "the store took every segment");
	cr_expect_gt(st.dropped, 0);
	cr_expect_eq(st.acked + st.dropped, p.n_records);
	deadline = mono_ms() + 10000;
	do {
		nsdp_sleep_ms(100);
		d = standby_vs_log(sb, PORT_LOG_OOM, n);
	} while ((d.only_standby | d.only_store | d.differ) != 0 &&
		 mono_ms() < deadline);
	nsa_standby_stats(sb, &sst);
	cr_log_info("log OOM: standby resyncs %llu; standby only %u, store "
		    "only %u, differ %u",
		    (unsigned long long)sst.resyncs, d.only_standby,
		    d.only_store, d.differ);
	/* The cold load, then at least one asked for. */
	cr_expect_geq(sst.resyncs, 2);
	expect_agreement(&d);
	writer_down(a, &p);
	nsa_standby_free(sb);
}

/* The standby's table against the store's log over flows [0, n), waited
 * for (10 s at most) until they agree; the last difference seen. */
static struct disagreement wait_log_agreement(struct nsa_standby *sb, int port,
					      uint32_t n)
{
	uint64_t deadline = mono_ms() + 10000;
	struct disagreement d;

	for (;;) {
		d = standby_vs_log(sb, port, n);
		if ((d.only_standby | d.only_store | d.differ) == 0 ||
		    mono_ms() >= deadline)
			return d;
		nsdp_sleep_ms(100);
	}
}

/* Flows [first, first + n) of p with event ev, drained. */
static void plan_write_drained(struct plan *p, struct nsdp_lane **lanes,
			       struct nsa_active *a, uint32_t first, uint32_t n,
			       uint8_t ev)
{
	for (uint32_t i = first; i < first + n; i++)
		plan_write(p, lanes, 1, i, ev);
	cr_assert_eq(nsa_active_drain(a, 20000), 0, "drained");
}

/* The log layout's store refuses segments for good for a moment (the
 * writer's ACL user may not SET), then takes them again: the writer
 * writes each refused batch again under a new seq, announced as such
 * (NS_BATCH_F_REWRITE), and the standby reads back those segments alone,
 * not its master. */
Test(active, log_a_refused_segment_is_written_again_and_read_back,
     .timeout = 60)
{
	const uint32_t n = 600;
	struct nsdp_lane **lanes = lanes_create(1, 4096);
	struct nsa_standby_stats before, after;
	struct nsa_active_stats st;
	struct ns_session one = flow_record(0, NS_EV_REFRESH, 1);
	uint8_t buf[NS_RECORD_MAX_LEN];
	uint64_t refused, deadline;
	struct nsa_standby *sb;
	struct disagreement d;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;
	int rec_len = ns_record_encode(&one, buf, sizeof(buf));

	cr_assert_gt(rec_len, 0);
	store_up(PORT_LOG_REWRITE, 0);
	store_admin(PORT_LOG_REWRITE,
		    "ACL SETUSER natsync on >secret ~* &* +@all");
	standby_layout = NSA_LAYOUT_LOG;
	sb = standby_up(PORT_LOG_REWRITE, 4096);
	standby_layout = NSA_LAYOUT_KEYS;
	plan_init(&p, n);
	/* A log reader expires records by their stamps: real ones. */
	p.ts = nsdp_realtime_ns();
	conf_for(&c, PORT_LOG_REWRITE, 1, NSA_PUBLISH_AUTO);
	c.store.layout = NSA_LAYOUT_LOG;
	snprintf(c.store.user, sizeof(c.store.user), "natsync");
	snprintf(c.store.password, sizeof(c.store.password), "secret");
	a = writer_up(&c, lanes, 1);
	plan_write_drained(&p, lanes, a, 0, 200, NS_EV_CREATE);
	d = wait_log_agreement(sb, PORT_LOG_REWRITE, n);
	expect_agreement(&d);
	nsa_standby_stats(sb, &before);

	/* Every segment of 200 refreshes refused (NOPERM), announced. */
	store_admin(PORT_LOG_REWRITE, "ACL SETUSER natsync -set");
	plan_write_drained(&p, lanes, a, 0, 200, NS_EV_REFRESH);
	nsa_active_stats(a, &st);
	refused = st.other_errors;
	cr_assert_gt(refused, 0, "no segment refused");
	cr_expect_eq(st.dropped, 200);
	/* Taken again: the next segments, then the refused ones again. */
	store_admin(PORT_LOG_REWRITE, "ACL SETUSER natsync +set");
	plan_write_drained(&p, lanes, a, 200, 200, NS_EV_CREATE);
	deadline = mono_ms() + 10000;
	do {
		nsdp_sleep_ms(50);
		nsa_standby_stats(sb, &after);
	} while (after.repairs - before.repairs < refused &&
		 after.resyncs == before.resyncs && mono_ms() < deadline);
	d = wait_log_agreement(sb, PORT_LOG_REWRITE, n);
	nsa_standby_stats(sb, &after);
	cr_log_info(
		"refused %llu segments; standby: resyncs %llu, repairs "
		"%llu, repair_values %llu (%llu B)",
		(unsigned long long)refused,
		(unsigned long long)(after.resyncs - before.resyncs),
		(unsigned long long)(after.repairs - before.repairs),
		(unsigned long long)(after.repair_values -
				     before.repair_values),
		(unsigned long long)(after.repair_bytes - before.repair_bytes));
	cr_expect_eq(after.resyncs, before.resyncs, "a resync of the master");
	cr_expect_eq(after.load_values, before.load_values);
	cr_expect_eq(after.repairs - before.repairs, refused);
	cr_expect_eq(after.repair_values - before.repair_values, refused);
	cr_expect_eq(after.repair_bytes - before.repair_bytes,
		     refused * NS_BATCH_HDR_LEN + 200 * (uint64_t)rec_len);
	cr_expect_eq(after.refused_segments + after.bad_values, 0);
	nsa_active_stats(a, &st);
	cr_expect_eq(st.log_rewrites, refused);
	cr_expect_eq(st.log_rewrite_bytes,
		     after.repair_bytes - before.repair_bytes);
	/* The refreshes are in the store again, so in every table. */
	expect_agreement(&d);
	for (uint32_t f = 0; f < 200; f++) {
		struct ns_session s = flow_record(f, NS_EV_CREATE, 0), got;

		cr_assert_eq(nsdp_table_lookup(nsa_standby_table(sb), s.proto,
					       &s.orig, &got),
			     0);
		cr_expect_eq(got.timeout_ms, TIMEOUT_REFRESH_MS, "flow %u", f);
	}
	writer_down(a, &p);
	nsa_standby_free(sb);
}

/* A writer whose ACL user may not DEL has every delete refused with
 * NOPERM: the sessions stay in the store, so they must stay in the
 * standby. */
Test(active, standby_agrees_with_a_store_refusing_deletes_by_acl, .timeout = 60)
{
	const uint32_t n = 100;
	struct nsdp_lane **lanes = lanes_create(1, 1024);
	struct nsa_active_stats st;
	struct nsa_standby *sb;
	struct disagreement d;
	struct nsa_config c;
	struct nsa_active *a;
	struct plan p;

	acl_store_up(PORT_ACL_STANDBY);
	sb = standby_up(PORT_ACL_STANDBY, 4096);
	plan_init(&p, n);
	a = acl_refused_deletes(PORT_ACL_STANDBY, &c, lanes, &p, &st);
	cr_expect_eq(st.store_corrections, 50);
	cr_expect_eq(st.corrections_due, 0);

	d = wait_agreement(sb, PORT_ACL_STANDBY, n);
	expect_agreement(&d);
	writer_down(a, &p);
	nsa_standby_free(sb);
}

/* A partitioned old active (issue: split brain): another gateway takes a
 * newer epoch and raises the fence (agent/fence/nsa_fence.h). The old writers'
 * connections are closed; they reconnect, read the newer epoch, and write
 * none of their older records, while records of the new epoch go on. */
Test(active, a_fenced_writer_writes_nothing_after_the_fence, .timeout = 120)
{
	struct nsdp_lane **lanes = lanes_create(1, 65536);
	struct nsa_active_stats st;
	struct nsa_config c;
	struct nsa_active *a;
	struct store_view v;
	unsigned int killed = 0;
	uint64_t deadline;
	char err[512];
	uint32_t i;

	store_up(PORT_FENCE, 3);
	conf_for(&c, PORT_FENCE, 2, NSA_PUBLISH_AUTO);
	a = writer_up(&c, lanes, 1);
	for (i = 0; i < 1000; i++) {
		struct ns_session s = flow_record(i, NS_EV_CREATE, 1000 + i);

		push_wait(lanes[0], &s);
	}
	cr_assert_eq(nsa_active_drain(a, 30000), 0);
	nsa_active_stats(a, &st);
	cr_assert_eq(st.acked, 1000);
	cr_assert_eq(nsa_active_fence(a), 0, "no epoch in the store yet");

	/* Another gateway's promotion: epoch 256 (the store's next
	 * generation), then the fence: the one writer's (one lane) 3
	 * connections, one per master, are closed. */
	cr_assert_eq(nsa_epoch_take(&c.store, 1, err, sizeof(err)), 256, "%s",
		     err);
	cr_assert_eq(nsa_fence_raise(&c.store, &killed, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(killed, 3);

	for (i = 1000; i < 2000; i++) {
		struct ns_session s = flow_record(i, NS_EV_CREATE, 1000 + i);

		push_wait(lanes[0], &s);
	}
	deadline = mono_ms() + 20000;
	do {
		nsdp_sleep_ms(20);
		nsa_active_stats(a, &st);
	} while (st.fenced < 1000 && mono_ms() < deadline);
	cr_assert_eq(st.fenced, 1000, "records of epoch 1 after the fence");
	cr_assert_eq(st.acked, 1000);
	cr_assert_eq(st.dropped, 1000);
	cr_assert_eq(nsa_active_fence(a), 256);
	store_view_open(&v, PORT_FENCE);
	cr_assert_eq(store_count_keys(&v), 1000,
		     "a fenced record reached the store");

	/* Records of the new epoch go through the same writers. */
	for (i = 2000; i < 2500; i++) {
		struct ns_session s = flow_record(i, NS_EV_CREATE, 1000 + i);

		s.epoch = 256;
		push_wait(lanes[0], &s);
	}
	cr_assert_eq(nsa_active_drain(a, 30000), 0);
	nsa_active_stats(a, &st);
	cr_assert_eq(st.acked, 1500);
	cr_assert_eq(st.fenced, 1000);
	cr_assert_eq(store_count_keys(&v), 1500);
	store_view_close(&v);
	writer_down(a, NULL);
}
