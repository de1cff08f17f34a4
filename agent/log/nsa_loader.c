/*
 * nsa_loader.c - reading one master's sessions: list the keys, MGET the
 * values, hand the decoded sessions to a sink.
 *
 * A cluster master is read slot by slot: CLUSTER GETKEYSINSLOT for each
 * slot it owns (NSA_SLOT_WINDOW of them in flight), each answered by one
 * MGET of that slot's keys. A plain server (or a master that refuses
 * GETKEYSINSLOT) is read with SCAN MATCH ns:* and one MGET per SCAN reply
 * (one per slot on a cluster: MGET keys must share a slot).
 *
 * On a cluster the slot map may be out of date (slots moved since it was
 * read) or a slot half moved (MIGRATING here, IMPORTING on its target).
 * So after listing a slot the loader asks the node for a key of that slot
 * (MGET of the slot's channel name, which no one stores): a nil says the
 * node still serves the slot, MOVED that it does not (the map is stale),
 * ASK that it is migrating it, and then the target's half of the slot is
 * read there (ASKING + MGET, blocking: migrations are rare and short).
 * Only slots answered for are reported read (nsa_loader_slot_read).
 *
 * Invariants:
 * - Every command queues what its reply means; a key list lives until the
 *   last MGET that names its keys is answered (or the loader is closed).
 * - Only keys of natsync's length are read, and a value counts only when
 *   it decodes whole and its session builds the key it was stored under;
 *   the rest goes to the sink's bad counter.
 *
 * In the log layout ([store] layout = log) the keys read are the segments
 * (ns:l:*), each value a batch; they are merged (nsa_logmerge.h) and the
 * live records go to the sink once the load is done, so the sink sees the
 * table the keys layout would hold. On a cluster a segment stays in the
 * slot of the channel it was published on, so the records of a slot that
 * moved since lie on its former master: after its own master the loader
 * reads every other master's segments (SCAN) and keeps the records of its
 * master's slots. A load of every master thus reads every segment once per
 * master, and the merge holds only the master's own sessions. Only what
 * compaction's mark leaves in is merged (its checkpoint, the segments sent
 * after it: nsa_logmark_takes); the mark is read before the first keys,
 * before each other master's, and after the last value, and a load that
 * saw it change gives nothing and says NSA_LOADER_RACED.
 *
 * Not here: what a load means for a table (the sink decides), retries and
 * liveness (the caller watches last_rx_ns).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_slot.h"
#include "nsa_loader.h"
#include "nsdp_time.h"

/* Keys per SCAN (one MGET each). */
#define NSA_SCAN_COUNT "1000"
/* CLUSTER GETKEYSINSLOT requests kept in flight. */
#define NSA_SLOT_WINDOW 32
#define NSA_SLOT_MAX_KEYS "1000000000"
/* Sessions decoded ahead of their apply, so that the sink can prefetch
 * their table buckets. */
#define NSA_APPLY_CHUNK 16

enum load_op { OP_SCAN, OP_SLOT, OP_MGET, OP_PROBE, OP_MARK };

/* Keys of one SCAN or GETKEYSINSLOT reply, in the order the MGETs asked
 * for them (session keys only). */
struct key_batch {
	redisReply *reply; /* owns the key strings */
	redisReply **keys;
	unsigned int refs; /* MGETs still to answer */
	uint32_t order[];
};

static void key_batch_unref(struct key_batch *b)
{
	if (--b->refs == 0) {
		freeReplyObject(b->reply);
		free(b);
	}
}

void nsa_loader_close(struct nsa_loader *ld)
{
	nsa_logmerge_free(&ld->merge);
	if (ld->importer)
		redisFree(ld->importer);
	ld->importer = NULL;
	if (ld->conn == NULL)
		return;
	while (ld->conn->exp_count) {
		struct nsa_exp e = nsa_conn_exp_pop(ld->conn);

		if (e.kind == OP_MGET)
			key_batch_unref(e.ptr);
	}
	nsa_conn_free(ld->conn);
	ld->conn = NULL;
}

int nsa_loader_open(struct nsa_loader *ld, const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo, unsigned int node,
		    const struct nsa_loader_sink *sink, char *err,
		    size_t errlen)
{
	int rc;

	nsa_loader_close(ld);
	ld->conn = nsa_conn_new(&topo->nodes[node].addr);
	if (ld->conn == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = nsa_conn_open(ld->conn, conf, err, errlen);
	if (rc < 0) {
		nsa_conn_free(ld->conn);
		ld->conn = NULL;
		return rc;
	}
	ld->conf = conf;
	ld->topo = topo;
	ld->node = node;
	ld->sink = *sink;
	ld->log = conf->layout == NSA_LAYOUT_LOG;
	ld->conn_node = node;
	return 0;
}

static int send_scan(struct nsa_loader *ld, const char *cursor)
{
	const struct nsa_exp e = {.kind = OP_SCAN};

	nsa_conn_cmd(ld->conn, 6);
	nsa_conn_arg_str(ld->conn, "SCAN");
	nsa_conn_arg_str(ld->conn, cursor);
	nsa_conn_arg_str(ld->conn, "MATCH");
	nsa_conn_arg_str(ld->conn, ld->log ? NS_SEGMENT_PREFIX "*" : "ns:*");
	nsa_conn_arg_str(ld->conn, "COUNT");
	nsa_conn_arg_str(ld->conn, NSA_SCAN_COUNT);
	return nsa_conn_cmd_end(ld->conn, &e);
}

/* Log layout: ask for compaction's mark on the connection's master
 * (MGET, as the standby's ACL allows); its reply comes before those of
 * the key listings queued after it. */
static int send_mark(struct nsa_loader *ld)
{
	const struct nsa_exp e = {.kind = OP_MARK};
	char key[NS_SEGMENT_KEY_MAX];

	nsa_logmark_key(ld->topo->nodes[ld->conn_node].channel_slot, key,
			sizeof(key));
	nsa_conn_cmd(ld->conn, 2);
	nsa_conn_arg_str(ld->conn, "MGET");
	nsa_conn_arg_str(ld->conn, key);
	return nsa_conn_cmd_end(ld->conn, &e);
}

static void on_mark(struct nsa_loader *ld, const redisReply *r)
{
	struct nsa_logmark mk = {0};

	if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
	    r->element[0]->type == REDIS_REPLY_STRING)
		(void)nsa_logmark_parse(r->element[0]->str, r->element[0]->len,
					&mk);
	if (ld->marks_read++ == 0)
		ld->mark = mk;
	else if (!nsa_logmark_same(&mk, &ld->mark))
		ld->mark_changed = 1;
	if (mk.set && mk.grace_ms < ld->mark_grace_ms)
		ld->mark_grace_ms = mk.grace_ms;
}

/* Ask for a key of slot that no one stores: whether the node serves the
 * slot (nil), not (MOVED) or is migrating it (ASK). */
static int send_probe(struct nsa_loader *ld, uint32_t slot)
{
	const struct nsa_exp e = {.kind = OP_PROBE, .a = slot};
	char key[NS_CHANNEL_MAX];

	ns_channel_for_slot((uint16_t)slot, key);
	nsa_conn_cmd(ld->conn, 2);
	nsa_conn_arg_str(ld->conn, "MGET");
	nsa_conn_arg_str(ld->conn, key);
	return nsa_conn_cmd_end(ld->conn, &e);
}

static int node_slot(const struct nsa_loader *ld, uint32_t slot)
{
	return ld->topo->slot_covered[slot] &&
	       ld->topo->slot_node[slot] == ld->node;
}

/* Keep NSA_SLOT_WINDOW GETKEYSINSLOT in flight over the slots node owns,
 * each followed by its probe. */
static int send_slots(struct nsa_loader *ld)
{
	const struct nsa_topology *t = ld->topo;
	const struct nsa_exp e = {.kind = OP_SLOT};

	while (ld->slots_inflight < NSA_SLOT_WINDOW && !ld->keys_done) {
		while (ld->next_slot < NS_SLOTS &&
		       !node_slot(ld, ld->next_slot))
			ld->next_slot++;
		if (ld->next_slot == NS_SLOTS) {
			ld->keys_done = 1;
			break;
		}
		nsa_conn_cmd(ld->conn, 4);
		nsa_conn_arg_str(ld->conn, "CLUSTER");
		nsa_conn_arg_str(ld->conn, "GETKEYSINSLOT");
		nsa_conn_arg_u32(ld->conn, ld->next_slot);
		nsa_conn_arg_str(ld->conn, NSA_SLOT_MAX_KEYS);
		if (nsa_conn_cmd_end(ld->conn, &e) != 0 ||
		    (t->cluster && send_probe(ld, ld->next_slot) != 0))
			return -ENOMEM;
		ld->next_slot++;
		ld->slots_inflight++;
	}
	return 0;
}

static int send_mget(struct nsa_loader *ld, struct key_batch *b, uint32_t first,
		     uint32_t n)
{
	const struct nsa_exp e = {
		.ptr = b, .kind = OP_MGET, .a = first, .b = n};
	uint32_t i;

	nsa_conn_cmd(ld->conn, n + 1);
	nsa_conn_arg_str(ld->conn, "MGET");
	for (i = first; i < first + n; i++) {
		const redisReply *k = b->keys[b->order[i]];

		nsa_conn_arg(ld->conn, k->str, k->len);
	}
	if (nsa_conn_cmd_end(ld->conn, &e) != 0)
		return -ENOMEM;
	b->refs++; /* the MGET's reply holds the keys until it comes */
	return 0;
}

/* A key's slot above its index: sorting these sorts by slot, then index,
 * with no state outside the array (loaders of several standbys run at
 * once in one process). */
static int by_slot_then_index(const void *a, const void *b)
{
	uint64_t ka = *(const uint64_t *)a, kb = *(const uint64_t *)b;

	return (ka > kb) - (ka < kb);
}

/* Whether the loader reads key k: 1, 0 when it is not natsync's (or of the
 * other layout), -1 when it is under natsync's prefix but not valid. */
static int key_wanted(const struct nsa_loader *ld, const redisReply *k)
{
	if (k->type != REDIS_REPLY_STRING || k->len < NS_KEY_PREFIX_LEN ||
	    memcmp(k->str, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN) != 0)
		return 0;
	if (k->len > NS_SEGMENT_PREFIX_LEN &&
	    memcmp(k->str, NS_SEGMENT_PREFIX, NS_SEGMENT_PREFIX_LEN) == 0)
		return ld->log &&
		       nsa_logkey_kind(k->str, k->len) != NSA_LOGKEY_MARK;
	if (ld->log)
		return 0;
	return k->len == NS_KEY_LEN && k->str[3] != 0 ? 1 : -1;
}

/* A list of keys (owned by reply r): queue MGETs of its session keys, one
 * for all of them when they share a slot or the store is one server, else
 * one per slot. Takes r. */
static int on_keys(struct nsa_loader *ld, redisReply *r, redisReply **keys,
		   size_t n, int one_slot)
{
	struct key_batch *b;
	uint64_t *sorted = NULL;
	size_t m = 0, i, first;
	uint64_t bad = 0;
	int rc = 0;

	b = malloc(sizeof(*b) + n * sizeof(uint32_t));
	if (!b) {
		freeReplyObject(r);
		return -ENOMEM;
	}
	b->reply = r;
	b->keys = keys;
	b->refs = 1; /* ours until the MGETs are queued */
	for (i = 0; i < n; i++) {
		int want = key_wanted(ld, keys[i]);

		bad += want < 0;
		if (want > 0)
			b->order[m++] = (uint32_t)i;
	}
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	if (m == 0) {
		/* nothing to ask */
	} else if (one_slot || !ld->topo->cluster) {
		rc = send_mget(ld, b, 0, (uint32_t)m);
	} else {
		sorted = malloc(m * sizeof(*sorted));
		if (!sorted) {
			key_batch_unref(b);
			return -ENOMEM;
		}
		for (i = 0; i < m; i++)
			sorted[i] =
				(uint64_t)ns_key_slot(keys[b->order[i]]->str,
						      keys[b->order[i]]->len)
					<< 32 |
				b->order[i];
		qsort(sorted, m, sizeof(*sorted), by_slot_then_index);
		for (i = 0; i < m; i++)
			b->order[i] = (uint32_t)sorted[i];
		for (first = 0; first < m && rc == 0; first = i) {
			for (i = first + 1;
			     i < m && sorted[i] >> 32 == sorted[first] >> 32;
			     i++)
				;
			rc = send_mget(ld, b, (uint32_t)first,
				       (uint32_t)(i - first));
		}
		free(sorted);
	}
	/* On error the loader is closed, which drops the MGETs' references
	 * through their expectations. */
	key_batch_unref(b);
	return rc;
}

/* A SCAN reply: queue the next SCAN, then MGETs of its keys. */
static int on_scan(struct nsa_loader *ld, redisReply *r)
{
	int rc;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	if (strcmp(r->element[0]->str, "0") == 0) {
		uint32_t slot;

		ld->keys_done = 1;
		for (slot = 0; ld->topo->cluster && ld->conn_node == ld->node &&
			       slot < NS_SLOTS;
		     slot++)
			if (node_slot(ld, slot) && send_probe(ld, slot) != 0) {
				freeReplyObject(r);
				return -ENOMEM;
			}
	} else if ((rc = send_scan(ld, r->element[0]->str)) < 0) {
		freeReplyObject(r);
		return rc;
	}
	return on_keys(ld, r, r->element[1]->element, r->element[1]->elements,
		       0);
}

/* A GETKEYSINSLOT reply: one MGET of the slot's keys, and the next slot. */
static int on_slot(struct nsa_loader *ld, redisReply *r)
{
	int rc;

	ld->slots_inflight--;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return -EPROTO;
	}
	rc = on_keys(ld, r, r->element, r->elements, 1);
	return rc < 0 ? rc : send_slots(ld);
}

/* The session stored as v under key k: 1, 0 when v is nil (expired since
 * the key was listed), -1 when it is not a valid session under that key. */
static int value_session(const redisReply *k, const redisReply *v,
			 struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];

	if (v->type != REDIS_REPLY_STRING)
		return 0;
	if (ns_record_decode((const uint8_t *)v->str, v->len, s) != (int)v->len)
		return -1;
	ns_key_build(s->proto, &s->orig, key);
	if (k->len != NS_KEY_LEN || memcmp(k->str, key, NS_KEY_LEN) != 0)
		return -1;
	return 1;
}

/* Log layout: merge the segments of values v (nil: expired since listed)
 * under keys k: those the mark leaves in (a checkpoint of the marked
 * round, a segment sent after it covers). 0, or -ENOMEM. */
static int merge_values(struct nsa_loader *ld, const redisReply *const *k,
			redisReply *const *v, size_t n)
{
	uint64_t bad = 0, unauth = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		int rc;

		if (v[i]->type != REDIS_REPLY_STRING ||
		    !nsa_logmark_takes(&ld->mark, k[i]->str, k[i]->len,
				       (const uint8_t *)v[i]->str, v[i]->len))
			continue;
		rc = nsa_logmerge_segment(
			&ld->merge, (const uint8_t *)v[i]->str, v[i]->len);
		if (rc == -ENOMEM)
			return rc;
		unauth += rc == -EACCES;
		bad += rc < 0 && rc != -EACCES;
	}
	if (unauth && ld->sink.unauthenticated)
		ld->sink.unauthenticated(ld->sink.arg, unauth);
	else
		bad += unauth;
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	return 0;
}

static unsigned int emit_apply(void *arg, const struct ns_session *s,
			       unsigned int n)
{
	struct nsa_loader *ld = arg;

	return ld->sink.apply(ld->sink.arg, ld->node, s, n);
}

/* Log layout, every segment read: the live records to the sink. */
static void log_finish(struct nsa_loader *ld)
{
	if (!ld->log)
		return;
	ld->loaded += nsa_logmerge_emit(&ld->merge, nsdp_realtime_ns(),
					emit_apply, ld);
	nsa_logmerge_free(&ld->merge);
}

/* Log layout on a cluster, the connection's master read whole: go on with
 * the next other master. 1 when its SCAN is queued, 0 when every master
 * is read, NSA_LOADER_FAILED. */
static int log_next_master(struct nsa_loader *ld)
{
	const struct nsa_topology *t = ld->topo;
	char err[128] = "";
	unsigned int i;

	if (!ld->log || !t->cluster)
		return 0;
	while (ld->next_other < t->n_nodes && ld->next_other == ld->node)
		ld->next_other++;
	if (ld->next_other >= t->n_nodes)
		return 0;
	i = ld->next_other++;
	nsa_conn_free(ld->conn); /* nothing is due on it */
	ld->conn = nsa_conn_new(&t->nodes[i].addr);
	if (ld->conn == NULL) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	if (nsa_conn_open(ld->conn, ld->conf, err, sizeof(err)) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s:%u: %s",
			 t->nodes[i].addr.host, t->nodes[i].addr.port, err);
		nsa_conn_free(ld->conn);
		ld->conn = NULL;
		return NSA_LOADER_FAILED;
	}
	ld->conn_node = i;
	ld->keys_done = 0;
	ld->last_rx_ns = nsdp_mono_ns();
	if (send_mark(ld) < 0 || send_scan(ld, "0") < 0) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	return 1;
}

/* Every key listed on the connection is read: DONE (the live records
 * given to the sink), or MORE (another master to read), or FAILED. */
static int read_whole(struct nsa_loader *ld)
{
	int rc = log_next_master(ld);

	if (rc != 0)
		return rc > 0 ? NSA_LOADER_MORE : rc;
	if (ld->log && !ld->mark_final) {
		/* Every segment read: the mark once more. A round that
		 * replaced it meanwhile may have expired part of what was
		 * read (its checkpoint, the segments after it). */
		ld->mark_final = 1;
		if (send_mark(ld) < 0) {
			snprintf(ld->why, sizeof(ld->why), "out of memory");
			return NSA_LOADER_FAILED;
		}
		return NSA_LOADER_MORE;
	}
	/* Every value was read by now; a round whose mark the first read
	 * missed expires nothing it replaced sooner than its grace after
	 * that read. */
	if (ld->log && ld->mark_changed &&
	    nsdp_mono_ns() - ld->mark_asked_ns >=
		    (uint64_t)ld->mark_grace_ms * 1000000u) {
		snprintf(ld->why, sizeof(ld->why),
			 "the log was compacted during the load");
		nsa_logmerge_free(&ld->merge);
		return NSA_LOADER_RACED;
	}
	log_finish(ld);
	return NSA_LOADER_DONE;
}

static void on_mget(struct nsa_loader *ld, const struct nsa_exp *e,
		    const redisReply *r)
{
	const struct key_batch *b = e->ptr;
	struct ns_session ss[NSA_APPLY_CHUNK];
	uint32_t i = 0, m, n = e->b;
	uint64_t bad = 0;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
		return;
	if (ld->log) {
		const redisReply *keys[512];

		for (i = 0; i < n; i += m) {
			for (m = 0; m < 512 && i + m < n; m++)
				keys[m] = b->keys[b->order[e->a + i + m]];
			if (merge_values(ld, keys, r->element + i, m) != 0)
				ld->merge_failed = 1;
		}
		return;
	}
	while (i < n) {
		for (m = 0; i < n && m < NSA_APPLY_CHUNK; i++) {
			int rc = value_session(b->keys[b->order[e->a + i]],
					       r->element[i], &ss[m]);

			bad += rc < 0;
			m += rc > 0;
		}
		if (m > 0)
			ld->loaded +=
				ld->sink.apply(ld->sink.arg, ld->node, ss, m);
	}
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
}

static void slot_mark_read(struct nsa_loader *ld, uint32_t slot)
{
	ld->slot_read[slot / 64] |= 1ull << (slot % 64);
}

/* The keys of slot that its target (importing it) holds: listed, then read
 * with ASKING, blocking. 0, or -1 when the target could not be read. */
static int read_importing(struct nsa_loader *ld, uint32_t slot,
			  const struct nsa_addr *at)
{
	struct ns_session ss[NSA_APPLY_CHUNK];
	redisReply *list, *r = NULL;
	const redisReply **keys = NULL;
	const char **argv = NULL;
	size_t *lens = NULL, i, m = 0, a = 0;
	uint64_t bad = 0;
	char err[160];
	int rc = -1;

	if (ld->importer && !nsa_addr_equal(&ld->importer_addr, at)) {
		redisFree(ld->importer);
		ld->importer = NULL;
	}
	if (!ld->importer) {
		ld->importer =
			nsa_store_connect(ld->conf, at, err, sizeof(err));
		if (!ld->importer)
			return -1;
		ld->importer_addr = *at;
	}
	list = redisCommand(ld->importer, "CLUSTER GETKEYSINSLOT %u %s", slot,
			    NSA_SLOT_MAX_KEYS);
	if (!list || list->type != REDIS_REPLY_ARRAY)
		goto out;
	argv = malloc((list->elements + 1) * sizeof(*argv));
	lens = malloc((list->elements + 1) * sizeof(*lens));
	keys = malloc((list->elements + 1) * sizeof(*keys));
	if (!argv || !lens || !keys)
		goto out;
	argv[0] = "MGET";
	lens[0] = 4;
	for (i = 0; i < list->elements; i++) {
		const redisReply *k = list->element[i];

		if (key_wanted(ld, k) <= 0)
			continue; /* not one to read (counted on its owner) */
		keys[m++] = k;
		argv[m] = k->str;
		lens[m] = k->len;
	}
	if (m == 0) {
		rc = 0;
		goto out;
	}
	/* The slot is not the target's yet: it serves the keys only to a
	 * client that says ASKING first. */
	if (redisAppendCommand(ld->importer, "ASKING") != REDIS_OK ||
	    redisAppendCommandArgv(ld->importer, (int)m + 1, argv, lens) !=
		    REDIS_OK ||
	    redisGetReply(ld->importer, (void **)&r) != REDIS_OK)
		goto out;
	freeReplyObject(r);
	r = NULL;
	if (redisGetReply(ld->importer, (void **)&r) != REDIS_OK || !r ||
	    r->type != REDIS_REPLY_ARRAY || r->elements != m)
		goto out;
	if (ld->log) {
		rc = merge_values(ld, keys, r->element, m);
		goto out;
	}
	for (i = 0; i < m; i++) {
		int v = value_session(keys[i], r->element[i], &ss[a]);

		bad += v < 0;
		a += v > 0;
		if (a == NSA_APPLY_CHUNK || (i == m - 1 && a)) {
			ld->loaded += ld->sink.apply(ld->sink.arg, ld->node, ss,
						     (unsigned int)a);
			a = 0;
		}
	}
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	rc = 0;
out:
	if (rc < 0 && ld->importer && ld->importer->err) {
		redisFree(ld->importer);
		ld->importer = NULL;
	}
	if (r)
		freeReplyObject(r);
	if (list)
		freeReplyObject(list);
	free(keys);
	free(argv);
	free(lens);
	return rc;
}

/* The answer to a probe: the slot was read from its holder, or not. */
static void on_probe(struct nsa_loader *ld, uint32_t slot, const redisReply *r)
{
	struct nsa_addr at;
	const char *sp;

	if (r->type != REDIS_REPLY_ERROR) {
		slot_mark_read(ld, slot);
	} else if (strncmp(r->str, "MOVED ", 6) == 0) {
		ld->slots_moved++;
	} else {
		/* "ASK <slot> <host>:<port>" */
		ld->slots_migrating++;
		sp = strchr(r->str + 4, ' ');
		if (sp && nsa_addr_parse(sp + 1, &at) == 0 &&
		    read_importing(ld, slot, &at) == 0)
			slot_mark_read(ld, slot);
		else
			ld->slots_unread++;
	}
}

int nsa_loader_begin(struct nsa_loader *ld, int by_slot)
{
	ld->by_slot = by_slot;
	ld->keys_done = 0;
	ld->next_slot = 0;
	ld->slots_inflight = 0;
	ld->loaded = 0;
	memset(ld->slot_read, 0, sizeof(ld->slot_read));
	ld->slots_moved = 0;
	ld->slots_migrating = 0;
	ld->slots_unread = 0;
	ld->last_rx_ns = nsdp_mono_ns();
	ld->merge_failed = 0;
	ld->next_other = 0;
	memset(&ld->mark, 0, sizeof(ld->mark));
	ld->marks_read = 0;
	ld->mark_changed = 0;
	ld->mark_grace_ms = UINT32_MAX;
	ld->mark_asked_ns = nsdp_mono_ns();
	ld->mark_final = 0;
	nsa_logmerge_free(&ld->merge);
	if ((ld->log &&
	     (nsa_logmerge_init(&ld->merge) != 0 || send_mark(ld) < 0)) ||
	    (by_slot ? send_slots(ld) : send_scan(ld, "0")) < 0) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	if (ld->log && ld->topo->cluster) {
		uint32_t slot;

		memset(ld->keep_slots, 0, sizeof(ld->keep_slots));
		for (slot = 0; slot < NS_SLOTS; slot++)
			if (node_slot(ld, slot))
				ld->keep_slots[slot / 64] |= 1ull
							     << (slot % 64);
		ld->merge.keep_slots = ld->keep_slots;
	}
	ld->merge.batch_key = ld->sink.batch_key;
	ld->merge.batch_key_len = ld->sink.batch_key_len;
	if (ld->keys_done && ld->conn->exp_count == 0)
		return read_whole(ld);
	return NSA_LOADER_MORE;
}

int nsa_loader_flush(struct nsa_loader *ld)
{
	if (ld->conn && nsa_conn_want_write(ld->conn) &&
	    nsa_conn_send(ld->conn) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	return 0;
}

/* An error reply, or a reply nothing asked for. */
static int on_refusal(struct nsa_loader *ld, redisReply *r)
{
	const struct nsa_exp *head = nsa_conn_exp_peek(ld->conn);
	int slot_refused = head && head->kind == OP_SLOT &&
			   r->type == REDIS_REPLY_ERROR &&
			   (strncmp(r->str, "NOPERM", 6) == 0 ||
			    strncmp(r->str, "ERR", 3) == 0);

	snprintf(ld->why, sizeof(ld->why), "%.150s",
		 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected");
	freeReplyObject(r);
	return slot_refused ? NSA_LOADER_SLOTS_REFUSED : NSA_LOADER_FAILED;
}

int nsa_loader_on_readable(struct nsa_loader *ld)
{
	redisReply *r;
	int rc;

	if (nsa_conn_recv(ld->conn) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	ld->last_rx_ns = nsdp_mono_ns();
	while ((rc = nsa_conn_reply(ld->conn, &r)) == 1) {
		const struct nsa_exp *head = nsa_conn_exp_peek(ld->conn);
		struct nsa_exp e;

		if (head && head->kind == OP_PROBE &&
		    (r->type != REDIS_REPLY_ERROR ||
		     strncmp(r->str, "MOVED ", 6) == 0 ||
		     strncmp(r->str, "ASK ", 4) == 0)) {
			e = nsa_conn_exp_pop(ld->conn);
			on_probe(ld, e.a, r);
			freeReplyObject(r);
			continue;
		}
		if (ld->conn->exp_count == 0 || r->type == REDIS_REPLY_ERROR)
			return on_refusal(ld, r);
		e = nsa_conn_exp_pop(ld->conn);
		if (e.kind == OP_MGET) {
			on_mget(ld, &e, r);
			freeReplyObject(r);
			key_batch_unref(e.ptr);
			continue;
		}
		if (e.kind == OP_MARK) {
			on_mark(ld, r);
			freeReplyObject(r);
			continue;
		}
		rc = e.kind == OP_SCAN ? on_scan(ld, r) : on_slot(ld, r);
		if (rc < 0) {
			snprintf(ld->why, sizeof(ld->why), "%s", strerror(-rc));
			return NSA_LOADER_FAILED;
		}
	}
	if (rc < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s", ld->conn->err);
		return NSA_LOADER_FAILED;
	}
	if (ld->merge_failed) {
		snprintf(ld->why, sizeof(ld->why),
			 "out of memory merging the log");
		return NSA_LOADER_FAILED;
	}
	if (ld->keys_done && ld->conn->exp_count == 0)
		return read_whole(ld);
	return NSA_LOADER_MORE;
}

int nsa_loader_run(const struct nsa_store_conf *conf,
		   const struct nsa_topology *topo, unsigned int node,
		   int by_slot, const struct nsa_loader_sink *sink,
		   int timeout_ms, char *err, size_t errlen)
{
	struct nsa_loader ld = {0};
	int rc;

	if (nsa_loader_open(&ld, conf, topo, node, sink, err, errlen) < 0)
		return NSA_LOADER_FAILED;
	rc = nsa_loader_begin(&ld, by_slot);
	while (rc == NSA_LOADER_MORE) {
		struct pollfd p = {.fd = ld.conn->fd, .events = POLLIN};
		int n;

		if (nsa_loader_flush(&ld) < 0) {
			rc = NSA_LOADER_FAILED;
			break;
		}
		if (nsa_conn_want_write(ld.conn))
			p.events |= POLLOUT;
		n = poll(&p, 1, timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(ld.why, sizeof(ld.why), "%s",
				 n == 0 ? "no reply" : strerror(errno));
			rc = NSA_LOADER_FAILED;
			break;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			rc = nsa_loader_on_readable(&ld);
	}
	if (rc < 0)
		snprintf(err, errlen, "%s:%u: %s",
			 topo->nodes[ld.conn_node].addr.host,
			 topo->nodes[ld.conn_node].addr.port, ld.why);
	nsa_loader_close(&ld);
	return rc;
}
