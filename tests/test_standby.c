/*
 * test_standby.c - the standby role against real Redis stores: the test
 * plays the active itself with a plain hiredis client (SET/DEL of keys and
 * SPUBLISH/PUBLISH of batches it builds, with proper sequence numbers) and
 * checks that the standby's table ends equal to what it wrote.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_active.h"
#include "nsa_cluster.h"
#include "nsa_compact.h"
#include "nsa_config.h"
#include "nsa_fence.h"
#include "nsa_logmerge.h"
#include "nsa_order.h"
#include "nsa_prio.h"
#include "nsa_standby.h"
#include "nsdp_time.h"
#include "nst_session.h"
#include "nst_skip.h"
#include "nst_store.h"

#define CLUSTER_PORT 7300
#define PLAIN_PORT 7310
/* The log layout's plain server (cold load). */
#define LOG_PLAIN_PORT 7720
/* The log layout's compaction under a cold load. */
#define LOG_COMPACT_PORT 7721
/* The log layout's cluster (resync). */
#define LOG_CLUSTER_PORT 7760
#define BATCH_RECORDS 256

/* ---- the simulated active --------------------------------------------- */

struct active {
	struct nsa_topology topo;
	redisContext *c[NSA_MAX_NODES];
	uint64_t seq[NSA_MAX_NODES];
	uint32_t publisher_id, gateway_id, epoch;
	/* what the active's table holds: index i -> live or not */
	struct ns_session *table;
	uint8_t *live;
	uint32_t size;
	const char *key; /* sign batches with this batch key (NULL: no) */
	/* When set, active_write copies the last batch it publishes here. */
	uint8_t *capture;
	size_t capture_len;
	/* [store] layout = log: active_write stores each batch as a segment
	 * (schema/FORMAT.md) under its seq, instead of SET/DEL per
	 * session. */
	int log;
};

static struct ns_session sess(uint32_t i, uint8_t event)
{
	struct ns_session s = nst_session(i % 3 ? 6 : 17, event, 1, 1, 60000,
					  nsdp_realtime_ns());

	nst_session_flow(&s, i);
	return s;
}

static void store_conf(struct nsa_store_conf *sc, int port,
		       enum nsa_publish_mode mode)
{
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->seeds[0].host, sizeof(sc->seeds[0].host), "127.0.0.1");
	sc->seeds[0].port = (uint16_t)port;
	sc->n_seeds = 1;
	sc->connect_timeout_ms = 1000;
	sc->publish = mode;
}

static void active_open(struct active *a, int port, enum nsa_publish_mode mode,
			uint32_t size)
{
	struct nsa_store_conf sc;
	char err[256];
	unsigned int i;

	memset(a, 0, sizeof(*a));
	store_conf(&sc, port, mode);
	cr_assert_eq(nsa_topology_fetch(&sc, &a->topo, err, sizeof(err)), 0,
		     "topology: %s", err);
	for (i = 0; i < a->topo.n_nodes; i++) {
		a->c[i] = redisConnect(a->topo.nodes[i].addr.host,
				       a->topo.nodes[i].addr.port);
		cr_assert(a->c[i] && !a->c[i]->err);
	}
	a->publisher_id = 77;
	a->gateway_id = 1;
	a->epoch = 1;
	a->size = size;
	a->table = calloc(size, sizeof(*a->table));
	a->live = calloc(size, 1);
}

static void active_close(struct active *a)
{
	unsigned int i;

	for (i = 0; i < a->topo.n_nodes; i++)
		redisFree(a->c[i]);
	free(a->table);
	free(a->live);
}

static unsigned int node_of(const struct active *a, const struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];

	ns_key_build(s->proto, &s->orig, key);
	return a->topo.slot_node[ns_key_slot(key, NS_KEY_LEN)];
}

static void drain(redisContext *c, unsigned int *pending)
{
	void *r;

	while (*pending) {
		cr_assert_eq(redisGetReply(c, &r), REDIS_OK);
		cr_assert(((redisReply *)r)->type != REDIS_REPLY_ERROR, "%s",
			  ((redisReply *)r)->str);
		freeReplyObject(r);
		(*pending)--;
	}
}

static void publish(struct active *a, unsigned int node, const uint8_t *buf,
		    size_t len, unsigned int *pending)
{
	char ch[NS_CHANNEL_MAX];

	nsa_topology_channel(&a->topo, node, ch);
	redisAppendCommand(a->c[node], "%s %s %b",
			   a->topo.sharded_pubsub ? "SPUBLISH" : "PUBLISH", ch,
			   buf, len);
	(*pending)++;
}

/* Log layout: store a batch of seq as node's segment (SET ... PX, the
 * longest timeout of its records: every session's is 60 s here). */
static void segment_set(struct active *a, unsigned int node, uint64_t seq,
			const uint8_t *buf, size_t len, unsigned int *pending)
{
	char key[NS_SEGMENT_KEY_MAX];

	cr_assert_gt(ns_segment_key(a->topo.nodes[node].channel_slot,
				    a->publisher_id, seq, key),
		     0);
	redisAppendCommand(a->c[node], "SET %s %b PX 60000", key, buf, len);
	(*pending)++;
}

/* Poll one counter of the standby's stats (its offset in struct
 * nsa_standby_stats) until it reaches want or timeout_s passes; its last
 * value. */
static uint64_t wait_stat(struct nsa_standby *sb, size_t field, uint64_t want,
			  double timeout_s)
{
	double end = nsdp_now_s() + timeout_s;
	struct nsa_standby_stats st;
	uint64_t v;

	do {
		nsa_standby_stats(sb, &st);
		memcpy(&v, (const char *)&st + field, sizeof(v));
		if (v >= want)
			break;
		nsdp_sleep_ms(2);
	} while (nsdp_now_s() < end);
	return v;
}

#define WAIT_STAT(sb, f, want, secs) \
	wait_stat((sb), offsetof(struct nsa_standby_stats, f), (want), (secs))

/* Publish one hand-made batch on node 0's channel, with h's publisher,
 * gateway, epoch and seq: sessions [0, n) created anew, time-stamped
 * now, or at ts if ts is not 0. */
static void publish_created(struct active *a, struct ns_batch_hdr h,
			    unsigned int n, uint64_t ts)
{
	static uint8_t buf[NS_BATCH_MAX_LEN];
	size_t len = NS_BATCH_HDR_LEN;
	unsigned int pending = 0, i;

	for (i = 0; i < n; i++) {
		struct ns_session s = sess(i, NS_EV_CREATE);
		int l;

		if (ts)
			s.timestamp_ns = ts;
		l = ns_record_encode(&s, buf + len, sizeof(buf) - len);
		cr_assert_gt(l, 0);
		len += (size_t)l;
	}
	h.count = (uint16_t)n;
	h.body_len = (uint32_t)(len - NS_BATCH_HDR_LEN);
	h.channel_slot = a->topo.nodes[0].channel_slot;
	h.sent_ns = nsdp_realtime_ns();
	ns_batch_hdr_encode(&h, buf);
	publish(a, 0, buf, len, &pending);
	drain(a->c[0], &pending);
}

/* Write the sessions of indices idx[0..n) with event ev to the store (SET
 * or DEL) and, when notify, publish them in batches per master. */
static void active_write(struct active *a, const uint32_t *idx, uint32_t n,
			 uint8_t ev, int notify)
{
	static uint8_t batch[NSA_MAX_NODES][NS_BATCH_MAX_LEN];
	uint32_t count[NSA_MAX_NODES] = {0}, blen[NSA_MAX_NODES];
	unsigned int pending[NSA_MAX_NODES] = {0};
	unsigned int i;
	uint32_t k;

	for (i = 0; i < a->topo.n_nodes; i++)
		blen[i] = NS_BATCH_HDR_LEN;
	for (k = 0; k <= n; k++) {
		for (i = 0; i < a->topo.n_nodes; i++) {
			struct ns_batch_hdr h = {0};

			if ((!notify && !a->log) || count[i] == 0 ||
			    (k < n && count[i] < BATCH_RECORDS))
				continue;
			h.publisher_id = a->publisher_id;
			h.gateway_id = a->gateway_id;
			h.epoch = a->epoch;
			h.count = (uint16_t)count[i];
			h.seq = ++a->seq[i];
			h.body_len = blen[i] - NS_BATCH_HDR_LEN;
			h.flags = a->key ? NS_BATCH_F_HMAC : 0;
			h.channel_slot = a->topo.nodes[i].channel_slot;
			h.sent_ns = nsdp_realtime_ns();
			ns_batch_hdr_encode(&h, batch[i]);
			if (a->key) {
				cr_assert_eq(
					ns_batch_mac((const uint8_t *)a->key,
						     strlen(a->key), batch[i],
						     blen[i],
						     batch[i] + blen[i]),
					0);
				blen[i] += NS_BATCH_MAC_LEN;
			}
			if (a->log)
				segment_set(a, i, h.seq, batch[i], blen[i],
					    &pending[i]);
			if (notify)
				publish(a, i, batch[i], blen[i], &pending[i]);
			if (a->capture) {
				memcpy(a->capture, batch[i], blen[i]);
				a->capture_len = blen[i];
			}
			count[i] = 0;
			blen[i] = NS_BATCH_HDR_LEN;
		}
		if (k == n)
			break;
		{
			struct ns_session s = sess(idx[k], ev);
			uint8_t key[NS_KEY_LEN];
			unsigned int nd = node_of(a, &s);
			int len;

			s.epoch = a->epoch;
			if (!notify && !a->log)
				blen[nd] = NS_BATCH_HDR_LEN;
			ns_key_build(s.proto, &s.orig, key);
			len = ns_record_encode(&s, batch[nd] + blen[nd],
					       NS_BATCH_MAX_LEN - blen[nd]);
			cr_assert_gt(len, 0);
			/* Log layout: the batch's segment is the write. */
			if (!a->log && ev == NS_EV_DELETE)
				redisAppendCommand(a->c[nd], "DEL %b", key,
						   (size_t)NS_KEY_LEN);
			else if (!a->log)
				redisAppendCommand(a->c[nd], "SET %b %b PX %u",
						   key, (size_t)NS_KEY_LEN,
						   batch[nd] + blen[nd],
						   (size_t)len, s.timeout_ms);
			pending[nd] += !a->log;
			blen[nd] += (uint32_t)len;
			count[nd]++;
			a->table[idx[k]] = s;
			a->live[idx[k]] = ev != NS_EV_DELETE;
		}
		if (k % 4096 == 4095)
			for (i = 0; i < a->topo.n_nodes; i++)
				drain(a->c[i], &pending[i]);
	}
	for (i = 0; i < a->topo.n_nodes; i++)
		drain(a->c[i], &pending[i]);
}

/* The batches active_write_range(a, first, n, ..., 1) publishes: per
 * master, its sessions of the range in batches of BATCH_RECORDS. */
static uint64_t batches_of(const struct active *a, uint32_t first, uint32_t n)
{
	uint32_t count[NSA_MAX_NODES] = {0}, k;
	uint64_t batches = 0;
	unsigned int i;

	for (k = first; k < first + n; k++) {
		struct ns_session s = sess(k, NS_EV_CREATE);

		count[node_of(a, &s)]++;
	}
	for (i = 0; i < a->topo.n_nodes; i++)
		batches += (count[i] + BATCH_RECORDS - 1) / BATCH_RECORDS;
	return batches;
}

static void active_write_range(struct active *a, uint32_t first, uint32_t n,
			       uint8_t ev, int notify)
{
	uint32_t *idx = malloc(n * sizeof(*idx)), k;

	for (k = 0; k < n; k++)
		idx[k] = first + k;
	active_write(a, idx, n, ev, notify);
	free(idx);
}

/* The first n session indices from first whose keys live on node, into
 * idx. */
static void pick_on_node(const struct active *a, unsigned int node,
			 uint32_t first, uint32_t *idx, uint32_t n)
{
	uint32_t i, k = 0;

	for (i = first; i < a->size && k < n; i++) {
		struct ns_session s = sess(i, NS_EV_CREATE);

		if (node_of(a, &s) == node)
			idx[k++] = i;
	}
	cr_assert_eq(k, n, "only %u of %u sessions on node %u", k, n, node);
}

/* How many of the sessions idx[0..n) the standby's table holds. */
static uint32_t count_present(struct nsa_standby *sb, const struct active *a,
			      const uint32_t *idx, uint32_t n)
{
	struct ns_session out;
	uint32_t k, found = 0;

	for (k = 0; k < n; k++)
		found += nsdp_table_lookup(nsa_standby_table(sb),
					   a->table[idx[k]].proto,
					   &a->table[idx[k]].orig, &out) == 0;
	return found;
}

/* 1 when the standby's table equals the active's. */
static int table_exact(struct nsdp_table *t, const struct active *a)
{
	struct nsdp_table_stats st;
	uint64_t live = 0;
	uint32_t i;

	for (i = 0; i < a->size; i++)
		live += a->live[i];
	nsdp_table_stats(t, &st);
	if (st.live != live)
		return 0;
	for (i = 0; i < a->size; i++) {
		struct ns_session out;
		int rc = nsdp_table_lookup(t, a->table[i].proto,
					   &a->table[i].orig, &out);

		if (a->live[i] &&
		    (rc != 0 || !ns_session_equal_state(&out, &a->table[i])))
			return 0;
		if (!a->live[i] && rc == 0)
			return 0;
	}
	return 1;
}

/* 1 once the standby's table equals the active's, within timeout_s. */
static int wait_exact(struct nsa_standby *sb, const struct active *a,
		      double timeout_s)
{
	struct nsdp_table *t = nsa_standby_table(sb);
	double end = nsdp_now_s() + timeout_s;

	while (nsdp_now_s() < end) {
		if (table_exact(t, a))
			return 1;
		nsdp_sleep_ms(20);
	}
	return table_exact(t, a);
}

static int wait_synced(struct nsa_standby *sb, double timeout_s)
{
	double end = nsdp_now_s() + timeout_s;
	struct nsa_standby_stats st;

	do {
		nsa_standby_stats(sb, &st);
		if (st.synced)
			return 1;
		nsdp_sleep_ms(5);
	} while (nsdp_now_s() < end);
	return 0;
}

static void config_key(struct nsa_config *conf, const char *key)
{
	conf->batch_key_len = key ? strlen(key) : 0;
	if (key)
		memcpy(conf->batch_key, key, conf->batch_key_len);
}

/* [standby] topology_check_ms of the standbys the next tests start. */
static unsigned int topology_check_ms = 1000;
/* [standby] priority of the standbys started from now on. */
static int standby_priority = NSA_PRIORITY_NORMAL;
/* [store] layout of the standbys the next tests start. */
static enum nsa_layout standby_layout = NSA_LAYOUT_KEYS;

/* A standby started on port with batch key key and store user and
 * password (each NULL: none). */
static struct nsa_standby *
standby_start_as(int port, enum nsa_publish_mode mode, uint32_t capacity,
		 const char *key, const char *user, const char *password)
{
	static struct nsa_config conf; /* the standby keeps it */
	struct nsa_standby *sb;

	nsa_config_defaults(&conf);
	conf.role = NSA_ROLE_STANDBY;
	conf.gateway_id = 1;
	store_conf(&conf.store, port, mode);
	conf.store.layout = standby_layout;
	if (user)
		snprintf(conf.store.user, sizeof(conf.store.user), "%s", user);
	if (password)
		snprintf(conf.store.password, sizeof(conf.store.password), "%s",
			 password);
	conf.table_capacity = capacity;
	/* One host, one clock: a batch sent half a second before the
	 * subscription began is a replay. */
	conf.clock_slack_ms = 500;
	conf.topology_check_ms = topology_check_ms;
	conf.priority = standby_priority;
	config_key(&conf, key);
	sb = nsa_standby_create(&conf);
	cr_assert_not_null(sb);
	cr_assert_eq(nsa_standby_start(sb), 0);
	return sb;
}

static struct nsa_standby *standby_start(int port, enum nsa_publish_mode mode,
					 uint32_t capacity)
{
	return standby_start_as(port, mode, capacity, NULL, NULL, NULL);
}

/* A standby on port, synced (its cold load done) within 10 s. */
static struct nsa_standby *standby_synced(int port, enum nsa_publish_mode mode,
					  uint32_t capacity)
{
	struct nsa_standby *sb = standby_start(port, mode, capacity);

	cr_assert(wait_synced(sb, 10), "standby did not sync");
	return sb;
}

/* An active of size sessions and a synced standby of capacity. */
static struct nsa_standby *pair_open(struct active *a, int port,
				     enum nsa_publish_mode mode, uint32_t size,
				     uint32_t capacity)
{
	active_open(a, port, mode, size);
	return standby_synced(port, mode, capacity);
}

/* pair_open() on the cluster with sessions 0..n-1 created and the
 * standby's table equal to the active's; room for n + more sessions. */
static struct nsa_standby *pair_synced(struct active *a, uint32_t n,
				       uint32_t more)
{
	struct nsa_standby *sb =
		pair_open(a, CLUSTER_PORT, NSA_PUBLISH_AUTO, n + more, 100000);

	active_write_range(a, 0, n, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, a, 10));
	return sb;
}

static void pair_close(struct nsa_standby *sb, struct active *a)
{
	nsa_standby_free(sb);
	active_close(a);
}

/* Assert that looking sessions [first, end) of the active up in the
 * standby's table returns rc: 0 (there) or -ENOENT (not). */
static void assert_lookups(struct nsa_standby *sb, const struct active *a,
			   uint32_t first, uint32_t end, int rc)
{
	struct ns_session out;

	for (uint32_t i = first; i < end; i++)
		cr_assert_eq(nsdp_table_lookup(nsa_standby_table(sb),
					       a->table[i].proto,
					       &a->table[i].orig, &out),
			     rc, "session %u", i);
}

/* How the standby's table differs from the active's: sessions missing or
 * wrong, and live sessions the active does not have. */
static void table_diff(struct nsdp_table *t, const struct active *a,
		       uint64_t *missing, uint64_t *extra)
{
	struct nsdp_table_stats st;
	uint64_t found = 0;
	uint32_t i;

	*missing = 0;
	for (i = 0; i < a->size; i++) {
		struct ns_session out;
		int rc = nsdp_table_lookup(t, a->table[i].proto,
					   &a->table[i].orig, &out);

		if (a->live[i] && rc == 0 &&
		    ns_session_equal_state(&out, &a->table[i]))
			found++;
		else if (a->live[i])
			(*missing)++;
	}
	nsdp_table_stats(t, &st);
	*extra = st.live - found;
}

/* Wait (10 s) for the standby's table to equal the active's; else fail
 * saying when, how many sessions are missing or wrong and how many extra,
 * and the standby's gaps and resyncs. */
__attribute__((format(printf, 3, 4))) static void
assert_exact(struct nsa_standby *sb, const struct active *a, const char *when,
	     ...)
{
	struct nsa_standby_stats st;
	uint64_t missing, extra;
	char what[128];
	va_list ap;

	if (wait_exact(sb, a, 10))
		return;
	va_start(ap, when);
	vsnprintf(what, sizeof(what), when, ap);
	va_end(ap);
	table_diff(nsa_standby_table(sb), a, &missing, &extra);
	nsa_standby_stats(sb, &st);
	cr_assert_fail("%s: %lu sessions missing or wrong, %lu extra (%lu "
		       "resyncs, %lu gaps)",
		       what, (unsigned long)missing, (unsigned long)extra,
		       (unsigned long)st.resyncs, (unsigned long)st.gaps);
}

/* ---- resharding by hand ---------------------------------------------------- */

static redisReply *cmd_ok(redisContext *c, int argc, const char **argv,
			  const size_t *lens)
{
	redisReply *r = redisCommandArgv(c, argc, argv, lens);

	cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", argv[0],
		  r ? r->str : c->errstr);
	return r;
}

static void node_id(redisContext *c, char id[41])
{
	redisReply *r = redisCommand(c, "CLUSTER MYID");

	cr_assert(r && r->type == REDIS_REPLY_STRING && r->len == 40);
	memcpy(id, r->str, 41);
	freeReplyObject(r);
}

static void setslot(redisContext *c, unsigned int slot, const char *how,
		    const char *id)
{
	char s[8];
	const char *argv[] = {"CLUSTER", "SETSLOT", s, how, id};

	snprintf(s, sizeof(s), "%u", slot);
	freeReplyObject(cmd_ok(c, 5, argv, NULL));
}

/* Move slots [first, last] from master from to master to as
 * redis-cli --cluster reshard does: IMPORTING on to, MIGRATING on from,
 * MIGRATE of the keys, then the slot given to to on every master. With
 * half, only every other key of the range moves and the slots stay
 * MIGRATING/IMPORTING. Returns how many keys moved. */
static unsigned int move_slots(struct active *a, unsigned int from,
			       unsigned int to, unsigned int first,
			       unsigned int last, int half)
{
	const struct nsa_addr *dst = &a->topo.nodes[to].addr;
	char src_id[41], dst_id[41], port[8], slot[8];
	unsigned int s, i, k = 0, moved = 0;

	node_id(a->c[from], src_id);
	node_id(a->c[to], dst_id);
	snprintf(port, sizeof(port), "%u", dst->port);
	for (s = first; s <= last; s++) {
		const char *list[] = {"CLUSTER", "GETKEYSINSLOT", slot, "1000"};
		redisReply *keys;

		setslot(a->c[to], s, "IMPORTING", src_id);
		setslot(a->c[from], s, "MIGRATING", dst_id);
		snprintf(slot, sizeof(slot), "%u", s);
		keys = cmd_ok(a->c[from], 4, list, NULL);
		for (i = 0; i < keys->elements; i++, k++) {
			const char *argv[] = {"MIGRATE", dst->host,
					      port,	 "",
					      "0",	 "5000",
					      "KEYS",	 keys->element[i]->str};
			size_t lens[8];
			unsigned int j;

			if (half && k % 2)
				continue;
			for (j = 0; j < 8; j++)
				lens[j] = strlen(argv[j]);
			lens[7] = keys->element[i]->len;
			freeReplyObject(cmd_ok(a->c[from], 8, argv, lens));
			moved++;
		}
		freeReplyObject(keys);
		if (half)
			continue;
		setslot(a->c[to], s, "NODE", dst_id);
		setslot(a->c[from], s, "NODE", dst_id);
		for (i = 0; i < a->topo.n_nodes; i++)
			if (i != from && i != to)
				setslot(a->c[i], s, "NODE", dst_id);
	}
	return moved;
}

/* The active follows the store's new slot map (its masters and their
 * channels unchanged). */
static void active_refetch(struct active *a)
{
	struct nsa_store_conf sc;
	struct nsa_topology t;
	char err[256];
	unsigned int i;

	store_conf(&sc, a->topo.nodes[0].addr.port, NSA_PUBLISH_AUTO);
	cr_assert_eq(nsa_topology_fetch(&sc, &t, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(t.n_nodes, a->topo.n_nodes);
	for (i = 0; i < t.n_nodes; i++) {
		cr_assert(nsa_addr_equal(&t.nodes[i].addr,
					 &a->topo.nodes[i].addr));
		cr_assert_eq(t.nodes[i].channel_slot,
			     a->topo.nodes[i].channel_slot);
	}
	a->topo = t;
}

/* Up to n indices in [0, size) of live sessions on master node, in slots
 * below below; returns how many. */
static uint32_t sessions_on(const struct active *a, unsigned int node,
			    unsigned int below, uint32_t *idx, uint32_t n)
{
	uint32_t i, m = 0;

	for (i = 0; i < a->size && m < n; i++) {
		uint8_t key[NS_KEY_LEN];

		if (!a->live[i] || node_of(a, &a->table[i]) != node)
			continue;
		ns_key_build(a->table[i].proto, &a->table[i].orig, key);
		if (ns_key_slot(key, NS_KEY_LEN) < below)
			idx[m++] = i;
	}
	return m;
}

/* Up to n indices from first on whose sessions' slots are below below
 * (new sessions, kept out of slots being moved); returns how many. */
/* The first n of sessions 0..count-1 whose key's slot is from or above. */
static uint32_t sessions_from_slot(const struct active *a, uint32_t count,
				   unsigned int from, uint32_t *idx, uint32_t n)
{
	uint32_t i, m = 0;

	for (i = 0; i < count && m < n; i++) {
		uint8_t key[NS_KEY_LEN];

		ns_key_build(a->table[i].proto, &a->table[i].orig, key);
		if (ns_key_slot(key, NS_KEY_LEN) >= from)
			idx[m++] = i;
	}
	return m;
}

static uint32_t fresh_below(uint32_t first, unsigned int below, uint32_t *idx,
			    uint32_t n)
{
	uint32_t i, m = 0;

	for (i = first; m < n; i++) {
		struct ns_session s = sess(i, NS_EV_CREATE);
		uint8_t key[NS_KEY_LEN];

		ns_key_build(s.proto, &s.orig, key);
		if (ns_key_slot(key, NS_KEY_LEN) < below)
			idx[m++] = i;
	}
	return m;
}

/* A test run in one store layout, on its own store; no pointers (a
 * parameter is copied into the test's process). */
struct layout_param {
	enum nsa_layout layout;
	int port;
};

/* The tests on a 3-master cluster that run in both store layouts, each on
 * its own store (no pointers: the parameter is copied into the test's
 * process). */
static struct layout_param cluster_layouts[] = {
	{NSA_LAYOUT_KEYS, CLUSTER_PORT},
	{NSA_LAYOUT_LOG, LOG_CLUSTER_PORT},
};

#define IN_BOTH_LAYOUTS(test)                                                  \
	ParameterizedTestParameters(standby, test)                             \
	{                                                                      \
		return cr_make_param_array(                                    \
			struct layout_param, cluster_layouts,                  \
			sizeof(cluster_layouts) / sizeof(cluster_layouts[0])); \
	}

/* ---- fixtures ------------------------------------------------------------ */

/* A cluster is the one the last test left, emptied, unless that test
 * changed its shape (moved slots); a plain server starts anew (0.4 s). */
static void store_fresh(int port, int masters)
{
	if (masters)
		cr_assert_eq(nst_store_reuse(port, masters), 0);
	else
		cr_assert_eq(nst_store_start_fresh(port, masters, 0), 0);
}

static void cluster_up(void)
{
	cr_assert_eq(nst_eal_init(1024), 0);
	store_fresh(CLUSTER_PORT, 3);
}

/* The clusters run on for the next test (store_fresh). */
static void cluster_down(void)
{
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	nst_store_stop(CLUSTER_PORT);
	nst_store_stop(LOG_CLUSTER_PORT);
}

/* A fresh 3-master cluster in p's layout, that of the standbys the test
 * starts; the test's active is told once open (a.log). */
static void layout_cluster_up(const struct layout_param *p)
{
	cr_assert_eq(nst_eal_init(1024), 0);
	store_fresh(p->port, 3);
	standby_layout = p->layout;
}

static void layout_stores_down(void)
{
}

static void plain_up(void)
{
	cr_assert_eq(nst_eal_init(1024), 0);
	store_fresh(PLAIN_PORT, 0);
}

static void plain_down(void)
{
	nst_store_stop(PLAIN_PORT);
}

/* ---- tests --------------------------------------------------------------- */

static uint64_t rank_of(double p, uint64_t n)
{
	double r = p / 100.0 * (double)n;
	uint64_t k = (uint64_t)r;

	return (double)k < r ? k + 1 : k;
}

static void lag_total(struct nsa_standby_stats *st, uint64_t us)
{
	struct nsa_lag l = {.total_us = us};

	nsa_standby_lag_record(st, &l);
}

Test(standby, lag_percentiles_are_upper_bounds_within_a_few_percent)
{
	static const double ps[] = {1, 10, 25, 50, 75, 90, 99, 99.9};
	static struct nsa_standby_stats st;
	const uint64_t n = 300000;
	uint64_t v, want, got;
	unsigned int i;

	/* Lags 1..n us, once each: the p-th percentile is its rank. */
	memset(&st, 0, sizeof(st));
	for (v = 1; v <= n; v++)
		lag_total(&st, v);
	cr_assert_eq(st.lag_count, n);
	cr_assert_eq(st.lag_max_us, n);
	cr_assert_eq(st.lag_sum_us, n * (n + 1) / 2);
	for (i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		want = rank_of(ps[i], n);
		got = nsa_standby_lag_percentile_us(&st, ps[i]);
		cr_assert_geq(got, want, "p%g: %lu < %lu", ps[i],
			      (unsigned long)got, (unsigned long)want);
		cr_assert_leq(got, want + want / 32, "p%g: %lu for %lu", ps[i],
			      (unsigned long)got, (unsigned long)want);
	}
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 100), n);

	/* Small lags are exact; lags past the top count as the maximum. */
	memset(&st, 0, sizeof(st));
	for (v = 0; v < 20; v++)
		lag_total(&st, v);
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 50), 9);
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 0), 0);
	lag_total(&st, 1ull << 40);
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 100), 1ull << 40);
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 90), 18);

	memset(&st, 0, sizeof(st));
	cr_assert_eq(nsa_standby_lag_percentile_us(&st, 99), 0);
	cr_assert_eq(st.lag_parts_count, 0);
}

/* The two parts of a lag (until sent, from then on) have histograms of
 * their own, counted only for records whose batch said when it was sent. */
Test(standby, the_lags_parts_are_counted_apart)
{
	static struct nsa_standby_stats st;
	struct nsa_lag l = {0};
	uint64_t v;

	memset(&st, 0, sizeof(st));
	for (v = 1; v <= 100; v++) {
		l.send_us = v;
		l.deliver_us = 1000 + v;
		l.total_us = l.send_us + l.deliver_us;
		nsa_standby_lag_record(&st, &l);
	}
	l.send_us = l.deliver_us = 0;
	l.total_us = 5;
	nsa_standby_lag_record(&st, &l);
	cr_assert_eq(st.lag_count, 101);
	cr_assert_eq(st.lag_parts_count, 100);
	cr_assert_eq(nsa_standby_lag_part_percentile_us(&st, 1, 100), 100);
	cr_assert_eq(nsa_standby_lag_part_percentile_us(&st, 0, 100), 1100);
	cr_assert_eq(nsa_standby_lag_part_percentile_us(&st, 1, 10), 10);
	v = nsa_standby_lag_part_percentile_us(&st, 0, 50);
	cr_assert(v >= 1050 && v <= 1050 + 1050 / 32, "p50 %lu",
		  (unsigned long)v);
}

/* A batch of an epoch below its gateway pair's on its channel is dropped;
 * the first of each such epoch is reported (the standby logs it once) with
 * the epoch known, the others of the same epoch are not. The gateways of
 * one pair (gateway_id >> 8) share its epoch: the other node's older one
 * is fenced too; other pairs and other channels are apart. A newer
 * epoch is told once per channel (NSA_ORDER_ROSE). */
Test(standby, an_older_epoch_is_dropped_and_told_once_per_epoch)
{
	struct nsa_order *o = calloc(1, sizeof(*o));
	struct ns_batch_hdr h = {.gateway_id = 2, .epoch = 512, .seq = 1};
	uint32_t known = 0;

	cr_assert_not_null(o);
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), 0);
	h.epoch = 256;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), NSA_ORDER_FENCED_NEW);
	cr_assert_eq(known, 512);
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), -1);
	h.epoch = 257;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), NSA_ORDER_FENCED_NEW);
	h.gateway_id = 1;
	h.epoch = 256 + 1;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), -1);
	h.epoch = 1;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), NSA_ORDER_FENCED_NEW);
	cr_assert_eq(known, 512);
	h.gateway_id = 1 << 8 | 2;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), 0);
	/* Another channel: nothing orders batches across channels, so the
	 * older epoch there is not fenced by what came on channel 7. */
	h.gateway_id = 1;
	h.epoch = 256;
	cr_assert_eq(nsa_order_epoch(o, 8, &h, &known), 0);
	/* The first batch of a newer epoch is told, with the one before;
	 * the next of that epoch is not. */
	h.gateway_id = 2;
	h.epoch = 768;
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), NSA_ORDER_ROSE);
	cr_assert_eq(known, 512);
	cr_assert_eq(nsa_order_epoch(o, 7, &h, &known), 0);
	free(o);
}

/* The sequence memory is never wiped: full, it forgets the pair seen least
 * recently and refuses any batch of an unknown pair sent at or before that
 * pair's newest; a batch sent before its subscription began is old. */
Test(standby, sequence_memory_forgets_only_the_least_recent_pair)
{
	struct nsa_order *o = calloc(1, sizeof(*o));
	struct ns_batch_hdr h = {.gateway_id = 1, .epoch = 1, .seq = 1};
	uint32_t i;

	cr_assert_not_null(o);
	for (i = 0; i < NSA_ORDER_MAX_PUBS; i++) {
		h.publisher_id = i;
		h.sent_ns = 1000 + i;
		cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_NEXT);
	}
	h = (struct ns_batch_hdr){.publisher_id = 0, .seq = 2, .sent_ns = 5000};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_NEXT);
	/* A new pair: publisher 1 (newest send 1001) is forgotten. */
	h = (struct ns_batch_hdr){
		.publisher_id = 5000, .seq = 9, .sent_ns = 6000};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_NEXT);
	cr_assert_eq(o->forgotten_ns, 1001);
	h = (struct ns_batch_hdr){.publisher_id = 1, .seq = 1, .sent_ns = 1001};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_STALE,
		     "a forgotten pair's batch came back");
	/* The others are still known: their batches again are stale. */
	for (i = 0; i < NSA_ORDER_MAX_PUBS; i++) {
		if (i == 1)
			continue;
		h = (struct ns_batch_hdr){
			.publisher_id = i, .seq = 1, .sent_ns = 1000 + i};
		cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_STALE,
			     "publisher %u", i);
	}
	/* Publisher 1 sending anew is a new pair again. */
	h = (struct ns_batch_hdr){.publisher_id = 1, .seq = 2, .sent_ns = 7000};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 0, 0), NSA_SEQ_NEXT);
	/* Sent before the subscription began (less the slack): old. */
	h = (struct ns_batch_hdr){
		.publisher_id = 9000, .seq = 1, .sent_ns = 7999};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 8000, 0), NSA_SEQ_STALE);
	h.sent_ns = 8000;
	cr_assert_eq(nsa_order_seq(o, 7, &h, 8000, 0), NSA_SEQ_NEXT);
	/* Version 1 carries no send time: only the sequence judges it. */
	h = (struct ns_batch_hdr){
		.publisher_id = 9001, .seq = 1, .version = NS_BATCH_V1};
	cr_assert_eq(nsa_order_seq(o, 7, &h, 8000, 0), NSA_SEQ_NEXT);
	cr_assert_eq(nsa_order_seq(o, 7, &h, 8000, 0), NSA_SEQ_STALE);
	free(o);
}

IN_BOTH_LAYOUTS(live_batches_reach_the_table)

ParameterizedTest(struct layout_param *p, standby, live_batches_reach_the_table,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;

	layout_cluster_up(p);
	active_open(&a, p->port, NSA_PUBLISH_AUTO, 5000);
	a.log = p->layout == NSA_LAYOUT_LOG;
	cr_assert_eq(a.topo.n_nodes, 3);
	sb = standby_synced(p->port, NSA_PUBLISH_AUTO, 100000);

	active_write_range(&a, 0, 5000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	active_write_range(&a, 0, 1000, NS_EV_DELETE, 1);
	active_write_range(&a, 1000, 1000, NS_EV_REFRESH, 1);
	cr_assert(wait_exact(sb, &a, 10));

	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.records, 7000);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.bad_messages, 0);
	cr_assert_eq(st.lag_count, 7000);
	cr_assert_gt(st.lag_sum_us, 0);
	printf("live: lag mean %lu us, p99 <= %lu us, max %lu us\n",
	       (unsigned long)(st.lag_sum_us / st.lag_count),
	       (unsigned long)nsa_standby_lag_percentile_us(&st, 99),
	       (unsigned long)st.lag_max_us);
	pair_close(sb, &a);
}

Test(standby, foreign_keys_in_the_store_are_skipped_by_the_load,
     .init = cluster_up, .fini = cluster_down)
{
	static const char *const foreign[] = {"natsync:epoch", "other:1", "ns",
					      "n"};
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	unsigned int i, pending;

	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 3000);
	active_write_range(&a, 0, 3000, NS_EV_CREATE, 1);
	/* Keys that are not sessions, in slots the sessions use too; one
	 * with the session prefix but not a session key is counted. */
	for (i = 0; i < 5; i++) {
		const char *k = i < 4 ? foreign[i] : "ns:not-a-session";
		unsigned int nd = a.topo.slot_node[ns_key_slot(k, strlen(k))];

		pending = 1;
		redisAppendCommand(a.c[nd], "SET %s x", k);
		drain(a.c[nd], &pending);
	}
	sb = standby_synced(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000);
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.loaded, 3000);
	cr_assert_eq(st.bad_values, 1);
	pair_close(sb, &a);
}

Test(standby, cluster_refusing_getkeysinslot_is_loaded_with_scan,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct active a;
	unsigned int i;

	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 6000);
	active_write_range(&a, 0, 5000, NS_EV_CREATE, 0);
	for (i = 0; i < a.topo.n_nodes; i++) {
		redisReply *r = redisCommand(
			a.c[i], "ACL SETUSER natsync_sb on >secret ~* &* +@all "
				"-cluster|getkeysinslot");

		cr_assert(r && r->type == REDIS_REPLY_STATUS, "ACL SETUSER");
		freeReplyObject(r);
	}
	sb = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000, NULL,
			      "natsync_sb", "secret");
	cr_assert(wait_synced(sb, 15), "no load without GETKEYSINSLOT");
	active_write_range(&a, 5000, 1000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.loaded, 5000);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.bad_values, 0);
	cr_assert_eq(st.resubscribes, 0);
	pair_close(sb, &a);
}

/* Loading with SCAN sorts each reply's keys by slot (one MGET per slot).
 * Two standbys in one process load at once, each its own sort: every
 * record is read once, and no MGET mixes slots (CROSSSLOT would fail the
 * load, and its retry would read records again). */
Test(standby, two_standbys_loading_with_scan_at_once_do_not_interfere,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats st;
	struct nsa_standby *sb[2];
	struct active a;
	unsigned int i;

	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 30000);
	active_write_range(&a, 0, 30000, NS_EV_CREATE, 0);
	for (i = 0; i < a.topo.n_nodes; i++) {
		redisReply *r = redisCommand(
			a.c[i], "ACL SETUSER natsync_sb on >secret ~* &* +@all "
				"-cluster|getkeysinslot");

		cr_assert(r && r->type == REDIS_REPLY_STATUS, "ACL SETUSER");
		freeReplyObject(r);
	}
	for (i = 0; i < 2; i++)
		sb[i] = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000,
					 NULL, "natsync_sb", "secret");
	for (i = 0; i < 2; i++) {
		cr_assert(wait_synced(sb[i], 20), "standby %u did not sync", i);
		nsa_standby_stats(sb[i], &st);
		cr_assert_eq(st.loaded, 30000, "standby %u loaded %lu", i,
			     (unsigned long)st.loaded);
		cr_assert_eq(st.bad_values, 0);
		cr_assert(table_exact(nsa_standby_table(sb[i]), &a));
	}
	for (i = 0; i < 2; i++)
		nsa_standby_free(sb[i]);
	active_close(&a);
}

IN_BOTH_LAYOUTS(cold_load_converges_while_batches_keep_coming)

ParameterizedTest(struct layout_param *p, standby,
		  cold_load_converges_while_batches_keep_coming,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	uint32_t k;

	layout_cluster_up(p);
	active_open(&a, p->port, NSA_PUBLISH_AUTO, 120000);
	a.log = p->layout == NSA_LAYOUT_LOG;
	active_write_range(&a, 0, 100000, NS_EV_CREATE, 1);
	sb = standby_start(p->port, NSA_PUBLISH_AUTO, 200000);
	/* Keep the active busy while the standby loads. */
	for (k = 0; k < 20; k++) {
		active_write_range(&a, 100000 + k * 1000, 1000, NS_EV_CREATE,
				   1);
		active_write_range(&a, k * 500, 250, NS_EV_DELETE, 1);
		active_write_range(&a, 50000 + k * 500, 250, NS_EV_REFRESH, 1);
	}
	cr_assert(wait_synced(sb, 30), "cold load did not finish");
	cr_assert(wait_exact(sb, &a, 20), "table differs from the active's");
	nsa_standby_stats(sb, &st);
	printf("cold load under traffic: loaded %lu, batches %lu, resyncs "
	       "%lu\n",
	       (unsigned long)st.loaded, (unsigned long)st.batches,
	       (unsigned long)st.resyncs);
	cr_assert_geq(st.resyncs, 3);
	cr_assert_eq(st.bad_values, 0);
	pair_close(sb, &a);
}

IN_BOTH_LAYOUTS(seq_gap_triggers_resync_and_table_ends_exact)

/* Lost notifications on every channel, among them one batch that never
 * reached the store: each master is resynced. In the log layout the
 * repair (nsa_repair.c) first reads back the segments missed up to the
 * hole (their records are in the table before the resyncs end), then
 * gives up: the resyncs are counted once each, whenever they finish. */
ParameterizedTest(struct layout_param *p, standby,
		  seq_gap_triggers_resync_and_table_ends_exact,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	uint64_t lost, resyncs;
	unsigned int i;

	layout_cluster_up(p);
	sb = pair_open(&a, p->port, NSA_PUBLISH_AUTO, 3000, 100000);
	a.log = p->layout == NSA_LAYOUT_LOG;
	active_write_range(&a, 0, 1000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));

	/* Lost notifications: the records reach the store only (in the log
	 * layout, segments under the seqs skipped), then a seq skipped on
	 * every channel whose batch the store never got either. */
	active_write_range(&a, 1000, 1000, NS_EV_CREATE, 0);
	active_write_range(&a, 0, 300, NS_EV_DELETE, 0);
	lost = batches_of(&a, 1000, 1000) + batches_of(&a, 0, 300);
	for (i = 0; i < a.topo.n_nodes; i++)
		a.seq[i]++;
	active_write_range(&a, 2000, 1000, NS_EV_CREATE, 1);
	/* the cold load (one load of every master counts each), then one
	 * resync per gap */
	resyncs = WAIT_STAT(sb, resyncs, 2 * a.topo.n_nodes, 15);
	cr_assert(wait_exact(sb, &a, 15), "resync did not repair the table");
	nsa_standby_stats(sb, &st);
	printf("seq gap (%s): gaps %lu, resyncs %lu (%lu when first seen), "
	       "repairs %lu, repair_values %lu\n",
	       p->layout == NSA_LAYOUT_LOG ? "log" : "keys",
	       (unsigned long)st.gaps, (unsigned long)st.resyncs,
	       (unsigned long)resyncs, (unsigned long)st.repairs,
	       (unsigned long)st.repair_values);
	cr_assert_eq(st.gaps, a.topo.n_nodes);
	cr_assert_eq(st.resyncs, 2 * a.topo.n_nodes, "resyncs %lu",
		     (unsigned long)st.resyncs);
	cr_assert_eq(st.repairs, 0);
	cr_assert_eq(st.repair_values, a.log ? lost : 0);
	pair_close(sb, &a);
}

/* A publisher's seq on a channel starts at 1 (schema/FORMAT.md). Once a
 * master is loaded, a publisher never seen on its channel that shows up at
 * seq 500 sent 499 batches the subscription should have carried and did
 * not: a gap, as for a known publisher. One that starts at 1 is none. */
Test(standby, unknown_publisher_past_seq_1_after_the_load_is_a_gap,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsdp_table_stats ts;
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct active a;
	unsigned int i;
	int exact;

	sb = pair_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 3000, 100000);
	/* Batches 1..499 of publisher 77 on every channel: lost, their
	 * records in the store only. */
	active_write_range(&a, 0, 1000, NS_EV_CREATE, 0);
	for (i = 0; i < a.topo.n_nodes; i++)
		a.seq[i] = 499;
	active_write_range(&a, 1000, 1000, NS_EV_CREATE, 1);
	exact = wait_exact(sb, &a, 15);
	nsa_standby_stats(sb, &st);
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	cr_assert_eq(st.gaps, a.topo.n_nodes,
		     "gaps %lu, expected %u (%lu live, expected 2000)",
		     (unsigned long)st.gaps, a.topo.n_nodes,
		     (unsigned long)ts.live);
	cr_assert(exact, "table not exact: %lu live, expected 2000",
		  (unsigned long)ts.live);

	/* A new publisher from seq 1: no gap. */
	a.publisher_id = 78;
	memset(a.seq, 0, sizeof(a.seq));
	active_write_range(&a, 2000, 1000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.gaps, a.topo.n_nodes);
	pair_close(sb, &a);
}

/* The subscriber's stats once it runs at what was asked (the governor
 * raises it after its first quiet window), or after 3 s. */
static void priority_settled(struct nsa_standby *sb, int nice, int rtprio,
			     struct nsa_standby_stats *st)
{
	for (int i = 0; i < 300; i++) {
		nsa_standby_stats(sb, st);
		if (st->subscriber_nice == nice &&
		    st->subscriber_rtprio == rtprio)
			return;
		usleep(10000);
	}
}

/* [standby] priority = realtime runs the subscriber thread under
 * SCHED_FIFO at NSA_STANDBY_RTPRIO, high at nice -10 (as root, which CI
 * is; without CAP_SYS_NICE realtime falls back to high, high to the
 * process's nice, which the stats say); normal leaves it at the
 * process's. Read from the stats, and from the kernel for the thread
 * that has it. */
Test(standby, the_subscriber_runs_at_the_priority_configured,
     .init = cluster_up, .fini = cluster_down)
{
	const int base = getpriority(PRIO_PROCESS, 0);
	const int root = geteuid() == 0;
	struct nsa_standby_stats st;
	struct nsa_standby *sb;

	for (int level = NSA_PRIORITY_REALTIME; level >= NSA_PRIORITY_NORMAL;
	     level--) {
		int want_rt = level == NSA_PRIORITY_REALTIME && root
				      ? NSA_STANDBY_RTPRIO
				      : 0;
		int want_nice = level != NSA_PRIORITY_NORMAL && root && !want_rt
					? NSA_STANDBY_NICE_HIGH
					: base;
		uint64_t lowered_at_sync;

		standby_priority = level;
		sb = standby_synced(CLUSTER_PORT, NSA_PUBLISH_AUTO, 10000);
		/* The cold load may have had a quiet window (raised) and then
		 * a busy one (lowered, held 1 s): by design, and seen under
		 * AddressSanitizer on a loaded CI machine. A synced standby
		 * with nothing to apply is never lowered: counted from the
		 * close of the window the load ended in (a window closes at
		 * most a poll, 100 ms, after it ends). */
		usleep(3 * NSA_PRIO_WINDOW_NS / 1000);
		nsa_standby_stats(sb, &st);
		lowered_at_sync = st.subscriber_lowered;
		priority_settled(sb, want_nice, want_rt, &st);
		cr_assert_eq(st.subscriber_nice, want_nice,
			     "priority %d: nice %d", level, st.subscriber_nice);
		cr_assert_eq(st.subscriber_rtprio, want_rt,
			     "priority %d: rtprio %d", level,
			     st.subscriber_rtprio);
		cr_assert_eq(st.subscriber_lowered, lowered_at_sync,
			     "priority %d: lowered %lu times after the sync",
			     level, (unsigned long)st.subscriber_lowered);
		if (!want_rt)
			cr_assert_eq(nst_sh("ps -L -o cls=,nice= -p %d | "
					    "grep -qE '^ *TS +%d *$'",
					    (int)getpid(), want_nice),
				     0, "no thread of this process at nice %d",
				     want_nice);
		else
			cr_assert_eq(nst_sh("ps -L -o cls=,rtprio= -p %d | "
					    "grep -qE '^ *FF +%d *$'",
					    (int)getpid(), want_rt),
				     0, "no thread of this process at FIFO %d",
				     want_rt);
		nsa_standby_stop(sb);
		nsa_standby_free(sb);
	}
	standby_priority = NSA_PRIORITY_NORMAL;
}

/* The governor (agent/standby/nsa_prio.h) on a thread of its own: raised
 * after a quiet window, lowered to the process's priority by a window
 * over half a core, held lowered for NSA_PRIO_HOLD_MIN_NS, raised again
 * after; lowered twice soon after being raised, held twice as long. */
static void *prio_governed(void *arg)
{
	struct nsa_prio *p = arg;
	uint64_t t0 = nsdp_mono_ns(), t;

	nsa_prio_init(p, NSA_PRIORITY_REALTIME, t0);
	/* Quiet: raised at the first window's end. */
	while ((t = nsdp_mono_ns()) - t0 < NSA_PRIO_WINDOW_NS + 20000000ull) {
		usleep(5000);
		nsa_prio_govern(p, nsdp_mono_ns(), 0, 0);
	}
	if (p->rtprio != NSA_STANDBY_RTPRIO)
		return "not raised after a quiet window";
	/* Busy (a spinning loop): lowered within two windows. */
	t0 = nsdp_mono_ns();
	while (p->lowered == 0 &&
	       (t = nsdp_mono_ns()) - t0 < 3 * NSA_PRIO_WINDOW_NS)
		nsa_prio_govern(p, t, 0, 0);
	if (p->lowered != 1 || p->rtprio != 0)
		return "not lowered by a busy window";
	/* Quiet again: held lowered for the hold, raised after it. */
	t0 = nsdp_mono_ns();
	while ((t = nsdp_mono_ns()) - t0 < NSA_PRIO_HOLD_MIN_NS * 9 / 10) {
		usleep(5000);
		nsa_prio_govern(p, nsdp_mono_ns(), 0, 0);
	}
	if (p->rtprio != 0)
		return "raised before its hold was over";
	while ((t = nsdp_mono_ns()) - t0 <
		       NSA_PRIO_HOLD_MIN_NS + 3 * NSA_PRIO_WINDOW_NS &&
	       p->rtprio == 0) {
		usleep(5000);
		nsa_prio_govern(p, nsdp_mono_ns(), 0, 0);
	}
	if (p->rtprio != NSA_STANDBY_RTPRIO)
		return "not raised again after its hold";
	/* Busy again at once: lowered, and held twice as long now. */
	while (p->lowered == 1)
		nsa_prio_govern(p, nsdp_mono_ns(), 0, 0);
	if (p->held_until_ns - nsdp_mono_ns() <=
	    NSA_PRIO_HOLD_MIN_NS + NSA_PRIO_WINDOW_NS)
		return "the second hold is not longer";
	return NULL;
}

/* Run a governor's story (a thread function returning why it failed, or
 * NULL) on a thread of its own; it was lowered that many times. */
static void governed(void *(*story)(void *), uint64_t lowered)
{
	struct nsa_prio p;
	pthread_t t;
	void *why;

	nst_need_root("raising a thread's priority needs CAP_SYS_NICE");
	cr_assert_eq(pthread_create(&t, NULL, story, &p), 0);
	cr_assert_eq(pthread_join(t, &why), 0);
	cr_assert_null(why, "%s (lowered %lu, rtprio %d)", (char *)why,
		       (unsigned long)p.lowered, p.rtprio);
	cr_assert_eq(p.lowered, lowered);
}

Test(standby, a_busy_subscriber_is_lowered_then_raised_again)
{
	governed(prio_governed, 2);
}

/* The governor with a stream flat out: records that waited 30 ms on the
 * active on average (record made -> batch sent) lower a quiet thread,
 * which stays lowered past its hold while they keep waiting that long and
 * rises once they wait 0.3 ms. The counters are those the subscriber
 * hands it (the number of records applied, the sum of their waits). */
static void *prio_outrun(void *arg)
{
	struct nsa_prio *p = arg;
	uint64_t t0 = nsdp_mono_ns(), n = 0, wait = 0;

	nsa_prio_init(p, NSA_PRIORITY_REALTIME, t0);
	while (nsdp_mono_ns() - t0 < NSA_PRIO_WINDOW_NS + 20000000ull) {
		usleep(5000);
		n += 100, wait += 100 * 300;
		nsa_prio_govern(p, nsdp_mono_ns(), n, wait);
	}
	if (p->rtprio != NSA_STANDBY_RTPRIO)
		return "not raised while records waited 0.3 ms";
	t0 = nsdp_mono_ns();
	while (nsdp_mono_ns() - t0 <
	       NSA_PRIO_HOLD_MIN_NS + 5 * NSA_PRIO_WINDOW_NS) {
		usleep(5000);
		n += 100, wait += 100 * 30000;
		nsa_prio_govern(p, nsdp_mono_ns(), n, wait);
	}
	if (p->lowered != 1 || p->rtprio != 0)
		return "not lowered, or raised again, while records waited 30 ms";
	t0 = nsdp_mono_ns();
	while (p->rtprio == 0 && nsdp_mono_ns() - t0 < NSA_PRIO_HOLD_MAX_NS) {
		usleep(5000);
		n += 100, wait += 100 * 300;
		nsa_prio_govern(p, nsdp_mono_ns(), n, wait);
	}
	if (p->rtprio != NSA_STANDBY_RTPRIO ||
	    nsdp_mono_ns() - t0 > 3 * NSA_PRIO_WINDOW_NS)
		return "not raised within two windows of records waiting 0.3 ms";
	return NULL;
}

Test(standby, a_subscriber_is_lowered_while_the_stream_outruns_the_active)
{
	governed(prio_outrun, 1);
}

Test(standby, bad_messages_are_counted_and_change_nothing, .init = cluster_up,
     .fini = cluster_down)
{
	static uint8_t buf[NS_BATCH_HDR_LEN + 2 * NS_RECORD_MAX_LEN];
	struct ns_batch_hdr h = {.publisher_id = 9,
				 .gateway_id = 1,
				 .epoch = 1,
				 .count = 2,
				 .seq = 1};
	struct ns_session s1 = sess(900001, NS_EV_CREATE);
	struct ns_session s2 = sess(900002, NS_EV_CREATE), out;
	struct nsdp_table_stats before, after;
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct active a;
	unsigned int pending = 0;
	size_t len;
	int l1, l2;

	sb = pair_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 500, 100000);
	active_write_range(&a, 0, 500, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	nsdp_table_stats(nsa_standby_table(sb), &before);

	l1 = ns_record_encode(&s1, buf + NS_BATCH_HDR_LEN, NS_RECORD_MAX_LEN);
	l2 = ns_record_encode(&s2, buf + NS_BATCH_HDR_LEN + l1,
			      NS_RECORD_MAX_LEN);
	h.body_len = (uint32_t)(l1 + l2);
	ns_batch_hdr_encode(&h, buf);
	len = NS_BATCH_HDR_LEN + (size_t)(l1 + l2);

	/* foreign text */
	publish(&a, 0, (const uint8_t *)"hello", 5, &pending);
	/* truncated: the second record cut short */
	publish(&a, 0, buf, len - 10, &pending);
	/* wrong magic */
	buf[0] ^= 0xff;
	publish(&a, 0, buf, len, &pending);
	buf[0] ^= 0xff;
	/* a record with a bad event inside an otherwise good batch */
	buf[NS_BATCH_HDR_LEN + 3] = 0x7f;
	publish(&a, 0, buf, len, &pending);
	drain(a.c[0], &pending);

	WAIT_STAT(sb, bad_messages, 4, 2);
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.bad_messages, 4);
	nsdp_table_stats(nsa_standby_table(sb), &after);
	cr_assert_eq(after.applied, before.applied);
	cr_assert_eq(after.live, before.live);
	cr_assert_eq(nsdp_table_lookup(nsa_standby_table(sb), s1.proto,
				       &s1.orig, &out),
		     -ENOENT);
	cr_assert(table_exact(nsa_standby_table(sb), &a));
	cr_assert_eq(st.gaps, 0);

	/* Still alive: good batches keep coming in. */
	active_write_range(&a, 0, 100, NS_EV_DELETE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	pair_close(sb, &a);
}

IN_BOTH_LAYOUTS(batches_of_an_older_epoch_are_fenced)

ParameterizedTest(struct layout_param *p, standby,
		  batches_of_an_older_epoch_are_fenced,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;

	layout_cluster_up(p);
	sb = pair_open(&a, p->port, NSA_PUBLISH_AUTO, 2000, 100000);
	a.log = p->layout == NSA_LAYOUT_LOG;
	a.epoch = 5;
	active_write_range(&a, 0, 1000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	/* The old active wakes up and publishes with its old epoch. */
	a.epoch = 4;
	a.publisher_id = 78;
	active_write_range(&a, 1000, 500, NS_EV_CREATE, 1);
	WAIT_STAT(sb, fenced, a.topo.n_nodes, 2);
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.fenced, a.topo.n_nodes);
	assert_lookups(sb, &a, 1000, 1500, -ENOENT);
	pair_close(sb, &a);
}

/* Active A (gateway 1, epoch 256) of a standby on p's store: 1000
 * sessions written and published, then 300 created and 100 deleted in the
 * store alone (the fence cut its SPUBLISHes off); then a becomes B, which
 * promoted and fenced A: gateway 2 of the same pair, epoch 512, a new
 * publisher from seq 1. Returns the standby. */
static struct nsa_standby *fenced_with_unannounced(struct active *a,
						   const struct layout_param *p)
{
	struct nsa_standby *sb;

	layout_cluster_up(p);
	sb = pair_open(a, p->port, NSA_PUBLISH_AUTO, 2000, 100000);
	a->log = p->layout == NSA_LAYOUT_LOG;
	a->epoch = 256;
	active_write_range(a, 0, 1000, NS_EV_CREATE, 1);
	cr_assert(wait_exact(sb, a, 10));
	active_write_range(a, 1000, 300, NS_EV_CREATE, 0);
	active_write_range(a, 0, 100, NS_EV_DELETE, 0);
	a->gateway_id = 2;
	a->epoch = 512;
	a->publisher_id = 78;
	memset(a->seq, 0, sizeof(a->seq));
	return sb;
}

/*
 * The fence closes the old active's connection between two commands: its
 * writes of a batch (SET/DEL of the keys, or the log's segment) ran, its
 * SPUBLISH did not, and it never sends it again. Here the test is that
 * active A (gateway 1, epoch 256): 1000 sessions written and published,
 * then 300 created and 100 deleted in the store alone; then B (gateway 2
 * of the same pair, epoch 512, a new publisher from seq 1) writes 300 more
 * and publishes them. The standby sees the pair's epoch rise, resyncs
 * every master (epoch_resyncs) and ends equal to the store: A's
 * unannounced writes included.
 */
IN_BOTH_LAYOUTS(a_new_epoch_resyncs_what_the_fenced_active_never_published)

ParameterizedTest(struct layout_param *p, standby,
		  a_new_epoch_resyncs_what_the_fenced_active_never_published,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	uint32_t unannounced, deleted, i;
	double t0;
	int exact;

	sb = fenced_with_unannounced(&a, p);
	nsdp_sleep_ms(200);
	t0 = nsdp_now_s();
	active_write_range(&a, 1300, 300, NS_EV_CREATE, 1);
	exact = wait_exact(sb, &a, 10);
	nsa_standby_stats(sb, &st);
	for (unannounced = 0, i = 1000; i < 1300; i++)
		unannounced += count_present(sb, &a, &i, 1);
	for (deleted = 100, i = 0; i < 100; i++)
		deleted -= count_present(sb, &a, &i, 1);
	printf("%s layout: the standby holds %u of the 300 sessions A "
	       "created unannounced and lacks %u of the 100 it deleted; "
	       "epoch_resyncs=%" PRIu64 " resyncs=%" PRIu64
	       " load_values=%" PRIu64 "; equal to the store after %.3f s\n",
	       a.log ? "log" : "keys", unannounced, deleted, st.epoch_resyncs,
	       st.resyncs, st.load_values, exact ? nsdp_now_s() - t0 : -1.0);
	fflush(stdout);
	cr_assert(exact, "the standby misses what the fenced active wrote "
			 "but never published");
	/* Every master, once: at the first batch of B's epoch. */
	cr_assert_eq(st.epoch_resyncs, a.topo.n_nodes);
	pair_close(sb, &a);
}

/*
 * The same, but B writes on one master only (no session of its hashes on
 * the others): the first batch of the new epoch, on master 0's channel,
 * resyncs every master, so that what A wrote there unannounced comes
 * from the store too. epoch_resyncs counts one per master, the later
 * first batches of that epoch on other channels none.
 */
IN_BOTH_LAYOUTS(a_new_epoch_on_one_master_resyncs_every_master)

ParameterizedTest(struct layout_param *p, standby,
		  a_new_epoch_on_one_master_resyncs_every_master,
		  .fini = layout_stores_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	uint32_t idx[100];
	uint64_t missing = 0, extra = 0;
	int exact;

	sb = fenced_with_unannounced(&a, p);
	pick_on_node(&a, 0, 1300, idx, 100);
	active_write(&a, idx, 100, NS_EV_CREATE, 1);
	exact = wait_exact(sb, &a, 5);
	nsa_standby_stats(sb, &st);
	table_diff(nsa_standby_table(sb), &a, &missing, &extra);
	printf("%s layout, B on master 0 only: the standby misses %" PRIu64
	       " sessions and holds %" PRIu64 " extra; epoch_resyncs=%" PRIu64
	       " resyncs=%" PRIu64 "\n",
	       a.log ? "log" : "keys", missing, extra, st.epoch_resyncs,
	       st.resyncs);
	fflush(stdout);
	cr_assert(exact, "a master B never published on keeps what the "
			 "fenced active wrote there unannounced");
	cr_assert_eq(st.epoch_resyncs, a.topo.n_nodes);
	pair_close(sb, &a);
}

/* Wait until stat(sb) >= want, at most timeout_s. */
Test(standby, batch_key_admits_only_batches_signed_with_it, .init = cluster_up,
     .fini = cluster_down)
{
	static const char key[] = "a deployment's batch key";
	static struct nsa_config aconf;
	struct nsdp_lane *lane = nsdp_lane_create(0, 4096, SOCKET_ID_ANY);
	struct nsa_active *writer;
	struct nsa_standby *sb;
	uint64_t unsigned_batches;
	struct active a;
	uint32_t i;

	cr_assert_not_null(lane);
	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 3000);
	sb = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000, key, NULL,
			      NULL);
	cr_assert(wait_synced(sb, 10));

	/* The real writers, with the key: everything arrives. */
	nsa_config_defaults(&aconf);
	aconf.gateway_id = 1;
	store_conf(&aconf.store, CLUSTER_PORT, NSA_PUBLISH_AUTO);
	config_key(&aconf, key);
	writer = nsa_active_create(&aconf, &lane, 1);
	cr_assert_not_null(writer);
	cr_assert_eq(nsa_active_start(writer), 0);
	for (i = 0; i < 2000; i++) {
		a.table[i] = sess(i, NS_EV_CREATE);
		a.live[i] = 1;
		cr_assert_eq(nsdp_record(lane, &a.table[i]), 0);
	}
	cr_assert_eq(nsa_active_drain(writer, 10000), 0);
	cr_assert(wait_exact(sb, &a, 10),
		  "signed batches from the writers did not all apply");

	/* Well-formed batches without the key, then with another key, from
	 * other publishers: rejected, counted, nothing changes. */
	a.publisher_id = 78;
	active_write_range(&a, 2000, 300, NS_EV_CREATE, 1);
	unsigned_batches = batches_of(&a, 2000, 300);
	cr_assert_eq(WAIT_STAT(sb, unauthenticated, unsigned_batches, 10),
		     unsigned_batches);
	a.publisher_id = 79;
	a.key = "not the key";
	active_write_range(&a, 2300, 300, NS_EV_CREATE, 1);
	unsigned_batches += batches_of(&a, 2300, 300);
	cr_assert_eq(WAIT_STAT(sb, unauthenticated, unsigned_batches, 10),
		     unsigned_batches);
	nsdp_sleep_ms(200);
	cr_assert_eq(WAIT_STAT(sb, unauthenticated, unsigned_batches, 0),
		     unsigned_batches);
	assert_lookups(sb, &a, 2000, 2600, -ENOENT);
	assert_lookups(sb, &a, 0, 2000, 0);

	nsa_active_stop(writer);
	nsa_active_free(writer);
	nsdp_lane_free(lane);
	pair_close(sb, &a);
}

/* Batches the standby judged: applied or dropped for any reason. */
static uint64_t judged(const struct nsa_standby_stats *st)
{
	return st->batches + st->stale + st->unauthenticated + st->fenced +
	       st->bad_messages;
}

/* Wait (at most 5 s) until the standby judged one batch more than in
 * *before; its stats then. */
static struct nsa_standby_stats
wait_judged(struct nsa_standby *sb, const struct nsa_standby_stats *before)
{
	double end = nsdp_now_s() + 5;
	struct nsa_standby_stats st;

	do {
		nsa_standby_stats(sb, &st);
		if (judged(&st) > judged(before))
			break;
		nsdp_sleep_ms(2);
	} while (nsdp_now_s() < end);
	cr_assert_eq(judged(&st), judged(before) + 1,
		     "the standby judged %lu batches, not 1",
		     (unsigned long)(judged(&st) - judged(before)));
	return st;
}

/* 1 once the standby's table holds no tombstone, within timeout_s. */
static int wait_no_tombstones(struct nsa_standby *sb, double timeout_s)
{
	double end = nsdp_now_s() + timeout_s;
	struct nsdp_table_stats ts;

	do {
		nsdp_table_stats(nsa_standby_table(sb), &ts);
		if (ts.tombstones == 0)
			return 1;
		nsdp_sleep_ms(20);
	} while (nsdp_now_s() < end);
	return 0;
}

#define REPLAY_KEY "a deployment's batch key"
#define REPLAYED 100

/* Sessions idx[0..REPLAYED) of node 0 created by one signed batch on node
 * 0's channel (copied into captured, its length returned), then deleted by
 * the next one; the standby saw both. */
static size_t create_capture_delete(struct nsa_standby *sb, struct active *a,
				    uint32_t *idx, uint8_t *captured)
{
	a->key = REPLAY_KEY;
	pick_on_node(a, 0, 0, idx, REPLAYED);
	a->capture = captured;
	active_write(a, idx, REPLAYED, NS_EV_CREATE, 1);
	a->capture = NULL;
	cr_assert_gt(a->capture_len, NS_BATCH_MAC_LEN);
	cr_assert(wait_exact(sb, a, 10), "the create batch did not apply");
	cr_assert_eq(count_present(sb, a, idx, REPLAYED), REPLAYED);
	active_write(a, idx, REPLAYED, NS_EV_DELETE, 1);
	cr_assert(wait_exact(sb, a, 10), "the delete batch did not apply");
	cr_assert_eq(count_present(sb, a, idx, REPLAYED), 0);
	/* The deletes' tombstones, which would fence an older create, are
	 * purged within a second or so: a replay comes later than that. */
	cr_assert(wait_no_tombstones(sb, 5), "tombstones not purged");
	return a->capture_len;
}

/* A signed batch captured on one master's channel and published again on
 * another's: the MAC binds the batch to its channel, so it is refused and
 * the sessions it created, deleted since, stay deleted. */
Test(standby, signed_batch_replayed_on_another_channel_changes_nothing,
     .init = cluster_up, .fini = cluster_down)
{
	static uint8_t captured[NS_BATCH_MAX_LEN];
	struct nsa_standby_stats before, st;
	uint32_t idx[REPLAYED];
	struct nsa_standby *sb;
	unsigned int pending = 0;
	struct active a;
	size_t len;

	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 2000);
	cr_assert_eq(a.topo.n_nodes, 3);
	sb = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000,
			      REPLAY_KEY, NULL, NULL);
	cr_assert(wait_synced(sb, 10));
	len = create_capture_delete(sb, &a, idx, captured);

	nsa_standby_stats(sb, &before);
	publish(&a, 1, captured, len, &pending);
	drain(a.c[1], &pending);
	st = wait_judged(sb, &before);
	cr_expect_eq(st.batches, before.batches,
		     "the replayed batch was applied (%lu batches, %lu "
		     "before)",
		     (unsigned long)st.batches, (unsigned long)before.batches);
	cr_expect_eq(st.unauthenticated + st.stale,
		     before.unauthenticated + before.stale + 1);
	cr_assert_eq(count_present(sb, &a, idx, REPLAYED), 0,
		     "%u of %u deleted sessions are back",
		     count_present(sb, &a, idx, REPLAYED), REPLAYED);
	cr_assert(table_exact(nsa_standby_table(sb), &a));
	pair_close(sb, &a);
}

/* The same batch published again on its own channel after the standby
 * restarted, with no memory of the publisher: it was sent before the new
 * standby subscribed, so it is refused as old; the deleted sessions stay
 * deleted and the publisher's sequence goes on. */
Test(standby, signed_batch_replayed_after_a_restart_changes_nothing,
     .init = cluster_up, .fini = cluster_down)
{
	static uint8_t captured[NS_BATCH_MAX_LEN];
	struct nsa_standby_stats before, st;
	uint32_t idx[REPLAYED], more[REPLAYED];
	uint64_t seq_before[NSA_MAX_NODES];
	struct nsa_standby *sb;
	unsigned int pending = 0, resumed = 0;
	struct active a;
	size_t len;

	active_open(&a, CLUSTER_PORT, NSA_PUBLISH_AUTO, 2000);
	sb = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000,
			      REPLAY_KEY, NULL, NULL);
	cr_assert(wait_synced(sb, 10));
	len = create_capture_delete(sb, &a, idx, captured);

	nsa_standby_free(sb);
	nsdp_sleep_ms(1000);
	sb = standby_start_as(CLUSTER_PORT, NSA_PUBLISH_AUTO, 100000,
			      REPLAY_KEY, NULL, NULL);
	cr_assert(wait_synced(sb, 10));
	cr_assert(wait_exact(sb, &a, 10), "the reload differs from the store");

	nsa_standby_stats(sb, &before);
	publish(&a, 0, captured, len, &pending);
	drain(a.c[0], &pending);
	st = wait_judged(sb, &before);
	cr_expect_eq(st.batches, 0,
		     "the replayed batch was applied (%lu batches)",
		     (unsigned long)st.batches);
	cr_expect_eq(st.unauthenticated + st.stale, 1);
	cr_assert_eq(count_present(sb, &a, idx, REPLAYED), 0,
		     "%u of %u deleted sessions are back",
		     count_present(sb, &a, idx, REPLAYED), REPLAYED);

	/* The real publisher goes on. It was silent for the whole reload, so
	 * its first batch on each channel, past seq 1, is a gap and that
	 * master is resynced (failure-modes.md): one gap per channel it
	 * resumes on, and the table ends exact. */
	for (uint32_t k = 0; k < REPLAYED; k++)
		more[k] = idx[k] + a.size / 2;
	memcpy(seq_before, a.seq, sizeof(seq_before));
	active_write(&a, more, REPLAYED, NS_EV_CREATE, 1);
	for (unsigned int n = 0; n < a.topo.n_nodes; n++)
		if (a.seq[n] > seq_before[n] && seq_before[n] > 0)
			resumed++;
	cr_assert_gt(resumed, 0);
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.gaps, resumed);
	pair_close(sb, &a);
}

IN_BOTH_LAYOUTS(dump_writes_the_table)

ParameterizedTest(struct layout_param *p, standby, dump_writes_the_table,
		  .fini = layout_stores_down)
{
	const char *path = nst_build("tests/run/standby_dump.bin");
	struct active a;
	struct nsa_standby *sb;
	FILE *f;
	long size;

	layout_cluster_up(p);
	active_open(&a, p->port, NSA_PUBLISH_AUTO, 3000);
	a.log = p->layout == NSA_LAYOUT_LOG;
	active_write_range(&a, 0, 3000, NS_EV_CREATE, 1);
	sb = standby_synced(p->port, NSA_PUBLISH_AUTO, 100000);
	cr_assert(wait_exact(sb, &a, 10));
	cr_assert_eq(nsa_standby_dump(sb, path, 5000), 3000);
	f = fopen(path, "rb");
	cr_assert_not_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fclose(f);
	cr_assert_eq(size, 3000L * NS_RECORD_V1_IPV4_LEN);
	pair_close(sb, &a);
}

Test(standby, plain_server_works_with_classic_publish, .init = plain_up,
     .fini = plain_down)
{
	struct active a;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;

	active_open(&a, PLAIN_PORT, NSA_PUBLISH_CLASSIC, 4000);
	cr_assert_eq(a.topo.cluster, 0);
	cr_assert_eq(a.topo.sharded_pubsub, 0);
	active_write_range(&a, 0, 2000, NS_EV_CREATE, 1);
	sb = standby_synced(PLAIN_PORT, NSA_PUBLISH_CLASSIC, 100000);
	active_write_range(&a, 2000, 2000, NS_EV_CREATE, 1);
	active_write_range(&a, 0, 500, NS_EV_DELETE, 1);
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.records, 2500);
	/* The publisher was silent for the whole load and came back past
	 * seq 1: the standby cannot tell that from lost batches, and pays
	 * one resync. */
	cr_assert_eq(st.gaps, 1);
	cr_assert_eq(WAIT_STAT(sb, resyncs, 2, 10), 2);
	pair_close(sb, &a);
}

/* A batch at or below its publisher's last seq on the channel is an old one
 * delivered late (a master cut off from its cluster hands its channel's
 * messages to its successor when they meet again): dropped and counted,
 * even when its records look newer than the table's. */
Test(standby, old_batches_delivered_late_are_dropped, .init = plain_up,
     .fini = plain_down)
{
	const struct ns_batch_hdr h = {
		.publisher_id = 77, .gateway_id = 1, .epoch = 1, .seq = 1};
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct active a;

	sb = pair_open(&a, PLAIN_PORT, NSA_PUBLISH_CLASSIC, 200, 1000);
	active_write_range(&a, 0, 100, NS_EV_CREATE, 1); /* seq 1 */
	active_write_range(&a, 0, 50, NS_EV_DELETE, 1); /* seq 2 */
	cr_assert(wait_exact(sb, &a, 10));

	/* seq 1 again, creating the deleted sessions with fresh times */
	publish_created(&a, h, 50, 0);
	WAIT_STAT(sb, stale, 1, 1);
	assert_lookups(sb, &a, 0, 50, -ENOENT);
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.stale, 1);

	/* The sequence goes on from where it was: no gap. */
	active_write_range(&a, 100, 100, NS_EV_CREATE, 1); /* seq 3 */
	cr_assert(wait_exact(sb, &a, 10));
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.stale, 1);
	pair_close(sb, &a);
}

Test(standby, lag_runs_from_the_record_timestamp_to_its_apply, .init = plain_up,
     .fini = plain_down)
{
	const struct ns_batch_hdr h = {
		.publisher_id = 5, .gateway_id = 1, .epoch = 1, .seq = 1};
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct active a;
	uint64_t sent_at;

	sb = pair_open(&a, PLAIN_PORT, NSA_PUBLISH_CLASSIC, 100, 1000);
	/* 100 records that happened one second before they are sent. */
	sent_at = nsdp_realtime_ns();
	publish_created(&a, h, 100, sent_at - 1000000000ull);
	WAIT_STAT(sb, lag_count, 100, 1);
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.lag_count, 100);
	/* At least the second, at most the second and the time it took to
	 * see the count (the apply happened before). */
	cr_assert_geq(nsa_standby_lag_percentile_us(&st, 1), 1000000);
	cr_assert_leq(st.lag_max_us,
		      (nsdp_realtime_ns() - sent_at) / 1000 + 1000000);
	cr_assert_leq(nsa_standby_lag_percentile_us(&st, 99), st.lag_max_us);
	printf("lag of records 1 s old: p50 %lu us, max %lu us\n",
	       (unsigned long)nsa_standby_lag_percentile_us(&st, 50),
	       (unsigned long)st.lag_max_us);
	pair_close(sb, &a);
}

/* The cold load in both store layouts. */

static struct layout_param cold_layouts[] = {
	{NSA_LAYOUT_KEYS, PLAIN_PORT},
	{NSA_LAYOUT_LOG, LOG_PLAIN_PORT},
};

static void cold_stores_down(void)
{
	nst_store_stop(PLAIN_PORT);
	nst_store_stop(LOG_PLAIN_PORT);
}

ParameterizedTestParameters(standby,
			    cold_load_of_a_million_sessions_from_a_plain_server)
{
	return cr_make_param_array(struct layout_param, cold_layouts,
				   sizeof(cold_layouts) /
					   sizeof(cold_layouts[0]));
}

/* In the log layout the store holds every session twice over (created,
 * then refreshed in other batches) and a tenth deleted after: the load
 * merges them into the same exact table as the keys layout's. */
ParameterizedTest(struct layout_param *p, standby,
		  cold_load_of_a_million_sessions_from_a_plain_server,
		  .fini = cold_stores_down, .timeout = 240)
{
	const uint32_t n = 1000000;
	struct nsdp_table_stats ts;
	struct active a;
	struct nsa_standby *sb;
	double t0, t1;

	cr_assert_eq(nst_eal_init(1024), 0);
	store_fresh(p->port, 0);
	standby_layout = p->layout;
	active_open(&a, p->port, NSA_PUBLISH_CLASSIC, n);
	a.log = p->layout == NSA_LAYOUT_LOG;
	active_write_range(&a, 0, n, NS_EV_CREATE, 0);
	active_write_range(&a, 0, n, NS_EV_REFRESH, 0);
	active_write_range(&a, 0, n / 10, NS_EV_DELETE, 0);
	t0 = nsdp_now_s();
	sb = standby_start(p->port, NSA_PUBLISH_CLASSIC, n + n / 4);
	cr_assert(wait_synced(sb, 30), "cold load took over 30 s");
	t1 = nsdp_now_s();
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	printf("cold load: %u sessions in %.3f s (%.0f sessions/s), table "
	       "memory %.1f B/session\n",
	       n - n / 10, t1 - t0, (n - n / 10) / (t1 - t0),
	       (double)ts.memory_bytes / (double)ts.live);
	cr_assert_eq(ts.live, n - n / 10);
	cr_assert(table_exact(nsa_standby_table(sb), &a));
	pair_close(sb, &a);
}

/* The log's values on every master of a (its segments and checkpoints:
 * ns:l:* but compaction's marks), counted, their bytes in *bytes. */
static uint64_t log_values_in_store(const struct active *a, uint64_t *bytes)
{
	uint64_t n = 0;
	unsigned int i;

	*bytes = 0;
	for (i = 0; i < a->topo.n_nodes; i++) {
		char cursor[32] = "0";

		do {
			redisReply *r = redisCommand(
				a->c[i], "SCAN %s MATCH %s COUNT 1000", cursor,
				NS_SEGMENT_PREFIX "*");
			size_t k;

			cr_assert(r && r->type == REDIS_REPLY_ARRAY &&
				  r->elements == 2);
			snprintf(cursor, sizeof(cursor), "%s",
				 r->element[0]->str);
			for (k = 0; k < r->element[1]->elements; k++) {
				const redisReply *key =
					r->element[1]->element[k];
				redisReply *len;

				if (nsa_logkey_kind(key->str, key->len) ==
				    NSA_LOGKEY_MARK)
					continue;
				len = redisCommand(a->c[i], "STRLEN %b",
						   key->str, key->len);
				cr_assert(len &&
					  len->type == REDIS_REPLY_INTEGER);
				n++;
				*bytes += (uint64_t)len->integer;
				freeReplyObject(len);
			}
			freeReplyObject(r);
		} while (strcmp(cursor, "0") != 0);
	}
	return n;
}

/* Log layout, 3 masters: n sessions created, a tenth deleted, then a
 * fresh standby's cold load (table room for n + n / 4), which must hold
 * exactly the active's table, having read each segment of the store once
 * (its values and bytes) and found none bad. Its stats into st. */
static void log_cold_load_of(uint32_t n, struct nsa_standby_stats *st)
{
	const struct layout_param p = {NSA_LAYOUT_LOG, LOG_CLUSTER_PORT};
	struct active a;
	struct nsa_standby *sb;
	uint64_t values, bytes;

	layout_cluster_up(&p);
	active_open(&a, p.port, NSA_PUBLISH_AUTO, n);
	a.log = 1;
	cr_assert_eq(a.topo.n_nodes, 3);
	active_write_range(&a, 0, n, NS_EV_CREATE, 0);
	active_write_range(&a, 0, n / 10, NS_EV_DELETE, 0);
	values = log_values_in_store(&a, &bytes);
	cr_assert_gt(values, a.topo.n_nodes);
	sb = standby_start(p.port, NSA_PUBLISH_AUTO, n + n / 4);
	cr_assert(wait_synced(sb, 60), "cold load did not finish");
	cr_assert(table_exact(nsa_standby_table(sb), &a));
	nsa_standby_stats(sb, st);
	printf("cold load of 3 masters, %u sessions: %lu segments (%lu B) in "
	       "the store, %lu read (%lu B), %lu resyncs\n",
	       n, (unsigned long)values, (unsigned long)bytes,
	       (unsigned long)st->load_values, (unsigned long)st->load_bytes,
	       (unsigned long)st->resyncs);
	cr_assert_eq(st->load_values, values,
		     "%lu segments in the store, %lu read by the cold load",
		     (unsigned long)values, (unsigned long)st->load_values);
	cr_assert_eq(st->load_bytes, bytes);
	cr_assert_eq(st->bad_values, 0);
	pair_close(sb, &a);
}

/* A master's sessions may lie in any master's segments (a segment stays
 * where its channel's slot is), yet the cold load of the 3 reads each
 * segment once, not once per master. */
Test(standby, log_cold_load_of_three_masters_reads_each_segment_once,
     .fini = layout_stores_down)
{
	struct nsa_standby_stats st;

	log_cold_load_of(30000, &st);
	/* Each master counts as loaded once. */
	cr_assert_eq(st.resyncs, 3);
}

/* A cold load past 65 536 sessions sizes its merge for the table and
 * has a thread fault the merge's pages in (nsa_logmerge_expect); the merge
 * moves into those blocks as it grows: the table is the store's all the
 * same, each segment read once. */
Test(standby, log_cold_load_of_a_large_store_is_exact,
     .fini = layout_stores_down)
{
	struct nsa_standby_stats st;

	log_cold_load_of(200000, &st);
	cr_assert_eq(st.loaded, 200000 - 200000 / 10);
}

/* nsa_compact_node() on master 0 of topo: one round of active id (and
 * epoch), merging what was sent by until_ns. err holds 256 bytes. */
static int compact_node0(const struct nsa_store_conf *sc,
			 const struct nsa_topology *topo, uint32_t id,
			 uint64_t gen, uint32_t epoch, uint64_t until_ns,
			 unsigned int grace_ms, struct nsa_compact_result *res,
			 char *err)
{
	const struct nsa_compact_round rd = {
		.id = id, .gen = gen, .epoch = epoch, .grace_ms = grace_ms};

	(void)until_ns; /* a round merges what it lists (no writer runs) */
	return nsa_compact_node(sc, topo, 0, &rd, res, err, 256);
}

/* A fresh plain store on LOG_COMPACT_PORT and an active writing it in the
 * log layout (room for n sessions); standbys started after load it so. */
static void log_active_open(struct active *a, uint32_t n)
{
	cr_assert_eq(nst_eal_init(1024), 0);
	store_fresh(LOG_COMPACT_PORT, 0);
	standby_layout = NSA_LAYOUT_LOG;
	active_open(a, LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC, n);
	a->log = 1;
}

/* A standby (room for room sessions) cold-loads the log of a: it must
 * sync within 30 s and hold live sessions, exactly a's. */
static struct nsa_standby *log_cold_load(const struct active *a, uint32_t room,
					 uint64_t live)
{
	struct nsa_standby *sb =
		standby_start(LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC, room);
	struct nsdp_table_stats ts;

	cr_assert(wait_synced(sb, 30), "cold load did not finish");
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	cr_assert_eq(ts.live, live);
	cr_assert(table_exact(nsa_standby_table(sb), a));
	return sb;
}

static void log_compact_down(void)
{
	nst_store_stop(LOG_COMPACT_PORT);
}

/* Log layout: a standby cold-loads while the log is compacted under it
 * (both start together), and another one loads once the segments the
 * checkpoint covers have expired: both hold the exact table. */
Test(standby, log_cold_load_during_compaction_gives_the_exact_table,
     .fini = log_compact_down, .timeout = 120)
{
	const uint32_t n = 200000, live = n - n / 10;
	const unsigned int grace_ms = 3000;
	struct nsa_compact_result res;
	struct nsa_store_conf sc;
	struct nsdp_table_stats ts;
	struct nsa_standby *sb, *sb2;
	struct active a;
	char err[256];
	double t0, t1;
	redisReply *r;

	log_active_open(&a, n);
	active_write_range(&a, 0, n, NS_EV_CREATE, 0);
	active_write_range(&a, 0, n, NS_EV_REFRESH, 0);
	active_write_range(&a, 0, n / 10, NS_EV_DELETE, 0);
	/* Compaction merges segments sent a grace period before it. */
	nsdp_sleep_ms(grace_ms + 100);

	sb = standby_start(LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC, n + n / 4);
	store_conf(&sc, LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC);
	t0 = nsdp_now_s();
	cr_assert_eq(compact_node0(&sc, &a.topo, 0xabcdef00u, 1, 1,
				   nsdp_realtime_ns() -
					   (uint64_t)grace_ms * 1000000u,
				   grace_ms, &res, err),
		     0, "%s", err);
	t1 = nsdp_now_s();
	cr_assert(wait_synced(sb, 30), "cold load did not finish");
	printf("compaction: %llu segments, %llu records, %llu live, %llu "
	       "bytes written back in %.3f s\n",
	       (unsigned long long)res.segments,
	       (unsigned long long)res.records, (unsigned long long)res.live,
	       (unsigned long long)res.bytes_written, t1 - t0);
	cr_assert_eq(res.records, 2 * n + n / 10);
	cr_assert_eq(res.live, live);
	/* The round's deletes stay in its checkpoint (one round); 4 094
	 * records a checkpoint batch, 48 B each, 48 B of header. */
	cr_assert_eq(res.tombstones, n / 10);
	cr_assert_eq(res.bytes_written,
		     (uint64_t)n * 48 + (n + 4093) / 4094 * 48);
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	cr_assert_eq(ts.live, live);
	cr_assert(table_exact(nsa_standby_table(sb), &a));
	nsa_standby_free(sb);

	/* Two grace periods passed: only the checkpoint and its mark are
	 * left. */
	nsdp_sleep_ms(2 * grace_ms + 500);
	r = redisCommand(a.c[0], "DBSIZE");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, (n + 4093) / 4094 + 1);
	freeReplyObject(r);
	sb2 = log_cold_load(&a, n + n / 4, live);
	pair_close(sb2, &a);
}

/* One hand-made batch of sessions [first, first + n) created at ts, with
 * header sent_ns sent, SET under name on node 0 (no expiry). */
static void log_value_set(struct active *a, const char *name, uint32_t id,
			  uint32_t first, uint32_t n, uint64_t ts,
			  uint64_t sent)
{
	static uint8_t buf[NS_BATCH_MAX_LEN];
	struct ns_batch_hdr h = {.publisher_id = id, .seq = 1};
	size_t len = NS_BATCH_HDR_LEN;
	redisReply *r;

	for (uint32_t i = first; i < first + n; i++) {
		struct ns_session s = sess(i, NS_EV_CREATE);
		int l;

		s.timestamp_ns = ts;
		s.epoch = a->epoch;
		l = ns_record_encode(&s, buf + len, sizeof(buf) - len);
		cr_assert_gt(l, 0);
		len += (size_t)l;
	}
	h.count = (uint16_t)n;
	h.body_len = (uint32_t)(len - NS_BATCH_HDR_LEN);
	h.channel_slot = a->topo.nodes[0].channel_slot;
	h.sent_ns = sent;
	ns_batch_hdr_encode(&h, buf);
	r = redisCommand(a->c[0], "SET %s %b", name, buf, len);
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "SET %s", name);
	freeReplyObject(r);
}

/* Log layout: readers take only what compaction's mark leaves in. The
 * store is set up as a read spanning a round's expiries once found it:
 * the marked checkpoint (sessions 50-99; 0-49 deleted, their tombstones
 * left out), the delete segments expired, and still there a checkpoint
 * of no marked round with 0-99 live and a segment the mark covers that
 * creates 0-9 anew. Both are left out: a standby's cold load and the
 * next round hold 50-99 and the 20 sessions written after the round,
 * exactly, not the deleted 0-49. */
Test(standby, log_readers_leave_out_what_the_mark_does_not_name,
     .fini = log_compact_down, .timeout = 60)
{
	struct nsa_compact_result res;
	struct nsa_store_conf sc;
	struct nsa_logmark mk;
	struct nsa_standby *sb;
	struct active a;
	char err[256], name[NS_SEGMENT_KEY_MAX + 32], mark[NS_SEGMENT_KEY_MAX];
	uint64_t t_old;
	redisReply *r;
	size_t tag;

	log_active_open(&a, 200);
	t_old = nsdp_realtime_ns();
	active_write_range(&a, 0, 100, NS_EV_CREATE, 0);
	active_write_range(&a, 0, 50, NS_EV_DELETE, 0);
	nsdp_sleep_ms(20);
	store_conf(&sc, LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC);
	cr_assert_eq(compact_node0(&sc, &a.topo, 0x11111111u, 2, 1,
				   nsdp_realtime_ns(), 60000, &res, err),
		     0, "%s", err);
	cr_assert_eq(res.live, 50);

	nsa_logmark_key(a.topo.nodes[0].channel_slot, mark, sizeof(mark));
	r = redisCommand(a.c[0], "GET %s", mark);
	cr_assert(r && r->type == REDIS_REPLY_STRING, "no mark %s", mark);
	cr_assert_eq(nsa_logmark_parse(r->str, r->len, &mk), 0);
	freeReplyObject(r);
	cr_assert_eq(mk.id, 0x11111111u);
	cr_assert_eq(mk.gen, 2);
	cr_assert_eq(mk.parts, 1);
	cr_assert_eq(mk.grace_ms, 60000);

	/* The segments expired (every one the round merged). */
	r = redisCommand(a.c[0], "KEYS ns:l:*");
	cr_assert(r && r->type == REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *k = r->element[i];
		redisReply *d;

		if (nsa_logkey_kind(k->str, k->len) != NSA_LOGKEY_SEGMENT)
			continue;
		d = redisCommand(a.c[0], "DEL %b", k->str, k->len);
		cr_assert(d && d->type == REDIS_REPLY_INTEGER);
		freeReplyObject(d);
	}
	freeReplyObject(r);
	/* "ns:l:{N}:c" -> "ns:l:{N}:": what is left there. */
	tag = strlen(mark) - 1;
	snprintf(name, sizeof(name), "%.*sk:22222222:1:0", (int)tag, mark);
	log_value_set(&a, name, 0x22222222u, 0, 100, nsdp_realtime_ns(),
		      nsdp_realtime_ns());
	/* Seq 1 of the active's own family (publisher 77), which the mark
	 * covers. */
	snprintf(name, sizeof(name), "%.*s0000004d:1", (int)tag, mark);
	log_value_set(&a, name, 77, 0, 10, t_old + 1, t_old + 1);

	active_write_range(&a, 100, 20, NS_EV_CREATE, 0);
	sb = log_cold_load(&a, 1000, 70);
	nsa_standby_free(sb);

	/* The next round under the same mark: the same 70. */
	nsdp_sleep_ms(20);
	cr_assert_eq(compact_node0(&sc, &a.topo, 0x11111111u, 3, 1,
				   nsdp_realtime_ns(), 60000, &res, err),
		     0, "%s", err);
	cr_assert_eq(res.live, 70);
	sb = log_cold_load(&a, 1000, 70);
	pair_close(sb, &a);
}

/* A compaction round of the old active in a split brain. */
struct fenced_round {
	const struct nsa_store_conf *sc;
	const struct nsa_topology *topo;
	struct nsa_compact_result res;
	char err[256];
	int rc;
};

static void *fenced_round_main(void *arg)
{
	struct fenced_round *f = arg;

	f->rc = compact_node0(f->sc, f->topo, 0xaaaaaa00u, 1, 1,
			      nsdp_realtime_ns(), 500, &f->res, f->err);
	return NULL;
}

/* Split brain, log layout: the old active (epoch 1) is compacting when the
 * new one takes epoch 256 (the store's next generation) and raises the
 * fence. The round's connections are
 * named as writers, so the fence closes them, and it reads the epoch once
 * they are named: it fails, writes no mark and expires nothing, and a
 * round of epoch 1 started afterwards is refused before it writes. The
 * new active's round then holds every session. (Before, the old round
 * ran to its end and wrote its mark, which could land after the new
 * active's and name a checkpoint the new round had let expire.) */
Test(standby, log_compaction_round_of_a_fenced_active_writes_nothing,
     .fini = log_compact_down, .timeout = 120)
{
	const uint32_t n = 400000;
	struct fenced_round f = {0};
	struct nsa_compact_result res;
	struct nsa_store_conf sc;
	struct nsa_standby *sb;
	struct active a;
	char err[256], mark[NS_SEGMENT_KEY_MAX];
	unsigned int killed = 0;
	pthread_t th;
	redisReply *r;

	log_active_open(&a, n);
	active_write_range(&a, 0, n, NS_EV_CREATE, 0);
	store_conf(&sc, LOG_COMPACT_PORT, NSA_PUBLISH_CLASSIC);
	nsdp_sleep_ms(20);

	f.sc = &sc;
	f.topo = &a.topo;
	cr_assert_eq(pthread_create(&th, NULL, fenced_round_main, &f), 0);
	nsdp_sleep_ms(10);
	cr_assert_eq(nsa_epoch_take(&sc, 1, err, sizeof(err)), 256, "%s", err);
	cr_assert_eq(nsa_fence_raise(&sc, &killed, err, sizeof(err)), 0, "%s",
		     err);
	pthread_join(th, NULL);
	printf("fenced round: rc %d (%s), %u connection(s) closed by the "
	       "fence, %llu records read\n",
	       f.rc, f.err, killed, (unsigned long long)f.res.records);
	cr_assert_neq(f.rc, 0, "the fenced round completed (%llu live written)",
		      (unsigned long long)f.res.live);
	nsa_logmark_key(a.topo.nodes[0].channel_slot, mark, sizeof(mark));
	r = redisCommand(a.c[0], "EXISTS %s", mark);
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	cr_assert_eq(r->integer, 0, "the fenced round wrote its mark");
	freeReplyObject(r);

	/* A round of the old epoch started now is refused before it writes. */
	memset(&f, 0, sizeof(f));
	f.sc = &sc;
	f.topo = &a.topo;
	fenced_round_main(&f);
	cr_assert_eq(f.rc, -ESTALE, "rc %d: %s", f.rc, f.err);
	cr_assert(strstr(f.err, "fenced: the store's epoch is 256") != NULL,
		  "%s", f.err);

	/* Nothing expired: past two of its grace periods, the new active's
	 * round and a cold load hold every session. */
	nsdp_sleep_ms(1200);
	cr_assert_eq(compact_node0(&sc, &a.topo, 0xbbbbbb00u, 1, 256,
				   nsdp_realtime_ns(), 60000, &res, err),
		     0, "%s", err);
	cr_assert_eq(res.live, n);
	sb = log_cold_load(&a, n + n / 4, n);
	pair_close(sb, &a);
}

/* ---- slots moving between the same masters ------------------------------- */

/* Sessions 0..MOVING_N-1 on the 3-master cluster, the standby's table
 * equal to them (pair_synced), room for 6000 more: each test moves slots
 * 16000-16383 from the last master to the first. */
#define MOVING_N 20000u
static struct active moving;
static struct nsa_standby *moving_sb;

static void moving_up(void)
{
	cluster_up();
	moving_sb = pair_synced(&moving, MOVING_N, 6000);
}

/* The same with the standby's topology watcher off. */
static void moving_unwatched_up(void)
{
	topology_check_ms = 0;
	moving_up();
	topology_check_ms = 1000;
}

static void moving_down(void)
{
	pair_close(moving_sb, &moving);
	cluster_down();
}

/* Slots 16000-16383 move from the last master to the first: every master
 * keeps its lowest slot, so its channel, and the masters are the same. A
 * gap on the last master's channel then resyncs it: the resync must read
 * the moved slots from their new owner, not delete their sessions because
 * the old owner has none left, and must still delete what the store
 * deleted in the slots it did read. The watcher is off: the resync alone
 * must get this right. */
Test(standby, resync_after_slots_moved_between_the_same_masters_keeps_them,
     .init = moving_unwatched_up, .fini = moving_down)
{
	struct nsa_standby *sb = moving_sb;
	struct active *a = &moving;
	uint32_t gone[50];
	unsigned int moved;

	cr_assert_eq(a->topo.slot_node[16383], 2);

	moved = move_slots(a, 2, 0, 16000, 16383, 0);
	active_refetch(a);
	cr_assert_eq(a->topo.slot_node[16000], 0);
	cr_assert_eq(a->topo.slot_node[15999], 2);
	cr_assert_gt(moved, 300);

	/* Deleted in the store only, on the last master's own slots: the
	 * resync must remove them. Then a gap on its channel. */
	cr_assert_eq(sessions_on(a, 2, 16000, gone, 50), 50);
	active_write(a, gone, 50, NS_EV_DELETE, 0);
	a->seq[2]++;
	active_write_range(a, MOVING_N, 1000, NS_EV_CREATE, 1);
	cr_assert_geq(WAIT_STAT(sb, gaps, 1, 5), 1);

	assert_exact(sb, a, "after the resync (%u keys moved)", moved);
}

/* A resync that runs while slots are half moved (MIGRATING on the last
 * master, IMPORTING on the first, every other key moved): the keys already
 * moved are not on the master being read, and their sessions must stay;
 * sessions the store deleted in those slots must go. The migration then
 * ends and the table still equals the store. */
Test(standby, resync_during_a_slot_migration_reads_both_halves,
     .init = moving_up, .fini = moving_down)
{
	struct nsa_standby *sb = moving_sb;
	struct active *a = &moving;
	uint32_t gone[70], fresh[1000];
	unsigned int moved;

	/* Deleted in the store only, in the slots about to move and in the
	 * last master's others: the resync must remove both. */
	cr_assert_eq(sessions_on(a, 2, 16000, gone, 50), 50);
	cr_assert_eq(sessions_from_slot(a, MOVING_N, 16000, gone + 50, 20), 20);
	active_write(a, gone, 70, NS_EV_DELETE, 0);

	moved = move_slots(a, 2, 0, 16000, 16383, 1);
	cr_assert_gt(moved, 150);
	a->seq[2]++;
	/* New sessions outside the migrating slots only. */
	cr_assert_eq(fresh_below(MOVING_N, 16000, fresh, 1000), 1000);
	active_write(a, fresh, 1000, NS_EV_CREATE, 1);
	cr_assert_geq(WAIT_STAT(sb, gaps, 1, 5), 1);
	WAIT_STAT(sb, resyncs, 4, 5);

	assert_exact(sb, a, "resync mid-migration (%u keys moved)", moved);

	/* The migration ends; the store's deletes in the moved slots reach
	 * the table through the resync of the slots' new owner. */
	move_slots(a, 2, 0, 16000, 16383, 0);
	active_refetch(a);
	cr_assert_eq(a->topo.slot_node[16000], 0);
	active_write_range(a, MOVING_N + 5000, 1000, NS_EV_CREATE, 1);
	assert_exact(sb, a, "after the migration");
}

/* Slots moving between the same masters are the watcher's business too:
 * sessions the store deleted while their notifications were lost, in the
 * slots that move, go once the watcher sees the new map, without a gap
 * and without resubscribing. */
Test(standby, watcher_resyncs_the_masters_slots_moved_between,
     .init = moving_up, .fini = moving_down)
{
	struct nsa_standby_stats st;
	struct nsa_standby *sb = moving_sb;
	struct active *a = &moving;
	uint32_t gone[20];

	cr_assert_eq(sessions_from_slot(a, MOVING_N, 16000, gone, 20), 20);
	active_write(a, gone, 20, NS_EV_DELETE, 0);

	move_slots(a, 2, 0, 16000, 16383, 0);
	assert_exact(sb, a, "after the move");
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.resubscribes, 0);
}
