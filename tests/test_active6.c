/*
 * test_active6.c - the active writers with IPv6 sessions among IPv4 ones,
 * against real Redis stores: every record's lines are drained whole, an
 * IPv6 session is stored under its 40-byte key (keys layout: its last
 * record, with a TTL; the key's hash slot picks the master), every record
 * is notified once, in per-flow order, in batches that decode with the
 * two-line iterator (both layouts; in the log layout the segments hold
 * them too), and a store that restarts mid-stream gets every record again
 * (the resend and replay paths carry the second lines). A live standby
 * ([standby] table_capacity_v6) ends with exactly the live sessions of
 * both families in its table, and keeps them through a forced resync;
 * a standby loaded cold from the store holds the same, in the log layout
 * after a compaction round too.
 *
 * Ports: 7930-7932 (keys cluster), 7933-7935 (log cluster), 7936 (plain
 * server, restarted).
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_compact.h"
#include "nsa_config.h"
#include "nsa_standby.h"
#include "nsdp_lane.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"
#include "nsdp_time.h"
#include "nst_agents.h"
#include "nst_session.h"
#include "nst_store.h"
#include "nst_sub.h"

#define PORT_KEYS 7930
#define PORT_LOG 7933
#define PORT_RESTART 7936

#define TIMEOUT_MS 300000u
#define MAX_EVENTS 3

static int used_ports[4];
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

TestSuite(active6, .init = setup, .fini = teardown);

static void store_up(int port, int masters)
{
	used_ports[n_used_ports++] = port;
	cr_assert_eq(nst_store_start(port, masters, 0), 0, "store on %d", port);
}

static uint64_t mono_ms(void)
{
	return nsdp_mono_ns() / 1000000;
}

/* Flow i: IPv6 when i % 10 < 3 (NAT66 when i is even, NAT64 when odd),
 * IPv4 otherwise; the inside source names the flow (its low 24 bits). */
static int flow_is_v6(uint32_t i)
{
	return i % 10 < 3;
}

static struct ns_rec flow_rec(uint32_t i, uint8_t event, uint64_t ts)
{
	struct ns_rec r;

	memset(&r, 0, sizeof(r));
	r.s = nst_session(6, event, 7, 1,
			  event == NS_EV_DELETE ? 0 : TIMEOUT_MS, ts);
	if (!flow_is_v6(i)) {
		nst_session_snat(&r.s, 0x0a000000u | i,
				 (uint16_t)(1000 + i % 50000), 0xc0a80001u, 443,
				 0x64400001u, (uint16_t)(1024 + i % 60000));
		return r;
	}
	r.s.orig.sport = (uint16_t)(1000 + i % 50000);
	r.s.orig.dport = 443;
	r.s.xlat.sport = (uint16_t)(1024 + i % 60000);
	r.s.xlat.dport = 443;
	r.v6.orig_saddr[0] = 0x20;
	r.v6.orig_saddr[1] = 0x01;
	r.v6.orig_saddr[2] = 0x0d;
	r.v6.orig_saddr[3] = 0xb8;
	r.v6.orig_saddr[13] = (uint8_t)(i >> 16);
	r.v6.orig_saddr[14] = (uint8_t)(i >> 8);
	r.v6.orig_saddr[15] = (uint8_t)i;
	if (i % 2 == 0) {
		r.s.family = NS_FAMILY_NAT66;
		r.v6.orig_daddr[0] = 0x26;
		r.v6.orig_daddr[15] = 1;
		memcpy(r.v6.xlat_daddr, r.v6.orig_daddr, 16);
		r.v6.xlat_saddr[0] = 0x20;
		r.v6.xlat_saddr[15] = 7;
		return r;
	}
	r.s.family = NS_FAMILY_NAT64;
	r.s.xlat.saddr = 0xc6336407u; /* 198.51.100.7 */
	r.s.xlat.daddr = 0x5db8d822u; /* 93.184.216.34 */
	r.v6.orig_daddr[1] = 0x64;
	r.v6.orig_daddr[2] = 0xff;
	r.v6.orig_daddr[3] = 0x9b;
	r.v6.orig_daddr[12] = 0x5d;
	r.v6.orig_daddr[13] = 0xb8;
	r.v6.orig_daddr[14] = 0xd8;
	r.v6.orig_daddr[15] = 0x22;
	r.v6.prefix_len = 96;
	return r;
}

static uint32_t rec_flow(const struct ns_rec *r)
{
	if (ns_session_lines(&r->s) == 1)
		return r->s.orig.saddr & 0xffffffu;
	return (uint32_t)r->v6.orig_saddr[13] << 16 |
	       (uint32_t)r->v6.orig_saddr[14] << 8 | r->v6.orig_saddr[15];
}

static int same_rec(const struct ns_rec *a, const struct ns_rec *b)
{
	return a->s.family == b->s.family && a->s.event == b->s.event &&
	       a->s.timestamp_ns == b->s.timestamp_ns &&
	       a->s.timeout_ms == b->s.timeout_ms &&
	       ns_session_equal_state(&a->s, &b->s);
}

/* ---- what was written ------------------------------------------------- */

struct plan {
	uint32_t n_flows;
	uint8_t *n_ev;
	struct ns_rec *ev; /* [n_flows][MAX_EVENTS] */
	uint64_t n_records, n_v6;
	uint64_t ts;
};

static void plan_init(struct plan *p, uint32_t n_flows)
{
	memset(p, 0, sizeof(*p));
	p->n_flows = n_flows;
	p->n_ev = calloc(n_flows, 1);
	p->ev = calloc((size_t)n_flows * MAX_EVENTS, sizeof(*p->ev));
	/* now: a log layout load leaves out records past their timeout */
	p->ts = nsdp_realtime_ns();
	cr_assert(p->n_ev && p->ev);
}

static void plan_free(struct plan *p)
{
	free(p->n_ev);
	free(p->ev);
}

static void push_wait(struct nsdp_lane *lane, const struct ns_rec *r)
{
	uint64_t deadline = mono_ms() + 60000;

	while (rte_ring_free_count(lane->ring) < 2) {
		cr_assert_lt(mono_ms(), deadline, "lane stayed full");
		nsdp_sleep_us(100);
	}
	if (ns_session_lines(&r->s) == 2)
		cr_assert_eq(nsdp_record_v6(lane, &r->s), 0);
	else
		cr_assert_eq(nsdp_record(lane, &r->s), 0);
}

static void plan_write(struct plan *p, struct nsdp_lane **lanes,
		       unsigned int n_lanes, uint32_t flow, uint8_t event)
{
	struct ns_rec r = flow_rec(flow, event, p->ts++);
	uint8_t k = p->n_ev[flow];

	cr_assert_lt(k, MAX_EVENTS);
	p->ev[(size_t)flow * MAX_EVENTS + k] = r;
	__atomic_store_n(&p->n_ev[flow], (uint8_t)(k + 1), __ATOMIC_RELEASE);
	p->n_records++;
	p->n_v6 += flow_is_v6(flow);
	push_wait(lanes[flow % n_lanes], &r);
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

static const struct ns_rec *plan_last(const struct plan *p, uint32_t f)
{
	if (p->n_ev[f] == 0)
		return NULL;
	return &p->ev[(size_t)f * MAX_EVENTS + p->n_ev[f] - 1];
}

static void plan_live(const struct plan *p, uint64_t *v4, uint64_t *v6)
{
	uint32_t f;

	*v4 = *v6 = 0;
	for (f = 0; f < p->n_flows; f++) {
		const struct ns_rec *l = plan_last(p, f);

		if (l != NULL && l->s.event != NS_EV_DELETE)
			(*(flow_is_v6(f) ? v6 : v4))++;
	}
}

/* ---- the store -------------------------------------------------------- */

struct store_view {
	struct nsa_store_conf sc;
	struct nsa_topology topo;
	redisContext *c[NSA_MAX_NODES];
};

static void store_view_open(struct store_view *v, int port)
{
	struct nsa_store_conf *sc = &v->sc;
	char err[256];
	unsigned int i;

	memset(sc, 0, sizeof(*sc));
	snprintf(sc->seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	sc->seeds[0].port = (uint16_t)port;
	sc->n_seeds = 1;
	sc->connect_timeout_ms = 1000;
	cr_assert_eq(nsa_topology_fetch(sc, &v->topo, err, sizeof(err)), 0,
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

/* Every key matching pattern on every master, each given to fn with the
 * master's connection. */
static void store_scan(struct store_view *v, const char *pattern,
		       void (*fn)(redisContext *c, const redisReply *k,
				  uint64_t *n),
		       uint64_t *n)
{
	for (unsigned int i = 0; i < v->topo.n_nodes; i++) {
		char cursor[32] = "0";

		do {
			redisReply *r = redisCommand(
				v->c[i], "SCAN %s MATCH %s COUNT 1000", cursor,
				pattern);

			cr_assert(r && r->type == REDIS_REPLY_ARRAY &&
				  r->elements == 2);
			snprintf(cursor, sizeof(cursor), "%s",
				 r->element[0]->str);
			for (size_t j = 0; j < r->element[1]->elements; j++)
				fn(v->c[i], r->element[1]->element[j], n);
			freeReplyObject(r);
		} while (strcmp(cursor, "0") != 0);
	}
}

/* n[0..2]: keys of 16 bytes, of 40, others; segments are not counted. */
static void count_key(redisContext *c, const redisReply *k, uint64_t *n)
{
	(void)c;
	if (k->len >= NS_SEGMENT_PREFIX_LEN &&
	    memcmp(k->str, NS_SEGMENT_PREFIX, NS_SEGMENT_PREFIX_LEN) == 0)
		return;
	n[k->len == NS_KEY_LEN ? 0 : k->len == NS_KEY_V6_LEN ? 1 : 2]++;
}

/* Keys under ns:* that are not segments, by length: 16 and 40 bytes. */
static void store_count_keys(struct store_view *v, uint64_t *k16, uint64_t *k40,
			     uint64_t *other)
{
	uint64_t n[3] = {0};

	store_scan(v, "ns:*", count_key, n);
	*k16 = n[0];
	*k40 = n[1];
	*other = n[2];
}

/* Every flow against the plan: a live flow's key (on its slot's master)
 * holds its last record with a TTL, a deleted flow has no key. Returns
 * the flows that do not match. */
static uint32_t store_check_range(struct store_view *v, const struct plan *p,
				  uint32_t from, uint32_t to)
{
	uint32_t bad = 0, f;

	for (f = from; f < to; f++) {
		const struct ns_rec *want = plan_last(p, f);
		uint8_t key[NS_KEY_MAX];
		size_t key_len = ns_key_of(&want->s, key);
		unsigned int node =
			v->topo.cluster
				? v->topo.slot_node[ns_key_slot(key, key_len)]
				: 0;
		redisReply *g =
			redisCommand(v->c[node], "GET %b", key, key_len);
		redisReply *t =
			redisCommand(v->c[node], "PTTL %b", key, key_len);
		struct ns_rec got;

		cr_assert(g && t);
		if (want->s.event == NS_EV_DELETE) {
			bad += g->type != REDIS_REPLY_NIL;
		} else if (g->type != REDIS_REPLY_STRING ||
			   ns_record_decode_rec((const uint8_t *)g->str, g->len,
						&got) < 0 ||
			   !same_rec(&got, want) ||
			   t->type != REDIS_REPLY_INTEGER || t->integer <= 0 ||
			   t->integer > (long long)want->s.timeout_ms) {
			if (bad < 5)
				cr_log_error("flow %u (%s): wrong or missing "
					     "in the store (type %d)",
					     f, flow_is_v6(f) ? "IPv6" : "IPv4",
					     g->type);
			bad++;
		}
		freeReplyObject(g);
		freeReplyObject(t);
	}
	return bad;
}

static uint32_t store_check_flows(struct store_view *v, const struct plan *p)
{
	return store_check_range(v, p, 0, p->n_flows);
}

/* n[0..2]: the segment's records, its IPv6 ones, 1 if it does not
 * decode whole. */
static void count_segment(redisContext *c, const redisReply *k, uint64_t *n)
{
	redisReply *g = redisCommand(c, "GET %b", k->str, k->len);
	struct ns_batch_hdr h;
	struct ns_batch_iter it;
	const uint8_t *body;
	struct ns_rec rec;
	int rc;

	cr_assert(g && g->type == REDIS_REPLY_STRING);
	if (ns_batch_decode((const uint8_t *)g->str, g->len, &h, &body) != 0) {
		n[2]++;
		freeReplyObject(g);
		return;
	}
	ns_batch_iter_init(&it, body, h.body_len);
	while ((rc = ns_batch_iter_next_rec(&it, &rec)) == 1) {
		n[0]++;
		n[1] += ns_session_lines(&rec.s) == 2;
	}
	n[2] += rc < 0;
	freeReplyObject(g);
}

/* Log layout: every segment decodes whole; the records they hold, and
 * how many of them are IPv6. */
static void store_count_segments(struct store_view *v, uint64_t *records,
				 uint64_t *v6, uint64_t *bad)
{
	uint64_t n[3] = {0};

	store_scan(v, "ns:l:*", count_segment, n);
	*records = n[0];
	*v6 = n[1];
	*bad = n[2];
}

/* ---- a subscriber ----------------------------------------------------- */

struct sub {
	redisContext *c[NSA_MAX_NODES];
	unsigned int n;
	pthread_t thread;
	int stop;
	const struct plan *plan;
	uint8_t *next_ev;
	uint64_t n_records, n_v6;
	uint64_t n_batches, bad_decode, bad_order;
};

static void sub_batch(struct sub *s, const uint8_t *buf, size_t len)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	struct ns_batch_iter it;
	struct ns_rec r;
	int rc;

	if (ns_batch_decode(buf, len, &h, &body) != 0) {
		s->bad_decode++;
		return;
	}
	s->n_batches++;
	ns_batch_iter_init(&it, body, h.body_len);
	while ((rc = ns_batch_iter_next_rec(&it, &r)) == 1) {
		uint32_t f = rec_flow(&r);
		const struct plan *p = s->plan;
		uint8_t n_ev =
			f < p->n_flows
				? __atomic_load_n(&p->n_ev[f], __ATOMIC_ACQUIRE)
				: 0;

		if (f >= p->n_flows || s->next_ev[f] >= n_ev ||
		    !same_rec(&r,
			      &p->ev[(size_t)f * MAX_EVENTS + s->next_ev[f]]))
			s->bad_order++;
		else
			s->next_ev[f]++;
		s->n_v6 += ns_session_lines(&r.s) == 2;
		NSDP_STAT_INC(s->n_records);
	}
	if (rc < 0)
		s->bad_decode++;
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
			void *v;

			if (!(pfd[i].revents & POLLIN))
				continue;
			if (redisBufferRead(s->c[i]) != REDIS_OK)
				return NULL;
			while (redisGetReplyFromReader(s->c[i], &v) ==
				       REDIS_OK &&
			       v != NULL) {
				redisReply *r = v;

				if (r->type == REDIS_REPLY_ARRAY &&
				    r->elements == 3 &&
				    r->element[0]->type == REDIS_REPLY_STRING &&
				    (strcmp(r->element[0]->str, "smessage") ==
					     0 ||
				     strcmp(r->element[0]->str, "message") ==
					     0))
					sub_batch(s,
						  (const uint8_t *)r->element[2]
							  ->str,
						  r->element[2]->len);
				freeReplyObject(r);
			}
		}
	}
	return NULL;
}

static void sub_start(struct sub *s, int port, const struct plan *p)
{
	memset(s, 0, sizeof(*s));
	s->plan = p;
	s->next_ev = calloc(p->n_flows, 1);
	s->n = nst_subscribe_every_master(port, NSA_PUBLISH_AUTO, s->c);
	cr_assert_eq(pthread_create(&s->thread, NULL, sub_main, s), 0);
}

static void sub_finish(struct sub *s, uint64_t expect)
{
	uint64_t deadline = mono_ms() + 15000;
	unsigned int i;

	while (NSDP_STAT_READ(s->n_records) < expect && mono_ms() < deadline)
		nsdp_sleep_ms(5);
	nsdp_sleep_ms(100);
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	pthread_join(s->thread, NULL);
	for (i = 0; i < s->n; i++)
		redisFree(s->c[i]);
}

/* ---- a standby -------------------------------------------------------- */

/* cap_v6: its [standby] table_capacity_v6. */
static struct nsa_standby *standby_up(int port, enum nsa_layout layout,
				      uint32_t cap_v6)
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
	conf.store.layout = layout;
	conf.table_capacity = 65536;
	conf.table_capacity_v6 = cap_v6;
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

/* Flows whose entry in t is not what the plan ends with. */
static uint32_t table_check_flows(const struct nsdp_table *t,
				  const struct plan *p)
{
	uint32_t f, bad = 0;

	for (f = 0; f < p->n_flows; f++) {
		const struct ns_rec *want = plan_last(p, f);
		struct ns_rec got;
		int rc;

		if (ns_session_lines(&want->s) == 2)
			rc = nsdp_table_lookup_v6(
				t, want->s.proto, want->v6.orig_saddr,
				want->s.orig.sport, want->v6.orig_daddr,
				want->s.orig.dport, &got);
		else
			rc = nsdp_table_lookup(t, want->s.proto, &want->s.orig,
					       &got.s);
		if (want->s.event == NS_EV_DELETE)
			bad += rc == 0;
		else
			bad += rc != 0 || got.s.family != want->s.family ||
			       !ns_session_equal_state(&got.s, &want->s);
	}
	return bad;
}

/* Wait until the standby's table holds exactly the plan's live sessions. */
static void expect_standby_holds(struct nsa_standby *sb, const struct plan *p)
{
	const struct nsdp_table *t = nsa_standby_table(sb);
	uint64_t deadline = mono_ms() + 15000, live4, live6;
	struct nsdp_table_stats ts;
	uint32_t bad;

	plan_live(p, &live4, &live6);
	do {
		nsdp_table_stats(t, &ts);
		bad = table_check_flows(t, p);
		if (bad == 0 && ts.live == live4 + live6 && ts.live_v6 == live6)
			break;
		nsdp_sleep_ms(50);
	} while (mono_ms() < deadline);
	cr_expect_eq(ts.live, live4 + live6, "standby sessions");
	cr_expect_eq(ts.live_v6, live6, "standby IPv6 sessions");
	cr_expect_eq(ts.full_drops, 0, "standby refusals");
	cr_expect_eq(bad, 0, "flows not matching the standby");
}

/* ---- scenarios -------------------------------------------------------- */

static void conf_for(struct nsa_config *c, int port, enum nsa_layout layout)
{
	memset(c, 0, sizeof(*c));
	c->role = NSA_ROLE_ACTIVE;
	c->gateway_id = 7;
	c->epoch = 1;
	snprintf(c->store.seeds[0].host, NSA_HOST_MAX, "127.0.0.1");
	c->store.seeds[0].port = (uint16_t)port;
	c->store.n_seeds = 1;
	c->store.connect_timeout_ms = 1000;
	c->store.publish = NSA_PUBLISH_AUTO;
	c->store.layout = layout;
	c->workers = 2;
	/* small batches: many a burst ends on an IPv6 record's head */
	c->batch_size = 37;
	c->flush_us = 1000;
	c->max_inflight = 8;
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

/* Cut the standby's subscriptions: it subscribes again and resyncs every
 * master; wait for those resyncs. */
static void resync_forced(struct nsa_standby *sb, int port)
{
	uint64_t deadline = mono_ms() + 15000, before;
	struct nsa_standby_stats st;
	struct store_view v;
	long long killed = 0;
	unsigned int i;

	nsa_standby_stats(sb, &st);
	before = st.resyncs;
	store_view_open(&v, port);
	/* The standby drops the others as the first one closes. */
	for (i = 0; i < v.topo.n_nodes; i++) {
		redisReply *r = redisCommand(v.c[i], "CLIENT KILL TYPE pubsub");

		cr_assert(r && r->type == REDIS_REPLY_INTEGER, "node %u", i);
		killed += r->integer;
		freeReplyObject(r);
	}
	cr_assert_gt(killed, 0, "no subscription cut");
	do {
		nsdp_sleep_ms(20);
		nsa_standby_stats(sb, &st);
	} while ((st.resyncs < before + v.topo.n_nodes || !st.synced) &&
		 mono_ms() < deadline);
	cr_assert_geq(st.resyncs, before + v.topo.n_nodes, "resyncs");
	store_view_close(&v);
}

/* A standby started on the store alone: its initial load (a resync of
 * every master) gives it exactly the plan's live sessions. */
static void cold_load_holds(int port, enum nsa_layout layout,
			    const struct plan *p)
{
	struct nsa_standby *sb = standby_up(port, layout, 16384);
	struct nsdp_table_stats ts;
	uint64_t live4, live6;

	expect_standby_holds(sb, p);
	nsa_standby_free(sb);
	/* Without an IPv6 table its IPv6 sessions are refused and counted,
	 * as the live path counts them. */
	plan_live(p, &live4, &live6);
	sb = standby_up(port, layout, 0);
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	cr_expect_eq(ts.live, live4, "IPv4 sessions without an IPv6 table");
	cr_expect_eq(ts.full_drops, live6, "IPv6 sessions refused");
	nsa_standby_free(sb);
}

/* One compaction round over every master, no writer running. */
static void compact_round(int port)
{
	const struct nsa_compact_round rd = {
		.id = 0xf00000a6u, .gen = 1, .epoch = 1, .grace_ms = 1000};
	struct nsa_compact_result res;
	struct store_view v;
	char err[256] = "";
	int rc;

	store_view_open(&v, port);
	v.sc.layout = NSA_LAYOUT_LOG;
	rc = nsa_compact_all(&v.sc, &v.topo, &rd, &res, err, sizeof(err));
	store_view_close(&v);
	cr_assert_eq(rc, 0, "compaction round: %s", err);
	cr_expect_gt(res.live, 0, "sessions in the checkpoints");
}

static void replicate_mixed(int port, enum nsa_layout layout)
{
	struct nsdp_lane **lanes = lanes_create(2, 4096);
	struct nsa_active_stats st;
	struct store_view v;
	struct nsa_config c;
	struct nsa_active *a;
	struct nsa_standby *sb;
	uint64_t live4, live6, k16, k40, other;
	struct plan p;
	struct sub s;
	uint32_t f;

	store_up(port, 3);
	plan_init(&p, 20000);
	conf_for(&c, port, layout);
	sub_start(&s, port, &p);
	sb = standby_up(port, layout, 16384);
	a = nsa_active_create(&c, lanes, 2);
	cr_assert_not_null(a);
	cr_assert_eq(nsa_active_start(a), 0);
	plan_write_standard(&p, lanes, 2);
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_assert_eq(st.records, p.n_records);
	cr_assert_eq(st.acked, p.n_records);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.inflight, 0);

	sub_finish(&s, p.n_records);
	cr_expect_eq(s.bad_decode, 0, "undecodable batches");
	cr_expect_eq(s.bad_order, 0, "records out of per-flow order");
	for (f = 0; f < p.n_flows; f++)
		cr_expect_eq(s.next_ev[f], p.n_ev[f], "flow %u notified", f);
	cr_assert_eq(s.n_records, p.n_records);
	cr_assert_eq(s.n_v6, p.n_v6);
	cr_assert_gt(p.n_v6, 0);
	free(s.next_ev);

	plan_live(&p, &live4, &live6);
	store_view_open(&v, port);
	cr_assert_eq(v.topo.n_nodes, 3);
	if (layout == NSA_LAYOUT_KEYS) {
		store_count_keys(&v, &k16, &k40, &other);
		cr_expect_eq(k16, live4, "IPv4 keys");
		cr_expect_eq(k40, live6, "IPv6 keys");
		cr_expect_eq(other, 0, "other keys");
		cr_expect_eq(store_check_flows(&v, &p), 0,
			     "flows not matching the store");
	} else {
		uint64_t records, v6, bad;

		store_count_keys(&v, &k16, &k40, &other);
		cr_expect_eq(k16 + k40 + other, 0, "session keys in the log");
		store_count_segments(&v, &records, &v6, &bad);
		cr_expect_eq(bad, 0, "undecodable segments");
		cr_expect_eq(records, p.n_records, "records in segments");
		cr_expect_eq(v6, p.n_v6, "IPv6 records in segments");
	}
	store_view_close(&v);
	expect_standby_holds(sb, &p);
	resync_forced(sb, port);
	expect_standby_holds(sb, &p);
	nsa_standby_free(sb);
	nsa_active_stop(a);
	/* What the active wrote, loaded cold (the initial load is a resync
	 * of every master): exact per family too; in the log layout again
	 * after a compaction round folded the segments into checkpoints. */
	cold_load_holds(port, layout, &p);
	if (layout == NSA_LAYOUT_LOG) {
		compact_round(port);
		cold_load_holds(port, layout, &p);
	}
	nsa_active_free(a);
	plan_free(&p);
}

Test(active6, keys_layout_stores_ipv6_sessions_under_their_40_byte_keys,
     .timeout = 180)
{
	replicate_mixed(PORT_KEYS, NSA_LAYOUT_KEYS);
}

Test(active6, log_layout_segments_hold_ipv6_records_whole, .timeout = 180)
{
	replicate_mixed(PORT_LOG, NSA_LAYOUT_LOG);
}

/* A plain server frozen, then killed, with records of both families in
 * flight: the writer resends every unacknowledged one, second lines and
 * all, to the restarted server. */
Test(active6, a_restarted_server_gets_every_unacknowledged_record,
     .timeout = 120)
{
	const uint32_t first = 2000, n = 6000;
	struct nsdp_lane **lanes = lanes_create(1, 32768);
	struct nsa_active_stats st;
	struct store_view v;
	struct nsa_config c;
	struct nsa_active *a;
	uint64_t deadline;
	char pid_path[3100];
	struct plan p;
	uint32_t f;
	int server;

	store_up(PORT_RESTART, 0);
	plan_init(&p, n);
	conf_for(&c, PORT_RESTART, NSA_LAYOUT_KEYS);
	c.workers = 1;
	a = nsa_active_create(&c, lanes, 1);
	cr_assert_not_null(a);
	cr_assert_eq(nsa_active_start(a), 0);
	for (f = 0; f < first; f++)
		plan_write(&p, lanes, 1, f, NS_EV_CREATE);
	cr_assert_eq(nsa_active_drain(a, 20000), 0, "first part drained");

	snprintf(pid_path, sizeof(pid_path), "%.3000s/%d/%d/redis.pid",
		 nst_build("tests/run"), PORT_RESTART, PORT_RESTART);
	server = nst_read_pid(pid_path);
	cr_assert_gt(server, 0, "no pid in %s", pid_path);
	cr_assert_eq(kill(server, SIGSTOP), 0);
	for (f = first; f < n; f++)
		plan_write(&p, lanes, 1, f, NS_EV_CREATE);
	deadline = mono_ms() + 10000;
	do {
		nsdp_sleep_ms(2);
		nsa_active_stats(a, &st);
	} while (st.inflight == 0 && mono_ms() < deadline);
	cr_assert_gt(st.inflight, 0, "records in flight at the freeze");
	cr_assert_eq(kill(server, SIGKILL), 0);
	nst_store_stop(PORT_RESTART);
	nsdp_sleep_ms(200);
	cr_assert_eq(nst_store_start(PORT_RESTART, 0, 0), 0);
	cr_assert_eq(nsa_active_drain(a, 60000), 0, "drained");
	nsa_active_stats(a, &st);
	cr_expect_gt(st.reconnects, 0);
	cr_expect_gt(st.resent, 0);
	cr_expect_eq(st.records, p.n_records);
	cr_expect_eq(st.acked, p.n_records);
	cr_expect_eq(st.dropped, 0);

	/* the first part went with the server; the rest was resent */
	store_view_open(&v, PORT_RESTART);
	cr_expect_eq(store_check_range(&v, &p, first, n), 0,
		     "flows written after the freeze not in the store");
	store_view_close(&v);
	nsa_active_stop(a);
	nsa_active_free(a);
	plan_free(&p);
}
