/*
 * test_repair.c - the standby's targeted repair in the log layout against a
 * real 3-master Redis Cluster (ports 7680-7682): the test writes segments
 * and publishes batches as a writer does (schema/FORMAT.md, Log layout),
 * loses one announcement among many, and checks what the standby read to
 * mend its table (its counters) and that the table ends exactly equal to
 * what was written.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_standby.h"
#include "nsdp_time.h"
#include "nst_session.h"
#include "nst_store.h"

#define REPAIR_PORT 7680
#define BATCH_RECORDS 256
/* A table of many segments: about 390 of them over the three masters. */
#define SESSIONS 100000

/* ---- a writer of one publisher ------------------------------------------ */

struct writer {
	struct nsa_topology topo;
	redisContext *c[NSA_MAX_NODES];
	uint64_t seq[NSA_MAX_NODES];
	/* what the store holds: index i -> record, live or not */
	struct ns_session *table;
	uint8_t *live;
	uint32_t size;
	const char *key; /* sign batches with this batch key (NULL: no) */
	int forge; /* spoil the next batch's HMAC (then cleared) */
	int cut; /* cut the next batch's last byte: it no longer decodes */
	uint8_t flags; /* more header flags for the next batch (then 0) */
	size_t last_len; /* the last batch's bytes */
	/* segments stored but not announced, and their bytes */
	uint64_t unannounced, unannounced_bytes;
};

static void store_conf(struct nsa_store_conf *sc)
{
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->seeds[0].host, sizeof(sc->seeds[0].host), "127.0.0.1");
	sc->seeds[0].port = REPAIR_PORT;
	sc->n_seeds = 1;
	sc->connect_timeout_ms = 1000;
	sc->publish = NSA_PUBLISH_AUTO;
	sc->layout = NSA_LAYOUT_LOG;
}

static void writer_open(struct writer *w, uint32_t size)
{
	struct nsa_store_conf sc;
	char err[256];

	memset(w, 0, sizeof(*w));
	store_conf(&sc);
	cr_assert_eq(nsa_topology_fetch(&sc, &w->topo, err, sizeof(err)), 0,
		     "topology: %s", err);
	for (unsigned int i = 0; i < w->topo.n_nodes; i++) {
		w->c[i] = redisConnect(w->topo.nodes[i].addr.host,
				       w->topo.nodes[i].addr.port);
		cr_assert(w->c[i] && !w->c[i]->err);
	}
	w->size = size;
	w->table = calloc(size, sizeof(*w->table));
	w->live = calloc(size, 1);
	cr_assert(w->table && w->live);
}

static void writer_close(struct writer *w)
{
	for (unsigned int i = 0; i < w->topo.n_nodes; i++)
		redisFree(w->c[i]);
	free(w->table);
	free(w->live);
}

static unsigned int node_of(const struct writer *w, const struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];

	ns_key_build(s->proto, &s->orig, key);
	return w->topo.slot_node[ns_key_slot(key, NS_KEY_LEN)];
}

static void expect_ok(redisContext *c, unsigned int n)
{
	for (; n; n--) {
		redisReply *r;

		cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
		cr_assert(r->type != REDIS_REPLY_ERROR, "%s", r->str);
		freeReplyObject(r);
	}
}

/* Close node's batch buf of len bytes and count records: its segment
 * under its seq (store), its notification (announce). */
static void batch_out(struct writer *w, unsigned int node, uint8_t *buf,
		      size_t len, unsigned int count, int store, int announce)
{
	struct ns_batch_hdr h = {0};
	char ch[NS_CHANNEL_MAX], key[NS_SEGMENT_KEY_MAX];
	unsigned int pending = 0;

	h.publisher_id = 77;
	h.gateway_id = 1;
	h.epoch = 1;
	h.count = (uint16_t)count;
	h.seq = ++w->seq[node];
	h.body_len = (uint32_t)(len - NS_BATCH_HDR_LEN);
	h.channel_slot = w->topo.nodes[node].channel_slot;
	h.sent_ns = nsdp_realtime_ns();
	h.flags = (uint8_t)((w->key ? NS_BATCH_F_HMAC : 0) | w->flags);
	w->flags = 0;
	ns_batch_hdr_encode(&h, buf);
	if (w->key) {
		cr_assert_eq(ns_batch_mac((const uint8_t *)w->key,
					  strlen(w->key), buf, len, buf + len),
			     0);
		buf[len] ^= (uint8_t)w->forge;
		w->forge = 0;
		len += NS_BATCH_MAC_LEN;
	}
	len -= (size_t)w->cut;
	w->cut = 0;
	w->last_len = len;
	cr_assert_gt(ns_segment_key(h.channel_slot, h.publisher_id, h.seq, key),
		     0);
	if (store) {
		redisAppendCommand(w->c[node], "SET %s %b PX 60000", key, buf,
				   len);
		pending++;
	}
	if (announce) {
		nsa_topology_channel(&w->topo, node, ch);
		redisAppendCommand(w->c[node], "%s %s %b",
				   w->topo.sharded_pubsub ? "SPUBLISH"
							  : "PUBLISH",
				   ch, buf, len);
		pending++;
	}
	expect_ok(w->c[node], pending);
	if (store && !announce) {
		w->unannounced++;
		w->unannounced_bytes += len;
	}
}

/* Sessions [first, first + n) with event ev, in batches per master; each
 * batch's segment stored when store, announced when announce. */
static void write_range(struct writer *w, uint32_t first, uint32_t n,
			uint8_t ev, int store, int announce)
{
	static uint8_t buf[NSA_MAX_NODES][NS_BATCH_MAX_LEN];
	size_t len[NSA_MAX_NODES];
	unsigned int count[NSA_MAX_NODES] = {0}, i;

	for (i = 0; i < w->topo.n_nodes; i++)
		len[i] = NS_BATCH_HDR_LEN;
	for (uint32_t k = first; k < first + n; k++) {
		struct ns_session s = nst_session(k % 3 ? 6 : 17, ev, 1, 1,
						  60000, nsdp_realtime_ns());
		unsigned int nd;
		int l;

		nst_session_flow(&s, k);
		nd = node_of(w, &s);
		l = ns_record_encode(&s, buf[nd] + len[nd],
				     NS_BATCH_MAX_LEN - len[nd]);
		cr_assert_gt(l, 0);
		len[nd] += (size_t)l;
		w->table[k] = s;
		w->live[k] = ev != NS_EV_DELETE;
		if (++count[nd] == BATCH_RECORDS) {
			batch_out(w, nd, buf[nd], len[nd], count[nd], store,
				  announce);
			count[nd] = 0;
			len[nd] = NS_BATCH_HDR_LEN;
		}
	}
	for (i = 0; i < w->topo.n_nodes; i++)
		if (count[i])
			batch_out(w, i, buf[i], len[i], count[i], store,
				  announce);
}

/* Sessions of node: [first, ...) the first n of them, into idx. */
static void pick_on_node(const struct writer *w, unsigned int node,
			 uint32_t first, uint32_t *idx, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = first; i < w->size && k < n; i++) {
		struct ns_session s = nst_session(i % 3 ? 6 : 17, NS_EV_CREATE,
						  1, 1, 60000, 0);

		nst_session_flow(&s, i);
		if (node_of(w, &s) == node)
			idx[k++] = i;
	}
	cr_assert_eq(k, n, "only %u of %u sessions on node %u", k, n, node);
}

/* One batch on node of the sessions idx[0..n) with event ev. */
static void write_on_node(struct writer *w, unsigned int node,
			  const uint32_t *idx, unsigned int n, uint8_t ev,
			  int store, int announce)
{
	static uint8_t buf[NS_BATCH_MAX_LEN];
	size_t len = NS_BATCH_HDR_LEN;

	for (unsigned int k = 0; k < n; k++) {
		struct ns_session s = nst_session(idx[k] % 3 ? 6 : 17, ev, 1, 1,
						  60000, nsdp_realtime_ns());
		int l;

		nst_session_flow(&s, idx[k]);
		cr_assert_eq(node_of(w, &s), node);
		l = ns_record_encode(&s, buf + len, sizeof(buf) - len);
		cr_assert_gt(l, 0);
		len += (size_t)l;
		w->table[idx[k]] = s;
		w->live[idx[k]] = ev != NS_EV_DELETE;
	}
	batch_out(w, node, buf, len, n, store, announce);
}

/* ---- the standby ---------------------------------------------------------- */

/* [standby] repair_max_segments of the standbys the next tests start. */
static unsigned int repair_max = 64;
/* Their [store] layout. */
static enum nsa_layout layout = NSA_LAYOUT_LOG;
/* Their batch key ("": none). */
static const char *batch_key = "";

/* A standby of room for twice sessions. */
static struct nsa_standby *standby_start_for(uint32_t sessions)
{
	static struct nsa_config conf; /* the standby keeps it */
	struct nsa_standby *sb;

	nsa_config_defaults(&conf);
	conf.role = NSA_ROLE_STANDBY;
	conf.gateway_id = 1;
	store_conf(&conf.store);
	conf.store.layout = layout;
	conf.table_capacity = 2 * sessions;
	conf.clock_slack_ms = 500;
	conf.repair_max_segments = repair_max;
	conf.batch_key_len = strlen(batch_key);
	memcpy(conf.batch_key, batch_key, conf.batch_key_len);
	sb = nsa_standby_create(&conf);
	cr_assert_not_null(sb);
	cr_assert_eq(nsa_standby_start(sb), 0);
	return sb;
}

static struct nsa_standby *standby_start(void)
{
	return standby_start_for(SESSIONS);
}

static int table_exact(struct nsdp_table *t, const struct writer *w)
{
	struct nsdp_table_stats st;
	uint64_t live = 0;

	for (uint32_t i = 0; i < w->size; i++)
		live += w->live[i];
	nsdp_table_stats(t, &st);
	if (st.live != live)
		return 0;
	for (uint32_t i = 0; i < w->size; i++) {
		struct ns_session out;
		int rc;

		if (w->table[i].proto == 0)
			continue;
		rc = nsdp_table_lookup(t, w->table[i].proto, &w->table[i].orig,
				       &out);
		if (w->live[i] &&
		    (rc != 0 || !ns_session_equal_state(&out, &w->table[i])))
			return 0;
		if (!w->live[i] && rc == 0)
			return 0;
	}
	return 1;
}

static int wait_exact(struct nsa_standby *sb, const struct writer *w,
		      double timeout_s)
{
	double end = nsdp_now_s() + timeout_s;

	while (nsdp_now_s() < end) {
		if (table_exact(nsa_standby_table(sb), w))
			return 1;
		nsdp_sleep_ms(20);
	}
	return table_exact(nsa_standby_table(sb), w);
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

/* A standby synced on an empty store, then a table of SESSIONS sessions
 * written as segments and announced, its table exact; its counters in
 * *st. */
static struct nsa_standby *pair_synced(struct writer *w,
				       struct nsa_standby_stats *st)
{
	struct nsa_standby *sb;

	writer_open(w, SESSIONS + 10000);
	sb = standby_start();
	cr_assert(wait_synced(sb, 20), "standby did not sync");
	write_range(w, 0, SESSIONS, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, w, 10), "table differs after the writes");
	nsa_standby_stats(sb, st);
	cr_assert_eq(st->resyncs, w->topo.n_nodes);
	cr_assert_eq(st->gaps, 0);
	return sb;
}

static void print_stats(const char *what, const struct nsa_standby_stats *b,
			const struct nsa_standby_stats *a)
{
	printf("%s: gaps %lu, resyncs %lu, load_values %lu (%lu B), repairs "
	       "%lu, repair_values %lu (%lu B)\n",
	       what, (unsigned long)(a->gaps - b->gaps),
	       (unsigned long)(a->resyncs - b->resyncs),
	       (unsigned long)(a->load_values - b->load_values),
	       (unsigned long)(a->load_bytes - b->load_bytes),
	       (unsigned long)(a->repairs - b->repairs),
	       (unsigned long)(a->repair_values - b->repair_values),
	       (unsigned long)(a->repair_bytes - b->repair_bytes));
}

/* ---- fixtures ------------------------------------------------------------ */

static void cluster_up(void)
{
	cr_assert_eq(nst_eal_init(1024), 0);
	cr_assert_eq(nst_store_start_fresh(REPAIR_PORT, 3, 0), 0);
}

static void cluster_down(void)
{
	nst_store_stop(REPAIR_PORT);
}

/* ---- tests --------------------------------------------------------------- */

/* One announcement lost among about 390 segments: its segment is in the
 * store. The standby sees the gap at the next batch and reads that one
 * segment back, not its master's log. */
Test(repair, a_lost_announcement_costs_its_segment_not_the_master,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[200];

	sb = pair_synced(&w, &before);
	/* Refreshed and deleted sessions of master 1, stored but not
	 * announced; then a batch announced: a gap of one. */
	pick_on_node(&w, 1, 0, idx, 200);
	write_on_node(&w, 1, idx, 100, NS_EV_REFRESH, 1, 0);
	write_on_node(&w, 1, idx + 100, 100, NS_EV_DELETE, 1, 0);
	write_range(&w, SESSIONS, 3000, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 10), "the table differs from the store");
	nsa_standby_stats(sb, &after);
	print_stats("one lost announcement", &before, &after);
	cr_assert_eq(after.gaps - before.gaps, 1);
	cr_assert_eq(after.resyncs, before.resyncs, "a resync of the master");
	cr_assert_leq(after.load_values - before.load_values, 2,
		      "repair read at most the missing segments' values: "
		      "read %lu (%lu B)",
		      (unsigned long)(after.load_values - before.load_values),
		      (unsigned long)(after.load_bytes - before.load_bytes));
	/* Exactly the two segments missed, nothing else. */
	cr_assert_eq(after.repairs - before.repairs, 1);
	cr_assert_eq(after.repair_values - before.repair_values, 2);
	cr_assert_eq(after.repair_bytes - before.repair_bytes,
		     w.unannounced_bytes);
	cr_assert_eq(after.load_values, before.load_values);
	cr_assert_eq(after.bad_values + after.unauthenticated, 0);
	nsa_standby_free(sb);
	writer_close(&w);
}

/* A gap longer than [standby] repair_max_segments is not read back: the
 * master is resynced, as before, and nothing is read by a repair. */
Test(repair, a_gap_longer_than_the_bound_resyncs_the_master, .init = cluster_up,
     .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[5 * 100];

	repair_max = 4;
	sb = pair_synced(&w, &before);
	pick_on_node(&w, 2, 0, idx, 5 * 100);
	for (unsigned int k = 0; k < 5; k++)
		write_on_node(&w, 2, idx + k * 100, 100,
			      k % 2 ? NS_EV_DELETE : NS_EV_REFRESH, 1, 0);
	write_range(&w, SESSIONS, 3000, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 15), "the table differs from the store");
	nsa_standby_stats(sb, &after);
	print_stats("5 lost announcements, bound 4", &before, &after);
	cr_assert_eq(after.gaps - before.gaps, 1);
	cr_assert_eq(after.resyncs - before.resyncs, 1);
	cr_assert_eq(after.repairs, before.repairs);
	cr_assert_eq(after.repair_values, before.repair_values);
	cr_assert_gt(after.load_values, before.load_values);
	nsa_standby_free(sb);
	writer_close(&w);
	repair_max = 64;
}

/* A batch missed whose segment the store does not hold (published only,
 * refused, or compacted and expired): the repair reads what is there,
 * meets the hole and gives up; the master is resynced and the table ends
 * exact. */
Test(repair, a_missed_segment_not_in_the_store_resyncs_the_master,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct ns_session kept[100];
	char key[NS_SEGMENT_KEY_MAX];
	struct writer w;
	uint32_t idx[300];
	redisReply *r;

	sb = pair_synced(&w, &before);
	pick_on_node(&w, 0, 0, idx, 300);
	write_on_node(&w, 0, idx, 100, NS_EV_REFRESH, 1, 0);
	/* Stored and removed at once: a segment that is gone, and the
	 * store holds the sessions as they were before it. */
	for (unsigned int k = 0; k < 100; k++)
		kept[k] = w.table[idx[100 + k]];
	write_on_node(&w, 0, idx + 100, 100, NS_EV_DELETE, 1, 0);
	ns_segment_key(w.topo.nodes[0].channel_slot, 77, w.seq[0], key);
	r = redisCommand(w.c[0], "DEL %s", key);
	cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
	freeReplyObject(r);
	for (unsigned int k = 0; k < 100; k++) {
		w.table[idx[100 + k]] = kept[k];
		w.live[idx[100 + k]] = 1;
	}
	write_on_node(&w, 0, idx + 200, 100, NS_EV_REFRESH, 1, 0);
	write_range(&w, SESSIONS, 3000, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 15), "the table differs from the store");
	nsa_standby_stats(sb, &after);
	print_stats("3 lost announcements, the second segment gone", &before,
		    &after);
	cr_assert_eq(after.gaps - before.gaps, 1);
	cr_assert_eq(after.resyncs - before.resyncs, 1);
	cr_assert_eq(after.repairs, before.repairs);
	/* Read up to the hole: the first segment. */
	cr_assert_eq(after.repair_values - before.repair_values, 1);
	nsa_standby_free(sb);
	writer_close(&w);
}

/* Poll one counter (its offset in struct nsa_standby_stats) until it is
 * above was or timeout_s passes; the seconds it took, or -1. */
static double wait_above(struct nsa_standby *sb, size_t field, uint64_t was,
			 double t0, double timeout_s)
{
	struct nsa_standby_stats st;
	uint64_t v;

	do {
		nsa_standby_stats(sb, &st);
		memcpy(&v, (const char *)&st + field, sizeof(v));
		if (v > was)
			return nsdp_now_s() - t0;
		nsdp_sleep_ms(1);
	} while (nsdp_now_s() - t0 < timeout_s);
	return -1;
}

/* A batch of deletes of idx[0..n) on node that every reader refuses
 * (its HMAC spoiled when forge, else cut by a byte), stored, and announced
 * when announce; no reader takes it, so the store keeps the sessions as
 * they were. */
static void write_refused(struct writer *w, unsigned int node,
			  const uint32_t *idx, unsigned int n, int forge,
			  int announce)
{
	struct ns_session kept[100];

	cr_assert_leq(n, 100);
	for (unsigned int k = 0; k < n; k++)
		kept[k] = w->table[idx[k]];
	if (forge)
		w->forge = 1;
	else
		w->cut = 1;
	write_on_node(w, node, idx, n, NS_EV_DELETE, 1, announce);
	for (unsigned int k = 0; k < n; k++) {
		w->table[idx[k]] = kept[k];
		w->live[idx[k]] = 1;
	}
}

/* The counters of one gap mended by a repair that read values segments
 * and refused one of them: no resync, nothing loaded. */
static void expect_refused_one(const struct nsa_standby_stats *b,
			       const struct nsa_standby_stats *a,
			       uint64_t values)
{
	cr_assert_eq(a->gaps - b->gaps, 1);
	cr_assert_eq(a->repairs - b->repairs, 1);
	cr_assert_eq(a->repair_values - b->repair_values, values);
	cr_assert_eq(a->refused_segments - b->refused_segments, 1);
	cr_assert_eq(a->resyncs, b->resyncs, "a resync of the master");
	cr_assert_eq(a->load_values, b->load_values);
}

/* With a batch key, a segment read back whose HMAC is wrong is refused
 * for good (unauthenticated, refused_segments) as a notification would
 * be; readers leave it out too, so it costs the standby that segment's
 * sessions and nothing else: the repair goes on, no resync. The same for
 * a batch whose notification and segment are both forged: dropped live,
 * refused again when the gap after it is repaired. */
Test(repair, a_segment_refused_for_good_costs_its_sessions_not_the_master,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[400];

	batch_key = "repair-test-batch-key";
	writer_open(&w, SESSIONS + 10000);
	w.key = batch_key;
	sb = standby_start();
	cr_assert(wait_synced(sb, 20), "standby did not sync");
	write_range(&w, 0, SESSIONS, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 10), "table differs after the writes");
	nsa_standby_stats(sb, &before);
	cr_assert_eq(before.resyncs, w.topo.n_nodes);
	pick_on_node(&w, 2, 0, idx, 400);
	/* Stored only, then stored and announced (dropped live, and the
	 * next batch shows the gap): the repair reads it and refuses it. */
	for (unsigned int announce = 0; announce < 2; announce++) {
		nsa_standby_stats(sb, &before);
		write_refused(&w, 2, idx + 200 * announce, 100, 1, announce);
		write_on_node(&w, 2, idx + 200 * announce + 100, 100,
			      NS_EV_REFRESH, 1, 1);
		cr_assert(wait_exact(sb, &w, 15),
			  "the table differs from the store");
		/* A resync would begin with the gap: time to count it. */
		nsdp_sleep_ms(300);
		nsa_standby_stats(sb, &after);
		print_stats(announce ? "a forged batch announced"
				     : "a forged segment missed",
			    &before, &after);
		expect_refused_one(&before, &after, 1);
		/* refused live too when announced */
		cr_assert_eq(after.unauthenticated - before.unauthenticated,
			     1 + announce);
	}
	nsa_standby_free(sb);
	writer_close(&w);
	batch_key = "";
}

/* A batch whose segment the store refused (announced, not stored) is
 * written again by the active under a new seq, announced with
 * NS_BATCH_F_REWRITE: the standby reads back that segment alone and
 * applies it, no resync. A rewrite the store refused too (not stored)
 * is not found: the standby resyncs the master. */
Test(repair, a_rewritten_segment_is_read_back_alone, .init = cluster_up,
     .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[100];

	sb = pair_synced(&w, &before);
	pick_on_node(&w, 1, 0, idx, 100);
	/* Refused: announced only; then written again and announced. */
	write_on_node(&w, 1, idx, 100, NS_EV_REFRESH, 0, 1);
	w.flags = NS_BATCH_F_REWRITE;
	write_on_node(&w, 1, idx, 100, NS_EV_REFRESH, 1, 1);
	cr_assert(wait_exact(sb, &w, 10), "the table differs from the store");
	cr_assert_gt(wait_above(sb, offsetof(struct nsa_standby_stats, repairs),
				before.repairs, nsdp_now_s(), 5),
		     -1, "no repair");
	nsa_standby_stats(sb, &after);
	print_stats("a rewritten segment", &before, &after);
	cr_assert_eq(after.repairs - before.repairs, 1);
	cr_assert_eq(after.repair_values - before.repair_values, 1);
	cr_assert_eq(after.repair_bytes - before.repair_bytes, w.last_len);
	cr_assert_eq(after.gaps, before.gaps);
	cr_assert_eq(after.resyncs, before.resyncs, "a resync of the master");
	cr_assert_eq(after.load_values, before.load_values);

	/* The rewrite refused too: nothing to read back, a resync. */
	before = after;
	w.flags = NS_BATCH_F_REWRITE;
	write_on_node(&w, 1, idx, 100, NS_EV_REFRESH, 0, 1);
	cr_assert_gt(wait_above(sb, offsetof(struct nsa_standby_stats, resyncs),
				before.resyncs, nsdp_now_s(), 10),
		     -1, "no resync");
	nsa_standby_stats(sb, &after);
	print_stats("a rewrite not in the store", &before, &after);
	cr_assert_eq(after.repairs, before.repairs);
	cr_assert_eq(after.repair_values, before.repair_values);
	nsa_standby_free(sb);
	writer_close(&w);
}

/* A segment that no longer decodes (cut by a byte) in the middle of a gap
 * of three: the two around it are applied, it costs its sessions
 * (bad_values, refused_segments), and the master is not resynced. */
Test(repair, a_segment_that_does_not_decode_costs_its_sessions,
     .init = cluster_up, .fini = cluster_down)
{
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[300];

	sb = pair_synced(&w, &before);
	pick_on_node(&w, 0, 0, idx, 300);
	write_on_node(&w, 0, idx, 100, NS_EV_REFRESH, 1, 0);
	write_refused(&w, 0, idx + 100, 100, 0, 0);
	write_on_node(&w, 0, idx + 200, 100, NS_EV_DELETE, 1, 0);
	write_range(&w, SESSIONS, 3000, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 15), "the table differs from the store");
	nsdp_sleep_ms(300);
	nsa_standby_stats(sb, &after);
	print_stats("3 lost announcements, the second segment cut", &before,
		    &after);
	expect_refused_one(&before, &after, 3);
	cr_assert_eq(after.repair_bytes - before.repair_bytes,
		     w.unannounced_bytes);
	cr_assert_eq(after.bad_values - before.bad_values, 1);
	cr_assert_eq(after.resyncs, before.resyncs, "a resync of the master");
	cr_assert_eq(after.load_values, before.load_values);
	nsa_standby_free(sb);
	writer_close(&w);
}

/* The keys layout's equivalent: a stored value that is not a session, or
 * a session's record under another session's key, costs that key alone
 * (bad_values) in the cold load; the rest of the table is exact and the
 * live batches after it apply. */
Test(repair, keys_a_value_refused_costs_its_key, .init = cluster_up,
     .fini = cluster_down)
{
	const uint32_t n = 6000;
	struct nsa_standby_stats st;
	struct nsa_standby *sb;
	struct writer w;
	uint8_t k0[NS_KEY_LEN], k1[NS_KEY_LEN], rec[NS_RECORD_MAX_LEN];
	int rec_len;
	redisReply *r;

	writer_open(&w, n + 3000);
	for (uint32_t k = 0; k < n; k++) {
		struct ns_session s =
			nst_session(k % 3 ? 6 : 17, NS_EV_CREATE, 1, 1, 60000,
				    nsdp_realtime_ns());
		uint8_t key[NS_KEY_LEN];

		nst_session_flow(&s, k);
		ns_key_build(s.proto, &s.orig, key);
		rec_len = ns_record_encode(&s, rec, sizeof(rec));
		cr_assert_gt(rec_len, 0);
		r = redisCommand(w.c[node_of(&w, &s)], "SET %b %b PX 60000",
				 key, sizeof(key), rec, (size_t)rec_len);
		cr_assert(r && r->type == REDIS_REPLY_STATUS);
		freeReplyObject(r);
		w.table[k] = s;
		w.live[k] = 1;
	}
	/* Key 10 holds garbage; key 11 holds session 12's record. */
	ns_key_build(w.table[10].proto, &w.table[10].orig, k0);
	ns_key_build(w.table[11].proto, &w.table[11].orig, k1);
	rec_len = ns_record_encode(&w.table[12], rec, sizeof(rec));
	r = redisCommand(w.c[node_of(&w, &w.table[10])], "SET %b %s", k0,
			 sizeof(k0), "not a record");
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	r = redisCommand(w.c[node_of(&w, &w.table[11])], "SET %b %b", k1,
			 sizeof(k1), rec, (size_t)rec_len);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	w.live[10] = w.live[11] = 0;
	layout = NSA_LAYOUT_KEYS;
	sb = standby_start_for(n);
	layout = NSA_LAYOUT_LOG;
	cr_assert(wait_synced(sb, 20), "standby did not sync");
	cr_assert(wait_exact(sb, &w, 10), "the table differs from the store");
	write_range(&w, n, 3000, NS_EV_CREATE, 0, 1);
	cr_assert(wait_exact(sb, &w, 10), "the live batches did not apply");
	nsa_standby_stats(sb, &st);
	cr_assert_eq(st.loaded, n - 2);
	cr_assert_eq(st.bad_values, 2);
	cr_assert_eq(st.resyncs, w.topo.n_nodes);
	cr_assert_eq(st.gaps, 0);
	cr_assert_eq(st.refused_segments, 0);
	nsa_standby_free(sb);
	writer_close(&w);
}

/* What mending one lost announcement costs, read back or resynced: the
 * table's size from NATSYNC_REPAIR_SESSIONS (default 100 000), and
 * [standby] repair_max_segments from NATSYNC_REPAIR_MAX (default 64; 0:
 * the resync, as before the repair). Prints what was read and how long
 * until the counter moved (docs/performance.md). */
Test(repair, one_lost_announcement_measured, .init = cluster_up,
     .fini = cluster_down, .timeout = 300)
{
	const char *env_n = getenv("NATSYNC_REPAIR_SESSIONS");
	const char *env_max = getenv("NATSYNC_REPAIR_MAX");
	const uint32_t n = env_n ? (uint32_t)strtoul(env_n, NULL, 10) : 100000;
	struct nsa_standby_stats before, after;
	struct nsa_standby *sb;
	struct writer w;
	uint32_t idx[512];
	double t0, secs;

	repair_max = env_max ? (unsigned int)strtoul(env_max, NULL, 10) : 64;
	cr_assert_geq(n, 10000);
	writer_open(&w, n + 1000);
	sb = standby_start_for(n);
	cr_assert(wait_synced(sb, 20), "standby did not sync");
	write_range(&w, 0, n, NS_EV_CREATE, 1, 1);
	cr_assert(wait_exact(sb, &w, 60), "table differs after the writes");
	nsa_standby_stats(sb, &before);
	pick_on_node(&w, 1, 0, idx, 512);
	write_on_node(&w, 1, idx, 256, NS_EV_REFRESH, 1, 0);
	t0 = nsdp_now_s();
	write_on_node(&w, 1, idx + 256, 256, NS_EV_REFRESH, 1, 1);
	secs = repair_max
		       ? wait_above(sb,
				    offsetof(struct nsa_standby_stats, repairs),
				    before.repairs, t0, 60)
		       : wait_above(sb,
				    offsetof(struct nsa_standby_stats, resyncs),
				    before.resyncs, t0, 60);
	cr_assert_geq(secs, 0, "neither repaired nor resynced in 60 s");
	cr_assert(wait_exact(sb, &w, 60), "the table differs from the store");
	nsa_standby_stats(sb, &after);
	printf("MEASURE sessions=%u repair_max_segments=%u seconds=%.6f "
	       "repairs=%lu resyncs=%lu repair_values=%lu repair_bytes=%lu "
	       "load_values=%lu load_bytes=%lu\n",
	       n, repair_max, secs,
	       (unsigned long)(after.repairs - before.repairs),
	       (unsigned long)(after.resyncs - before.resyncs),
	       (unsigned long)(after.repair_values - before.repair_values),
	       (unsigned long)(after.repair_bytes - before.repair_bytes),
	       (unsigned long)(after.load_values - before.load_values),
	       (unsigned long)(after.load_bytes - before.load_bytes));
	cr_assert_eq(after.gaps - before.gaps, 1);
	if (repair_max) {
		cr_assert_eq(after.repairs - before.repairs, 1);
		cr_assert_eq(after.repair_values - before.repair_values, 1);
		cr_assert_eq(after.resyncs, before.resyncs);
	} else {
		cr_assert_eq(after.resyncs - before.resyncs, 1);
		cr_assert_eq(after.repair_values, before.repair_values);
	}
	nsa_standby_free(sb);
	writer_close(&w);
	repair_max = 64;
}
