/*
 * test_logcompact.c - the log layout's compaction (agent/log/nsa_compact.h)
 * under the faults that once made it lose live sessions: writers whose
 * clocks disagree, a clock stepped during a round, a master failed over
 * without the newest mark, a forged mark. Segments are written here as a
 * writer writes them (schema/FORMAT.md, Segment key), by publishers whose
 * clock can be set off the host's, into real redis-server stores; rounds
 * run through the library, and each test ends with a cold load of every
 * master (nsa_loader_run) that must hold exactly the sessions the writes
 * leave, record for record.
 *
 * Ports 7910-7925.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_compact.h"
#include "nsa_loader.h"
#include "nsa_logmerge.h"
#include "nsdp_time.h"
#include "nst_session.h"
#include "nst_store.h"

#define SKEW_PORT 7910 /* plain */
#define STEP_PORT 7911 /* plain */
#define FORGED_PORT 7912 /* plain */
#define FAILOVER_PORT 7913 /* 6 nodes: 7913-7918 */
#define BUDGET_PORT 7919 /* plain */
#define RESHARD_PORT 7920 /* 3 nodes: 7920-7922 */
#define PAIRS_PORT 7923 /* 3 nodes: 7923-7925 */
#define FLOWS 20000
#define BATCH 200
#define GRACE_MS 200
#define BATCH_KEY "0123456789abcdef0123456789abcdef"

/* ---- a store and what it should hold ----------------------------------- */

struct store {
	int port;
	struct nsa_store_conf sc;
	struct nsa_topology topo;
	redisContext *c[NSA_MAX_NODES];
	/* The table the writes leave: the newest record of flow i. */
	struct ns_session want[FLOWS];
	uint8_t written[FLOWS];
};

static struct store st;

static void store_connect(struct store *s)
{
	char err[256];

	for (unsigned int i = 0; i < NSA_MAX_NODES; i++)
		if (s->c[i]) {
			redisFree(s->c[i]);
			s->c[i] = NULL;
		}
	cr_assert_eq(nsa_topology_fetch(&s->sc, &s->topo, err, sizeof(err)), 0,
		     "topology: %s", err);
	for (unsigned int i = 0; i < s->topo.n_nodes; i++) {
		s->c[i] = redisConnect(s->topo.nodes[i].addr.host,
				       s->topo.nodes[i].addr.port);
		cr_assert(s->c[i] && !s->c[i]->err);
	}
}

static void store_open(int port, int masters, int replicas)
{
	memset(&st, 0, sizeof(st));
	st.port = port;
	cr_assert_eq(nst_store_start_fresh(port, masters, replicas), 0);
	/* Every node a seed: any survivor of a failover answers. */
	for (int i = 0; i < (masters ? masters * (1 + replicas) : 1); i++) {
		snprintf(st.sc.seeds[i].host, sizeof(st.sc.seeds[i].host),
			 "127.0.0.1");
		st.sc.seeds[i].port = (uint16_t)(port + i);
		st.sc.n_seeds++;
	}
	st.sc.connect_timeout_ms = 1000;
	st.sc.layout = NSA_LAYOUT_LOG;
	store_connect(&st);
}

static void store_down(void)
{
	for (unsigned int i = 0; i < NSA_MAX_NODES; i++)
		if (st.c[i]) {
			redisFree(st.c[i]);
			st.c[i] = NULL;
		}
	if (st.port)
		nst_store_stop(st.port);
}

/* ---- a writer whose clock may be off the host's ------------------------ */

struct writer {
	uint32_t publisher_id, epoch;
	int64_t clock_offset_ns; /* its CLOCK_REALTIME minus the host's */
	const char *key; /* sign with this batch key, or NULL */
	uint64_t seq[NS_SLOTS]; /* per channel slot */
};

static uint64_t writer_now(const struct writer *w)
{
	return (uint64_t)((int64_t)nsdp_realtime_ns() + w->clock_offset_ns);
}

/* The N of the segment keys of channel slot ("ns:l:{N}:..."). */
static uint32_t segment_tag(uint16_t slot)
{
	char k[NS_SEGMENT_KEY_MAX];

	cr_assert_gt(ns_segment_key(slot, 1, 1, k), 0);
	return (uint32_t)strtoul(k + strlen(NS_SEGMENT_PREFIX) + 1, NULL, 10);
}

static struct ns_session flow(const struct writer *w, uint32_t i, uint8_t event)
{
	struct ns_session s = nst_session(i % 3 ? 6 : 17, event, 1, w->epoch,
					  600000, writer_now(w));

	nst_session_flow(&s, i);
	return s;
}

static unsigned int node_of(const struct ns_session *s)
{
	uint8_t k[NS_KEY_LEN];
	uint16_t slot;

	ns_key_build(s->proto, &s->orig, k);
	slot = ns_key_slot(k, NS_KEY_LEN);
	return st.topo.slot_covered[slot] ? st.topo.slot_node[slot] : 0;
}

/* A SET of key refused with MOVED or ASK (its slot moving) made again
 * where it says, as a writer does; r itself otherwise. */
static redisReply *redirected(redisReply *r, const char *key, const uint8_t *v,
			      size_t len)
{
	char host[64];
	int port, ask;
	redisContext *c;

	if (r == NULL || r->type != REDIS_REPLY_ERROR)
		return r;
	ask = strncmp(r->str, "ASK ", 4) == 0;
	if (!ask && strncmp(r->str, "MOVED ", 6) != 0)
		return r;
	cr_assert_eq(
		sscanf(strchr(r->str + 4, ' ') + 1, "%63[^:]:%d", host, &port),
		2);
	freeReplyObject(r);
	c = redisConnect(host, port);
	cr_assert(c && !c->err);
	if (ask)
		freeReplyObject(redisCommand(c, "ASKING"));
	r = redisCommand(c, "SET %s %b", key, v, len);
	redisFree(c);
	return r;
}

/* One segment of n records on master node, sent at the writer's clock. */
static void segment_put(struct writer *w, unsigned int node,
			const struct ns_session *s, unsigned int n)
{
	static uint8_t buf[NS_BATCH_MAX_LEN];
	const uint16_t slot = st.topo.nodes[node].channel_slot;
	struct ns_batch_hdr h = {
		.publisher_id = w->publisher_id,
		.gateway_id = 1,
		.epoch = w->epoch,
		.count = (uint16_t)n,
		.flags = w->key ? NS_BATCH_F_HMAC : 0,
		.seq = ++w->seq[slot],
		.channel_slot = slot,
	};
	char key[NS_SEGMENT_KEY_MAX];
	size_t len = NS_BATCH_HDR_LEN;
	redisReply *r;

	for (unsigned int i = 0; i < n; i++) {
		int l = ns_record_encode(&s[i], buf + len, sizeof(buf) - len);

		cr_assert_gt(l, 0);
		len += (size_t)l;
	}
	h.body_len = (uint32_t)(len - NS_BATCH_HDR_LEN);
	h.sent_ns = writer_now(w);
	ns_batch_hdr_encode(&h, buf);
	if (w->key) {
		cr_assert_eq(ns_batch_mac((const uint8_t *)w->key,
					  strlen(w->key), buf, len, buf + len),
			     0);
		len += NS_BATCH_MAC_LEN;
	}
	cr_assert_gt(ns_segment_key(slot, w->publisher_id, h.seq, key), 0);
	r = redisCommand(st.c[node], "SET %s %b", key, buf, len);
	r = redirected(r, key, buf, len);
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "SET %s: %s", key,
		  r ? r->str : st.c[node]->errstr);
	freeReplyObject(r);
}

/* Flows [first, first + n) with event, in segments of up to BATCH records
 * per master; what they leave is recorded in st.want. */
static void write_flows(struct writer *w, uint32_t first, uint32_t n,
			uint8_t event)
{
	static struct ns_session per[NSA_MAX_NODES][BATCH];
	unsigned int count[NSA_MAX_NODES] = {0};

	for (uint32_t i = first; i < first + n; i++) {
		struct ns_session s = flow(w, i, event);
		unsigned int node = node_of(&s);

		cr_assert_lt(i, FLOWS);
		st.want[i] = s;
		st.written[i] = 1;
		per[node][count[node]++] = s;
		if (count[node] == BATCH) {
			segment_put(w, node, per[node], BATCH);
			count[node] = 0;
		}
	}
	for (unsigned int node = 0; node < st.topo.n_nodes; node++)
		if (count[node])
			segment_put(w, node, per[node], count[node]);
}

/* ---- a cold load of every master --------------------------------------- */

struct loaded {
	struct ns_session got[FLOWS];
	uint8_t seen[FLOWS];
	uint64_t n, foreign, dup, bad, unauth;
};

static unsigned int load_apply(void *arg, unsigned int node,
			       const struct ns_session *s, unsigned int n)
{
	struct loaded *l = arg;

	(void)node;
	for (unsigned int i = 0; i < n; i++) {
		/* nst_session_flow: flow i's source is 10.0.0.0 + i. */
		uint32_t f = s[i].orig.saddr - 0x0a000000u;

		if (f >= FLOWS) {
			l->foreign++;
			continue;
		}
		l->dup += l->seen[f];
		l->seen[f] = 1;
		l->got[f] = s[i];
		l->n++;
	}
	return n;
}

static void load_bad(void *arg, uint64_t n)
{
	((struct loaded *)arg)->bad += n;
}

static void load_unauth(void *arg, uint64_t n)
{
	((struct loaded *)arg)->unauth += n;
}

/* Load every master as a standby's cold load does; the counts in l. */
static void load_all(struct loaded *l, const char *key)
{
	const struct nsa_loader_sink sink = {
		.apply = load_apply,
		.bad = load_bad,
		.unauthenticated = load_unauth,
		.arg = l,
		.batch_key = key,
		.batch_key_len = key ? strlen(key) : 0,
	};
	char err[256];

	memset(l, 0, sizeof(*l));
	for (unsigned int i = 0; i < st.topo.n_nodes; i++) {
		int rc = nsa_loader_run(&st.sc, &st.topo, i, st.topo.cluster,
					&sink, 5000, err, sizeof(err));

		cr_assert_eq(rc, NSA_LOADER_DONE, "load of master %u: %d %s", i,
			     rc, err);
	}
}

/* The live sessions the writes leave. */
static uint64_t want_live(void)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < FLOWS; i++)
		n += st.written[i] && st.want[i].event != NS_EV_DELETE;
	return n;
}

/* A cold load holds exactly what the writes leave: every live session with
 * its newest record, nothing else. */
static void assert_exact(const char *when, const char *key)
{
	static struct loaded l;
	uint64_t missing = 0, extra = 0, stale = 0;

	load_all(&l, key);
	for (uint32_t i = 0; i < FLOWS; i++) {
		int live = st.written[i] && st.want[i].event != NS_EV_DELETE;

		if (live && !l.seen[i])
			missing++;
		else if (!live && l.seen[i])
			extra++;
		else if (live &&
			 memcmp(&l.got[i], &st.want[i],
				offsetof(struct ns_session, reserved)) != 0)
			stale++;
	}
	printf("%s: loaded %llu of %llu live, %llu missing, %llu deleted "
	       "back, %llu with an older record, %llu unauthenticated\n",
	       when, (unsigned long long)l.n, (unsigned long long)want_live(),
	       (unsigned long long)missing, (unsigned long long)extra,
	       (unsigned long long)stale, (unsigned long long)l.unauth);
	cr_assert_eq(missing + extra + stale + l.dup + l.foreign + l.bad, 0,
		     "%s: %llu missing, %llu deleted sessions back, %llu "
		     "older records, %llu twice, %llu foreign, %llu bad",
		     when, (unsigned long long)missing,
		     (unsigned long long)extra, (unsigned long long)stale,
		     (unsigned long long)l.dup, (unsigned long long)l.foreign,
		     (unsigned long long)l.bad);
	cr_assert_eq(l.n, want_live());
}

/* ---- rounds ------------------------------------------------------------ */

static void round_print(uint32_t id, uint64_t gen, int rc,
			const struct nsa_compact_result *res, const char *err)
{
	cr_assert_eq(rc, 0, "round %llx:%llu: %d %s", (unsigned long long)id,
		     (unsigned long long)gen, rc, err);
	printf("round %08x:%llu: %llu segments, %llu records, %llu live, "
	       "%llu deletes kept, %u pass(es), merge peak %llu B, %u "
	       "families held\n",
	       id, (unsigned long long)gen, (unsigned long long)res->segments,
	       (unsigned long long)res->records, (unsigned long long)res->live,
	       (unsigned long long)res->tombstones, res->passes,
	       (unsigned long long)res->merge_peak_bytes, res->families_held);
}

/* One round over every master by compactor id whose clock reads
 * clock_offset_ns off the host's, with the batch key key. No writer runs
 * meanwhile: the round merges what it lists (no sighting). */
static int round_run(uint32_t id, uint64_t gen, uint32_t epoch,
		     int64_t clock_offset_ns, const char *key,
		     struct nsa_compact_result *res, char *err)
{
	const struct nsa_compact_round rd = {
		.id = id,
		.gen = gen,
		.epoch = epoch,
		.key = key,
		.key_len = key ? strlen(key) : 0,
		.grace_ms = GRACE_MS,
	};

	/* What a round covers reads no clock: the offset changes nothing. */
	(void)clock_offset_ns;
	return nsa_compact_all(&st.sc, &st.topo, &rd, res, err, 256);
}

static void round_ok(uint32_t id, uint64_t gen, uint32_t epoch,
		     int64_t clock_offset_ns, const char *key)
{
	struct nsa_compact_result res;
	char err[256] = "";
	int rc = round_run(id, gen, epoch, clock_offset_ns, key, &res, err);

	round_print(id, gen, rc, &res, err);
}

/* Past the expiries of the rounds so far (two grace periods). */
static void expiries_pass(void)
{
	nsdp_sleep_ms(2 * GRACE_MS + 300);
}

TestSuite(logcompact, .fini = store_down, .timeout = 120);

/* A gateway whose clock is 10 s behind its predecessor's is promoted (a
 * new epoch) after the predecessor's compactor ran a round: what it
 * writes, deletes and refreshes included, is in every cold load, before
 * and after its own compactor's rounds. */
Test(logcompact, segments_of_a_promoted_gateway_10_s_behind_stay_visible)
{
	struct writer a = {.publisher_id = 0xa0000001u, .epoch = 1};
	struct writer b = {.publisher_id = 0xb0000001u,
			   .epoch = 2,
			   .clock_offset_ns = -10 * (int64_t)NSDP_NS_PER_S};

	store_open(SKEW_PORT, 0, 0);
	write_flows(&a, 0, 2000, NS_EV_CREATE);
	nsdp_sleep_ms(20);
	round_ok(0xa00000ffu, 1, 1, 0, NULL);
	assert_exact("after the first gateway's round", NULL);

	write_flows(&b, 0, 200, NS_EV_DELETE);
	write_flows(&b, 200, 200, NS_EV_REFRESH);
	write_flows(&b, 2000, 200, NS_EV_CREATE);
	assert_exact("the promoted gateway's writes", NULL);
	nsdp_sleep_ms(20);
	round_ok(0xb00000ffu, 1, 2, b.clock_offset_ns, NULL);
	expiries_pass();
	assert_exact("after the promoted gateway's round", NULL);
	write_flows(&b, 2200, 100, NS_EV_CREATE);
	round_ok(0xb00000ffu, 2, 2, b.clock_offset_ns, NULL);
	expiries_pass();
	assert_exact("after its second round", NULL);
}

/* The host's clock steps an hour forward while a round runs (the round
 * and the segments then signed read it) and back afterwards: the
 * segments written after the step back, deletes included, are in every
 * cold load and in the next round. */
Test(logcompact, segments_after_a_clock_stepped_during_a_round_stay_visible)
{
	const int64_t hour = 3600 * (int64_t)NSDP_NS_PER_S;
	struct writer w = {.publisher_id = 0xc0000001u, .epoch = 1};

	store_open(STEP_PORT, 0, 0);
	write_flows(&w, 0, 1000, NS_EV_CREATE);
	w.clock_offset_ns = hour;
	write_flows(&w, 1000, 200, NS_EV_CREATE);
	round_ok(0xc00000ffu, 1, 1, hour, NULL);
	w.clock_offset_ns = 0;
	write_flows(&w, 0, 100, NS_EV_DELETE);
	write_flows(&w, 1200, 300, NS_EV_CREATE);
	assert_exact("after the step back", NULL);
	round_ok(0xc00000ffu, 2, 1, 0, NULL);
	expiries_pass();
	assert_exact("after the next round", NULL);
}

/* With a batch key, a mark that anyone who may write ns:* set to cover
 * every segment (and name no checkpoint) is refused and counted: the
 * cold load and the next round keep every session. */
Test(logcompact, a_forged_mark_is_refused_and_counted)
{
	struct writer w = {
		.publisher_id = 0xd0000001u, .epoch = 1, .key = BATCH_KEY};
	static struct nsa_logmark forged;
	static char text[NSA_LOGMARK_MAX];
	char mark[NS_SEGMENT_KEY_MAX];
	redisReply *r;
	int len;

	store_open(FORGED_PORT, 0, 0);
	write_flows(&w, 0, 1000, NS_EV_CREATE);
	round_ok(0xd00000ffu, 1, 1, 0, BATCH_KEY);
	write_flows(&w, 1000, 500, NS_EV_CREATE);
	write_flows(&w, 0, 100, NS_EV_DELETE);

	/* A newer round than any, covering every seq of the writer's family
	 * and naming no checkpoint there is, not signed. */
	forged.set = 1;
	forged.id = 0x0badbad0u;
	forged.gen = 0xffff;
	forged.parts = 1;
	forged.grace_ms = 60000;
	forged.n_covers = 1;
	forged.cover[0].tag = segment_tag(st.topo.nodes[0].channel_slot);
	forged.cover[0].publisher = w.publisher_id;
	forged.cover[0].seq = UINT64_MAX;
	len = nsa_logmark_format(&forged, NULL, 0, text, sizeof(text));
	cr_assert_gt(len, 0);
	nsa_logmark_key(st.topo.nodes[0].channel_slot, mark, sizeof(mark));
	r = redisCommand(st.c[0], "SET %s %b", mark, text, (size_t)len);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	assert_exact("under the forged mark", BATCH_KEY);
	round_ok(0xd00000ffu, 2, 1, 0, BATCH_KEY);
	expiries_pass();
	assert_exact("after the next round", BATCH_KEY);
}

/* The pid of redis-server on port p of the store started at base. */
static int redis_pid(int base, int p)
{
	char path[2300];
	FILE *f;
	int pid = 0;

	snprintf(path, sizeof(path), "%.2000s/%d/%d/redis.pid",
		 nst_build("tests/run"), base, p);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return pid;
}

/* The port of master 0's replica (CLUSTER REPLICAS, from master 0; the
 * cluster's view of it may come a moment after the store started). */
static int replica_port_of_master0(void)
{
	redisReply *id = redisCommand(st.c[0], "CLUSTER MYID"), *r = NULL;
	const char *colon;
	int port, i;

	cr_assert(id && id->type == REDIS_REPLY_STRING);
	for (i = 0; i < 100; i++) {
		r = redisCommand(st.c[0], "CLUSTER REPLICAS %s", id->str);
		if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1)
			break;
		freeReplyObject(r);
		r = NULL;
		nsdp_sleep_ms(100);
	}
	freeReplyObject(id);
	cr_assert_not_null(r, "master 0 has no replica");
	colon = strchr(r->element[0]->str, ':');
	cr_assert_not_null(colon);
	port = atoi(colon + 1);
	freeReplyObject(r);
	return port;
}

/* Master 0 is failed over right after a round to a replica that holds the
 * round before's mark (the newest never reached it), while the other
 * masters hold the newest. The next round must take the newest mark, not
 * master 0's: every session stays, on every master. */
Test(logcompact,
     a_round_after_master_0_lost_the_newest_mark_keeps_every_session,
     .timeout = 180)
{
	struct writer w = {.publisher_id = 0xe0000001u, .epoch = 1};
	char mark[NS_SEGMENT_KEY_MAX];
	redisReply *r, *old;
	int replica, i;
	redisContext *rc;

	store_open(FAILOVER_PORT, 3, 1);
	write_flows(&w, 0, 3000, NS_EV_CREATE);
	round_ok(0xe00000ffu, 1, 1, 0, NULL);
	nsa_logmark_key(st.topo.nodes[0].channel_slot, mark, sizeof(mark));
	old = redisCommand(st.c[0], "GET %s", mark);
	cr_assert(old && old->type == REDIS_REPLY_STRING, "no mark %s", mark);

	write_flows(&w, 0, 300, NS_EV_DELETE);
	write_flows(&w, 3000, 300, NS_EV_CREATE);
	nsdp_sleep_ms(20);
	round_ok(0xe00000ffu, 2, 1, 0, NULL);

	/* Master 0's replica holds the first round's mark, not the second's,
	 * and is promoted. */
	r = redisCommand(st.c[0], "SET %s %b", mark, old->str, old->len);
	cr_assert(r && r->type == REDIS_REPLY_STATUS);
	freeReplyObject(r);
	freeReplyObject(old);
	r = redisCommand(st.c[0], "WAIT 1 2000");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
	freeReplyObject(r);
	replica = replica_port_of_master0();
	kill(redis_pid(FAILOVER_PORT, st.topo.nodes[0].addr.port), SIGKILL);
	rc = redisConnect("127.0.0.1", replica);
	cr_assert(rc && !rc->err);
	r = redisCommand(rc, "CLUSTER FAILOVER TAKEOVER");
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "%s", r ? r->str : "");
	freeReplyObject(r);
	for (i = 0; i < 100; i++) {
		r = redisCommand(rc, "ROLE");
		if (r && r->type == REDIS_REPLY_ARRAY &&
		    strcmp(r->element[0]->str, "master") == 0) {
			freeReplyObject(r);
			break;
		}
		freeReplyObject(r);
		nsdp_sleep_ms(100);
	}
	cr_assert_lt(i, 100, "the replica was not promoted");
	redisFree(rc);
	nsdp_sleep_ms(1000);
	store_connect(&st);
	expiries_pass();

	round_ok(0xe00000ffu, 3, 1, 0, NULL);
	expiries_pass();
	assert_exact("after the round that followed the failover", NULL);
}

/* A round whose budget holds a fraction of the table merges it a range of
 * slots at a time: several passes, none holding more than the budget,
 * the checkpoint's batches written between them, and the table reads
 * back exact, deletes kept out. */
Test(logcompact, a_round_under_a_budget_smaller_than_the_table_keeps_it_exact)
{
	const size_t budget = 128 * 1024;
	struct writer w = {.publisher_id = 0xf0000001u, .epoch = 1};
	struct nsa_compact_result res;
	char err[256] = "";
	struct nsa_compact_round rd = {.id = 0xf00000ffu,
				       .gen = 1,
				       .epoch = 1,
				       .grace_ms = GRACE_MS,
				       .budget_bytes = budget};
	int rc;

	store_open(BUDGET_PORT, 0, 0);
	write_flows(&w, 0, FLOWS, NS_EV_CREATE);
	write_flows(&w, 0, FLOWS / 2, NS_EV_REFRESH);
	write_flows(&w, 0, FLOWS / 10, NS_EV_DELETE);
	rc = nsa_compact_all(&st.sc, &st.topo, &rd, &res, err, sizeof(err));
	round_print(rd.id, rd.gen, rc, &res, err);
	cr_assert_geq(res.passes, 4);
	cr_assert_leq(res.merge_peak_bytes, budget / 2);
	cr_assert_eq(res.records, FLOWS + FLOWS / 2 + FLOWS / 10);
	cr_assert_eq(res.live, FLOWS - FLOWS / 10);
	cr_assert_eq(res.tombstones, FLOWS / 10);
	expiries_pass();
	assert_exact("after the round in passes", NULL);

	/* The next round reads the checkpoint in passes too, and drops the
	 * deletes it kept. */
	write_flows(&w, FLOWS / 2, 100, NS_EV_DELETE);
	rd.gen = 2;
	rc = nsa_compact_all(&st.sc, &st.topo, &rd, &res, err, sizeof(err));
	round_print(rd.id, rd.gen, rc, &res, err);
	cr_assert_geq(res.passes, 4);
	cr_assert_leq(res.merge_peak_bytes, budget / 2);
	cr_assert_eq(res.tombstones, 100);
	cr_assert_eq(res.live, FLOWS - FLOWS / 10 - 100);
	expiries_pass();
	assert_exact("after the second round in passes", NULL);
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
	redisReply *r =
		redisCommand(c, "CLUSTER SETSLOT %u %s %s", slot, how, id);

	cr_assert(r && r->type == REDIS_REPLY_STATUS, "SETSLOT %u %s: %s", slot,
		  how, r ? r->str : c->errstr);
	freeReplyObject(r);
}

/* MIGRATE every key of slot from master from to master to. */
static void migrate_keys(unsigned int from, unsigned int to, unsigned int slot)
{
	const struct nsa_addr *dst = &st.topo.nodes[to].addr;
	redisReply *keys = redisCommand(
		st.c[from], "CLUSTER GETKEYSINSLOT %u 100000", slot);

	cr_assert(keys && keys->type == REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < keys->elements; i++) {
		redisReply *r = redisCommand(
			st.c[from], "MIGRATE %s %u %b 0 5000 KEYS %b",
			dst->host, dst->port, "", (size_t)0,
			keys->element[i]->str, keys->element[i]->len);

		cr_assert(r && r->type == REDIS_REPLY_STATUS, "MIGRATE: %s",
			  r ? r->str : "");
		freeReplyObject(r);
	}
	freeReplyObject(keys);
}

/* A round in the middle of everything: it completes (rc 0). */
static void round_during(uint64_t gen, const char *when)
{
	struct nsa_compact_result res;
	char err[256] = "";
	int rc = round_run(0x5e0000ffu, gen, 1, 0, NULL, &res, err);

	printf("%s: ", when);
	round_print(0x5e0000ffu, gen, rc, &res, err);
}

/* Slots move from the last master to the first one at a time, its
 * channel slot first (its segments, checkpoint and mark move with it):
 * a round runs while each slot is migrating, half its keys moved, and
 * after, with writes in between. Every round completes, and the table
 * reads back exact. */
Test(logcompact, rounds_while_slots_migrate_complete_and_keep_every_session,
     .timeout = 240)
{
	struct writer w = {.publisher_id = 0x5e000001u, .epoch = 1};
	char src[41], dst[41];
	unsigned int first, s, i;
	uint64_t gen = 1;

	store_open(RESHARD_PORT, 3, 0);
	write_flows(&w, 0, 2000, NS_EV_CREATE);
	round_during(gen++, "before");
	write_flows(&w, 2000, 500, NS_EV_CREATE);
	write_flows(&w, 0, 100, NS_EV_DELETE);
	node_id(st.c[2], src);
	node_id(st.c[0], dst);
	first = st.topo.nodes[2].channel_slot;
	for (s = first; s < first + 4; s++) {
		setslot(st.c[0], s, "IMPORTING", src);
		setslot(st.c[2], s, "MIGRATING", dst);
		round_during(gen++, "slot migrating");
		write_flows(&w, 2500 + (s - first) * 100, 100, NS_EV_CREATE);
		write_flows(&w, 100 + (s - first) * 50, 50, NS_EV_DELETE);
		migrate_keys(2, 0, s);
		round_during(gen++, "keys moved");
		for (i = 0; i < 3; i++)
			setslot(st.c[i], s, "NODE", dst);
		round_during(gen++, "slot moved");
		store_connect(&st);
		write_flows(&w, 200 + (s - first) * 50, 50, NS_EV_REFRESH);
	}
	round_during(gen++, "after");
	expiries_pass();
	assert_exact("after the slots moved", NULL);
	write_flows(&w, 3000, 100, NS_EV_CREATE);
	round_during(gen++, "once more");
	expiries_pass();
	assert_exact("after one more round", NULL);
}

static void replica_cmd(int port, const char *cmd)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *r;

	cr_assert(c && !c->err);
	r = redisCommand(c, cmd);
	cr_assert(r && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
		  r ? r->str : c->errstr);
	freeReplyObject(r);
	redisFree(c);
}

/* Master 0's replica stops replicating (it cannot log in again after its
 * link is cut), a round runs, and master 0 dies right after it: the
 * replica, promoted by force, never got that round's checkpoint nor its
 * mark while the other masters did, had the round not waited for a
 * replica. A round whose checkpoint no replica acknowledged (WAIT) stops
 * before its marks and expiries; after the failover the next round keeps
 * every session of every master. */
Test(logcompact, a_master_failed_over_right_after_a_round_loses_no_session,
     .timeout = 180)
{
	struct writer w = {.publisher_id = 0xe1000001u, .epoch = 1};
	struct nsa_compact_result res;
	char err[256] = "";
	int replica, rc, i;
	redisContext *c;
	redisReply *r;

	store_open(FAILOVER_PORT, 3, 1);
	write_flows(&w, 0, 3000, NS_EV_CREATE);
	round_ok(0xe10000ffu, 1, 1, 0, NULL);

	replica = replica_port_of_master0();
	replica_cmd(replica, "CONFIG SET masteruser natsync-nobody");
	replica_cmd(replica, "CONFIG SET masterauth not-the-password");
	r = redisCommand(st.c[0], "CLIENT KILL TYPE replica");
	cr_assert(r && r->type == REDIS_REPLY_INTEGER);
	freeReplyObject(r);

	/* Deletes and sessions of the other masters only: what master 0
	 * took after the cut dies with it (the writers' replay window
	 * brings that back, not compaction). */
	for (uint32_t f = 0; f < 3000; f++) {
		struct ns_session s = flow(&w, f, NS_EV_DELETE);

		if (f % 10 == 0 && node_of(&s) != 0)
			write_flows(&w, f, 1, NS_EV_DELETE);
	}
	for (uint32_t f = 3000; f < 3600; f++) {
		struct ns_session s = flow(&w, f, NS_EV_CREATE);

		if (node_of(&s) != 0)
			write_flows(&w, f, 1, NS_EV_CREATE);
	}
	rc = round_run(0xe10000ffu, 2, 1, 0, NULL, &res, err);
	printf("the round while master 0's replica is cut: %d %s\n", rc, err);

	kill(redis_pid(FAILOVER_PORT, st.topo.nodes[0].addr.port), SIGKILL);
	c = redisConnect("127.0.0.1", replica);
	cr_assert(c && !c->err);
	r = redisCommand(c, "CLUSTER FAILOVER TAKEOVER");
	cr_assert(r && r->type == REDIS_REPLY_STATUS, "%s", r ? r->str : "");
	freeReplyObject(r);
	for (i = 0; i < 100; i++) {
		r = redisCommand(c, "ROLE");
		if (r && r->type == REDIS_REPLY_ARRAY &&
		    strcmp(r->element[0]->str, "master") == 0) {
			freeReplyObject(r);
			break;
		}
		freeReplyObject(r);
		nsdp_sleep_ms(100);
	}
	cr_assert_lt(i, 100, "the replica was not promoted");
	redisFree(c);
	nsdp_sleep_ms(1000);
	store_connect(&st);
	expiries_pass();
	assert_exact("after the failover", NULL);
	round_ok(0xe10000ffu, 3, 1, 0, NULL);
	expiries_pass();
	assert_exact("after the round that followed it", NULL);
	cr_assert_neq(rc, 0, "the round went on without a replica");
	cr_assert(strstr(err, "no replica acknowledged") != NULL, "%s", err);
}

/* ---- two pairs' compactors at once ------------------------------------- */

/* One pair's active compacting: its own store conf (its pair's epoch
 * counter and writer name) and compactor id. */
struct pair_round {
	struct nsa_store_conf sc;
	uint32_t id;
	uint64_t gen;
	int rc;
	struct nsa_compact_result res;
	char err[256];
};

static void *pair_round_main(void *arg)
{
	struct pair_round *p = arg;
	const struct nsa_compact_round rd = {
		.id = p->id, .gen = p->gen, .epoch = 1, .grace_ms = GRACE_MS};

	p->rc = nsa_compact_all(&p->sc, &st.topo, &rd, &p->res, p->err,
				sizeof(p->err));
	return NULL;
}

/* The actives of two gateway pairs (1 and 2) compact one 3-master log at
 * once, round after round, while both pairs' writers write: a round
 * either completes or is skipped because the other pair's holds the
 * store's lease, at least one of each start completes, and after the
 * expiries a cold load holds exactly what the writes leave. */
Test(logcompact, two_pairs_compacting_at_once_lose_no_session)
{
	struct writer w[2] = {{.publisher_id = 0x00000101u, .epoch = 1},
			      {.publisher_id = 0x00000201u, .epoch = 1}};
	static struct pair_round p[2];
	unsigned int done = 0, skipped = 0;
	uint32_t next = 0;

	store_open(PAIRS_PORT, 3, 0);
	for (unsigned int i = 0; i < 2; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].sc = st.sc;
		p[i].sc.pair = i + 1;
		p[i].id = ((i + 1) << 8) | 0xffu;
	}
	for (unsigned int round = 0; round < 6; round++) {
		pthread_t t[2];

		write_flows(&w[round % 2], next, 400, NS_EV_CREATE);
		next += 400;
		for (unsigned int i = 0; i < 2; i++) {
			p[i].gen = round + 1;
			cr_assert_eq(pthread_create(&t[i], NULL,
						    pair_round_main, &p[i]),
				     0);
		}
		/* Segments listed by one round and not the other. */
		for (unsigned int k = 0; k < 4; k++) {
			write_flows(&w[k % 2], next, 100, NS_EV_CREATE);
			write_flows(&w[(k + 1) % 2], next - 300, 50,
				    NS_EV_DELETE);
			next += 100;
		}
		for (unsigned int i = 0; i < 2; i++) {
			cr_assert_eq(pthread_join(t[i], NULL), 0);
			printf("round %u of pair %u: %d %s\n", round, i + 1,
			       p[i].rc, p[i].err);
			cr_assert(p[i].rc == 0 || p[i].rc == -EBUSY,
				  "pair %u: %d %s", i + 1, p[i].rc, p[i].err);
			done += p[i].rc == 0;
			skipped += p[i].rc == -EBUSY;
		}
		expiries_pass();
		assert_exact("two pairs compacting", NULL);
	}
	printf("%u rounds completed, %u skipped (the other pair's lease)\n",
	       done, skipped);
	/* Every round released the lease. */
	for (unsigned int i = 0; i < st.topo.n_nodes; i++) {
		redisReply *r = redisCommand(st.c[i], "EXISTS %s",
					     NSA_COMPACT_LEASE_KEY);

		cr_assert(r);
		cr_assert(r->type != REDIS_REPLY_INTEGER || r->integer == 0);
		freeReplyObject(r);
	}
	cr_assert_geq(done, 6);
	cr_assert_eq(done + skipped, 12);
}
