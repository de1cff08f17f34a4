/*
 * nsa_compact.c - checkpointing a master's log (schema/FORMAT.md,
 * Compaction).
 *
 * SCAN lists the master's segment keys (checkpoints too), GETRANGE reads
 * each segment's header (its send time), MGET reads the checkpoints and
 * the segments old enough slot by slot, a few hundred KiB per command so
 * that the store stays free for the writers, nsa_logmerge merges them; the live records are written as
 * checkpoint batches of NSA_CHECKPOINT_RECORDS, then the round's commit
 * mark names them on every master, then every checkpoint and segment
 * merged is given PEXPIRE LT (a grace period, segments two).
 *
 * The mark is what makes a checkpoint count: readers (this one included)
 * merge only the checkpoint of the marked round and the segments sent
 * after the mark's until_ns, so no read that spans a round's expiries
 * pairs an old checkpoint's record with a missing delete.
 *
 * Only segments sent (header sent_ns) a grace period before the listing
 * began (and before the caller's until_ns) are merged, and the marked
 * checkpoint: SCAN returns every key that exists
 * throughout it, so each older segment of their records' sessions is
 * listed too (or expired, or covered by a listed checkpoint), and the
 * tombstones the checkpoint leaves out have no older record left outside
 * it. A younger segment may have been listed while an older one, written
 * while the SCAN ran, was not: it waits for the next round.
 *
 * Invariants:
 * - Nothing is expired before every checkpoint batch and then every mark
 *   is acknowledged: a failure leaves the log as it was, plus checkpoints
 *   that no mark names (no reader merges them).
 * - A reader that reads the checkpoint and the segments it covers merges
 *   the same table as from either alone.
 * - A round of a fenced active writes nothing: its connections are named
 *   as writers (a newer active's fence closes them) and it reads the
 *   store's epoch once they are, before its first write (nsa_fence.h).
 *
 * Not here: when to compact (nsa_active.c's compactor thread).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_compact.h"
#include "nsa_fence.h"
#include "nsa_logmerge.h"
#include "nsdp_time.h"

/* 48 + 4094 * 48 = 196 560 bytes, with the 10 bytes of Redis's string
 * header within the 196 608-byte jemalloc size class (4 095 would not be). */
#define NSA_CHECKPOINT_RECORDS 4094
/* An MGET asks for at most 64 segments (12 KiB each at 256 records), or
 * 4 checkpoints (192 KiB each): under 1 MiB per reply, which the store
 * builds while every other client waits. */
#define NSA_COMPACT_MGET 64
#define NSA_CHECKPOINT_WEIGHT 16
/* GETRANGE commands pipelined at once. */
#define NSA_COMPACT_PEEK 1024

struct key_list {
	char **k;
	size_t *len;
	size_t n, cap;
};

static void keys_free(struct key_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->k[i]);
	free(l->k);
	free(l->len);
}

static int keys_add(struct key_list *l, const char *k, size_t len)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		char **nk = realloc(l->k, cap * sizeof(*nk));
		size_t *nl;

		if (nk == NULL)
			return -ENOMEM;
		l->k = nk;
		nl = realloc(l->len, cap * sizeof(*nl));
		if (nl == NULL)
			return -ENOMEM;
		l->len = nl;
		l->cap = cap;
	}
	l->k[l->n] = malloc(len + 1);
	if (l->k[l->n] == NULL)
		return -ENOMEM;
	memcpy(l->k[l->n], k, len);
	l->k[l->n][len] = '\0';
	l->len[l->n++] = len;
	return 0;
}

static int list_segments(redisContext *c, struct key_list *l, char *err,
			 size_t errlen)
{
	char cursor[32] = "0";

	do {
		redisReply *r = redisCommand(c, "SCAN %s MATCH %s* COUNT 1000",
					     cursor, NS_SEGMENT_PREFIX);
		size_t i;

		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements != 2) {
			nsa_set_err(err, errlen, "SCAN: %s",
				    r && r->type == REDIS_REPLY_ERROR
					    ? r->str
					    : c->errstr);
			if (r)
				freeReplyObject(r);
			return -EIO;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (i = 0; i < r->element[1]->elements; i++) {
			const redisReply *k = r->element[1]->element[i];

			if (k->type == REDIS_REPLY_STRING &&
			    keys_add(l, k->str, k->len) != 0) {
				freeReplyObject(r);
				return -ENOMEM;
			}
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return 0;
}

static int by_slot(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* A checkpoint's name: "ns:l:{N}:k:..." */
static int is_checkpoint(const char *k, size_t len)
{
	const char *tag = memchr(k, '}', len);

	return tag && (size_t)(tag - k) + 4 <= len && tag[1] == ':' &&
	       tag[2] == 'k' && tag[3] == ':';
}

/* want[i]: whether listed key i is worth reading: the checkpoint of the
 * round mk marks (any checkpoint without a mark), or a segment whose
 * header (GETRANGE, pipelined) says it was sent before until_ns and after
 * the mark's until_ns. A young segment (most of the log at a high rate, a
 * grace period of writes) is not read whole only to be left out.
 * stale[i]: a checkpoint of no marked round begun before mk's: one that
 * no reader merges (replaced, or of a round that failed), expired with
 * the segments of this round. */
static int peek_segments(redisContext *c, const struct key_list *l,
			 const struct nsa_logmark *mk, uint64_t until_ns,
			 uint8_t *want, uint8_t *stale, char *err,
			 size_t errlen)
{
	size_t i = 0;

	while (i < l->n) {
		size_t sent = 0, j;
		int rc = 0;

		for (j = i; j < l->n && sent < NSA_COMPACT_PEEK; j++) {
			const char *argv[4] = {"GETRANGE", l->k[j], "0", "47"};
			size_t lens[4] = {8, l->len[j], 1, 2};
			enum nsa_logkey kind =
				nsa_logkey_kind(l->k[j], l->len[j]);

			stale[j] = 0;
			want[j] = kind == NSA_LOGKEY_CHECKPOINT &&
				  nsa_logmark_takes(mk, l->k[j], l->len[j],
						    NULL, 0);
			if (want[j] || kind == NSA_LOGKEY_MARK ||
			    kind == NSA_LOGKEY_OTHER) {
				want[j] |= 2; /* no GETRANGE */
				continue;
			}
			if (redisAppendCommandArgv(c, 4, argv, lens) !=
			    REDIS_OK)
				return -ENOMEM;
			sent++;
		}
		for (; i < j; i++) {
			redisReply *r;
			uint64_t t;
			int peeked;

			if (want[i] & 2) {
				want[i] &= 1;
				continue;
			}
			if (redisGetReply(c, (void **)&r) != REDIS_OK) {
				nsa_set_err(err, errlen, "GETRANGE: %s",
					    c->errstr);
				return -EIO;
			}
			if (r->type == REDIS_REPLY_ERROR) {
				nsa_set_err(err, errlen, "GETRANGE: %s",
					    r->str);
				rc = -EIO;
			}
			peeked = r->type == REDIS_REPLY_STRING &&
				 ns_batch_peek_sent((const uint8_t *)r->str,
						    r->len, &t) == 0;
			if (is_checkpoint(l->k[i], l->len[i]))
				stale[i] =
					peeked && mk->set && t < mk->round_ns;
			else
				want[i] = peeked && t < until_ns &&
					  (!mk->set || t > mk->until_ns);
			freeReplyObject(r);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* MGET the listed segments, slot by slot, into m: the checkpoints, and the
 * segments sent before until_ns (merged[i] set for those). */
static int read_segments(redisContext *c, const struct key_list *l,
			 const struct nsa_logmark *mk, uint64_t until_ns,
			 uint8_t *merged, uint8_t *stale,
			 struct nsa_logmerge *m, struct nsa_compact_result *res,
			 char *err, size_t errlen)
{
	uint64_t *order = malloc((l->n ? l->n : 1) * sizeof(*order));
	const char *argv[NSA_COMPACT_MGET + 1];
	size_t lens[NSA_COMPACT_MGET + 1], i = 0, j, n_want = 0;
	int rc = 0;

	if (order == NULL)
		return -ENOMEM;
	/* merged[] doubles as the wanted marks until the MGETs set it. */
	rc = peek_segments(c, l, mk, until_ns, merged, stale, err, errlen);
	for (i = 0; rc == 0 && i < l->n; i++) {
		if (merged[i])
			order[n_want++] =
				(uint64_t)ns_key_slot(l->k[i], l->len[i])
					<< 32 |
				i;
		merged[i] = 0;
	}
	qsort(order, n_want, sizeof(*order), by_slot);
	argv[0] = "MGET";
	lens[0] = 4;
	for (i = 0; i < n_want && rc == 0;) {
		redisReply *r;
		size_t n = 0, weight = 0;

		while (i + n < n_want && weight < NSA_COMPACT_MGET &&
		       order[i + n] >> 32 == order[i] >> 32) {
			size_t k = (uint32_t)order[i + n];

			argv[n + 1] = l->k[k];
			lens[n + 1] = l->len[k];
			weight += is_checkpoint(l->k[k], l->len[k])
					  ? NSA_CHECKPOINT_WEIGHT
					  : 1;
			n++;
		}
		r = redisCommandArgv(c, (int)n + 1, argv, lens);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements != n) {
			nsa_set_err(err, errlen, "MGET: %s",
				    r && r->type == REDIS_REPLY_ERROR
					    ? r->str
					    : c->errstr);
			rc = -EIO;
		}
		for (j = 0; rc == 0 && j < n; j++) {
			const redisReply *v = r->element[j];
			size_t k = (uint32_t)order[i + j];
			int took;

			if (v->type != REDIS_REPLY_STRING)
				continue; /* expired since listed */
			took = nsa_logmerge_segment_until(
				m, (const uint8_t *)v->str, v->len,
				is_checkpoint(l->k[k], l->len[k]) ? UINT64_MAX
								  : until_ns);
			if (took == -ENOMEM) {
				rc = -ENOMEM;
				break;
			}
			if (took <= 0)
				continue; /* too young, or not a batch */
			merged[k] = 1;
			res->segments++;
			res->bytes_read += v->len;
		}
		if (r)
			freeReplyObject(r);
		i += n;
	}
	free(order);
	res->records = m->records;
	return rc;
}

/* The checkpoint being written. */
struct checkpoint {
	redisContext *c;
	uint16_t slot;
	uint32_t id;
	uint64_t gen, now_ns;
	const char *key;
	size_t key_len;
	uint8_t *buf;
	size_t len;
	unsigned int count, pending, index;
	uint64_t expire_ns; /* the latest expiry among the records */
	int forever; /* a record of timeout 0 */
	int failed;
	struct nsa_compact_result *res;
	char *err;
	size_t errlen;
};

static int checkpoint_flush(struct checkpoint *cp)
{
	struct ns_batch_hdr h = {
		.publisher_id = cp->id,
		.count = (uint16_t)cp->count,
		.flags = cp->key_len ? NS_BATCH_F_HMAC : 0,
		.seq = cp->gen,
		.body_len = (uint32_t)(cp->len - NS_BATCH_HDR_LEN),
		.channel_slot = cp->slot,
		.sent_ns = cp->now_ns,
	};
	char name[NS_SEGMENT_KEY_MAX + 32], chan[NS_CHANNEL_MAX];
	uint64_t px;

	if (cp->count == 0)
		return 0;
	ns_batch_hdr_encode(&h, cp->buf);
	if (cp->key_len) {
		if (ns_batch_mac((const uint8_t *)cp->key, cp->key_len, cp->buf,
				 cp->len, cp->buf + cp->len) != 0)
			return -EINVAL;
		cp->len += NS_BATCH_MAC_LEN;
	}
	/* "ns:l:{N}:k:<id>:<gen>:<i>": 'k' is no hex digit, so no writer's
	 * segment (publisher id in hex) has this name. */
	ns_channel_for_slot(cp->slot, chan);
	snprintf(name, sizeof(name), NS_SEGMENT_PREFIX "%s:k:%08x:%llx:%x",
		 chan + 5, cp->id, (unsigned long long)cp->gen, cp->index++);
	px = cp->expire_ns > cp->now_ns ? (cp->expire_ns - cp->now_ns) / 1000000
					: 0;
	if (cp->forever)
		redisAppendCommand(cp->c, "SET %s %b", name, cp->buf, cp->len);
	else
		redisAppendCommand(cp->c, "SET %s %b PX %llu", name, cp->buf,
				   cp->len, (unsigned long long)px + 1);
	cp->pending++;
	cp->res->bytes_written += cp->len;
	cp->len = NS_BATCH_HDR_LEN;
	cp->count = 0;
	cp->expire_ns = 0;
	cp->forever = 0;
	return 0;
}

static unsigned int checkpoint_add(void *arg, const struct ns_session *s,
				   unsigned int n)
{
	struct checkpoint *cp = arg;
	unsigned int i;

	for (i = 0; i < n && !cp->failed; i++) {
		int len = ns_record_encode(&s[i], cp->buf + cp->len,
					   NS_RECORD_MAX_LEN);
		uint64_t exp = s[i].timestamp_ns +
			       (uint64_t)s[i].timeout_ms * 1000000u;

		if (len < 0)
			continue;
		cp->len += (size_t)len;
		cp->count++;
		cp->res->live++;
		if (s[i].timeout_ms == 0)
			cp->forever = 1;
		else if (exp > cp->expire_ns)
			cp->expire_ns = exp;
		if (cp->count == NSA_CHECKPOINT_RECORDS &&
		    checkpoint_flush(cp) != 0)
			cp->failed = 1;
	}
	return n;
}

/* Collect the replies of n pipelined commands; -EIO on any error. */
static int replies(redisContext *c, unsigned int n, char *err, size_t errlen)
{
	int rc = 0;

	while (n-- > 0) {
		redisReply *r;

		if (redisGetReply(c, (void **)&r) != REDIS_OK) {
			nsa_set_err(err, errlen, "%s", c->errstr);
			return -EIO;
		}
		if (r->type == REDIS_REPLY_ERROR && rc == 0) {
			nsa_set_err(err, errlen, "%s", r->str);
			rc = -EIO;
		}
		freeReplyObject(r);
	}
	return rc;
}

/* The mark of the master of c (channel slot), read with MGET as every
 * reader may: 0 (mk->set 0 when there is none), or -EIO. */
static int mark_read(redisContext *c, uint16_t slot, struct nsa_logmark *mk,
		     char *err, size_t errlen)
{
	char name[NS_SEGMENT_KEY_MAX];
	redisReply *r;
	int rc = 0;

	memset(mk, 0, sizeof(*mk));
	nsa_logmark_key(slot, name, sizeof(name));
	r = redisCommand(c, "MGET %s", name);
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
		nsa_set_err(err, errlen, "MGET %s: %s", name,
			    r && r->type == REDIS_REPLY_ERROR ? r->str
							      : c->errstr);
		rc = -EIO;
	} else if (r->element[0]->type == REDIS_REPLY_STRING) {
		/* One not of ours: read as no mark (every checkpoint). */
		(void)nsa_logmark_parse(r->element[0]->str, r->element[0]->len,
					mk);
	}
	if (r)
		freeReplyObject(r);
	return rc;
}

/* The mark of round (id, gen) that merged the segments sent before
 * until_ns, over the mark in force mk. Covered: sent at or before its
 * until_ns, never less than mk's. */
static void mark_of_round(struct nsa_logmark *done, uint32_t id, uint64_t gen,
			  uint32_t grace_ms, const struct nsa_logmark *mk,
			  uint64_t until_ns)
{
	done->set = 1;
	done->id = id;
	done->gen = gen;
	done->grace_ms = grace_ms;
	done->until_ns = mk->set && mk->until_ns > until_ns - 1 ? mk->until_ns
								: until_ns - 1;
}

/* Queue the mark on the master of c (no expiry: the next round replaces
 * it); its reply is the caller's. */
static void mark_write(redisContext *c, uint16_t slot,
		       const struct nsa_logmark *mk)
{
	char name[NS_SEGMENT_KEY_MAX], v[NSA_LOGMARK_MAX];
	int len = nsa_logmark_format(mk, v, sizeof(v));

	nsa_logmark_key(slot, name, sizeof(name));
	redisAppendCommand(c, "SET %s %b", name, v, (size_t)len);
}

int nsa_compact_node(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     const struct nsa_compact_round *rd,
		     struct nsa_compact_result *res, char *err, size_t errlen)
{
	struct key_list l = {0};
	struct nsa_logmerge m;
	struct checkpoint cp = {0};
	struct nsa_logmark mk, done = {0};
	uint8_t *merged = NULL, *stale = NULL;
	redisContext *c;
	size_t i;
	int rc;

	memset(res, 0, sizeof(*res));
	c = nsa_store_connect_named(conf, &topo->nodes[node].addr,
				    NSA_WRITER_NAME, NULL, err, errlen);
	if (c == NULL)
		return -EIO;
	if (nsa_logmerge_init(&m) != 0) {
		redisFree(c);
		return -ENOMEM;
	}
	/* A segment not signed with the key is left to its expiry, never
	 * signed into a checkpoint. */
	m.batch_key = rd->key;
	m.batch_key_len = rd->key ? rd->key_len : 0;
	done.round_ns = nsdp_realtime_ns();
	rc = mark_read(c, topo->nodes[node].channel_slot, &mk, err, errlen);
	if (rc == 0)
		rc = list_segments(c, &l, err, errlen);
	if (rc == 0 && ((merged = calloc(l.n ? l.n : 1, 1)) == NULL ||
			(stale = calloc(l.n ? l.n : 1, 1)) == NULL))
		rc = -ENOMEM;
	if (rc == 0)
		rc = read_segments(c, &l, &mk, rd->until_ns, merged, stale, &m,
				   res, err, errlen);
	if (rc == 0)
		rc = nsa_fence_check(conf, topo, rd->epoch, err, errlen);
	if (rc == 0) {
		cp.c = c;
		cp.slot = topo->nodes[node].channel_slot;
		cp.id = rd->id;
		cp.gen = rd->gen;
		cp.now_ns = nsdp_realtime_ns();
		cp.key = rd->key;
		cp.key_len = rd->key_len;
		cp.len = NS_BATCH_HDR_LEN;
		cp.res = res;
		cp.err = err;
		cp.errlen = errlen;
		cp.buf = malloc(NS_BATCH_MAX_LEN);
		if (cp.buf == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		nsa_logmerge_emit(&m, cp.now_ns, checkpoint_add, &cp);
		if (cp.failed || checkpoint_flush(&cp) != 0)
			rc = -EINVAL;
		/* Every checkpoint acknowledged before the mark names it,
		 * the mark before anything expires. */
		if (replies(c, cp.pending, err, errlen) != 0)
			rc = -EIO;
	}
	if (rc == 0) {
		mark_of_round(&done, rd->id, rd->gen, rd->grace_ms, &mk,
			      rd->until_ns);
		done.parts = cp.index;
		mark_write(c, topo->nodes[node].channel_slot, &done);
		if (replies(c, 1, err, errlen) != 0)
			rc = -EIO;
	}
	if (rc == 0) {
		unsigned int sent = 0;

		for (i = 0; i < l.n; i++) {
			if (merged[i] || stale[i]) {
				/* Segments outlive the old checkpoints by a
				 * grace period: a reader that still reads an
				 * old checkpoint's record of a session also
				 * reads the segment whose delete the new
				 * checkpoint left out. With both expiring at
				 * once, a read spanning that moment brought
				 * the deleted session back. */
				redisAppendCommand(
					c, "PEXPIRE %b %u LT", l.k[i], l.len[i],
					is_checkpoint(l.k[i], l.len[i])
						? rd->grace_ms
						: 2 * rd->grace_ms);
				sent++;
			}
			if (sent == 1024 || (i == l.n - 1 && sent > 0)) {
				if (replies(c, sent, err, errlen) != 0)
					rc = -EIO;
				sent = 0;
			}
		}
	}
	free(cp.buf);
	free(merged);
	free(stale);
	keys_free(&l);
	nsa_logmerge_free(&m);
	redisFree(c);
	return rc;
}

/* One master of a compaction over all of them. */
struct node_round {
	redisContext *c;
	struct key_list l;
	uint8_t *merged, *stale;
	struct checkpoint cp;
};

/* Where a record goes: the checkpoint of the master that serves its
 * session key's slot now (the first master for a slot no one serves). */
struct route {
	const struct nsa_topology *topo;
	struct node_round *nr;
};

static unsigned int route_add(void *arg, const struct ns_session *s,
			      unsigned int n)
{
	struct route *r = arg;
	uint8_t key[NS_KEY_LEN];
	unsigned int i;

	for (i = 0; i < n; i++) {
		uint16_t slot;
		unsigned int node;

		ns_key_build(s[i].proto, &s[i].orig, key);
		slot = ns_key_slot(key, NS_KEY_LEN);
		node = r->topo->slot_covered[slot] ? r->topo->slot_node[slot]
						   : 0;
		checkpoint_add(&r->nr[node].cp, &s[i], 1);
	}
	return n;
}

/* Whether the slot map of topo is still the store's, and no slot is
 * being migrated (CLUSTER NODES shows "[slot->-" or "[slot-<-"): a
 * segment key that moved between two listings could have been missed. */
static int slots_still(const struct nsa_store_conf *conf,
		       const struct nsa_topology *topo, char *err,
		       size_t errlen)
{
	struct nsa_topology *now = malloc(sizeof(*now));
	unsigned int i;
	int still;

	if (now == NULL)
		return 0;
	still = nsa_topology_fetch(conf, now, err, errlen) == 0 &&
		memcmp(now->slot_node, topo->slot_node,
		       sizeof(topo->slot_node)) == 0 &&
		memcmp(now->slot_covered, topo->slot_covered,
		       sizeof(topo->slot_covered)) == 0;
	free(now);
	for (i = 0; still && i < topo->n_nodes; i++) {
		redisContext *c = nsa_store_connect(conf, &topo->nodes[i].addr,
						    err, errlen);
		redisReply *r;

		if (c == NULL)
			return 0;
		r = redisCommand(c, "CLUSTER NODES");
		if (r && r->type == REDIS_REPLY_ERROR)
			nsa_set_err(err, errlen, "CLUSTER NODES: %s", r->str);
		still = r && r->type == REDIS_REPLY_STRING &&
			strstr(r->str, "->-") == NULL &&
			strstr(r->str, "-<-") == NULL;
		if (r)
			freeReplyObject(r);
		redisFree(c);
	}
	if (!still && err[0] == '\0')
		nsa_set_err(err, errlen,
			    "slots moved during the round: retried later");
	return still;
}

int nsa_compact_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd,
		    struct nsa_compact_result *res, char *err, size_t errlen)
{
	const unsigned int n = topo->n_nodes;
	struct node_round *nr = calloc(n ? n : 1, sizeof(*nr));
	struct nsa_logmerge m;
	struct route route = {topo, nr};
	struct nsa_logmark mk = {0}, done = {0};
	unsigned int i;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	if (errlen)
		err[0] = '\0';
	if (nr == NULL)
		return -ENOMEM;
	if (nsa_logmerge_init(&m) != 0) {
		free(nr);
		return -ENOMEM;
	}
	m.batch_key = rd->key;
	m.batch_key_len = rd->key ? rd->key_len : 0;
	for (i = 0; i < n && rc == 0; i++) {
		nr[i].c = nsa_store_connect_named(conf, &topo->nodes[i].addr,
						  NSA_WRITER_NAME, NULL, err,
						  errlen);
		if (nr[i].c == NULL) {
			rc = -EIO;
			break;
		}
		/* The round in force: the first master's mark (every master
		 * has the same one unless a round failed half way, and then
		 * nothing was expired). */
		if (i == 0) {
			done.round_ns = nsdp_realtime_ns();
			rc = mark_read(nr[i].c, topo->nodes[i].channel_slot,
				       &mk, err, errlen);
		}
		if (rc == 0)
			rc = list_segments(nr[i].c, &nr[i].l, err, errlen);
		if (rc == 0 &&
		    ((nr[i].merged = calloc(nr[i].l.n ? nr[i].l.n : 1, 1)) ==
			     NULL ||
		     (nr[i].stale = calloc(nr[i].l.n ? nr[i].l.n : 1, 1)) ==
			     NULL))
			rc = -ENOMEM;
		if (rc == 0)
			rc = read_segments(nr[i].c, &nr[i].l, &mk, rd->until_ns,
					   nr[i].merged, nr[i].stale, &m, res,
					   err, errlen);
	}
	if (rc == 0 && topo->cluster && !slots_still(conf, topo, err, errlen))
		rc = -EAGAIN;
	if (rc == 0)
		rc = nsa_fence_check(conf, topo, rd->epoch, err, errlen);
	for (i = 0; i < n && rc == 0; i++) {
		struct checkpoint *cp = &nr[i].cp;

		cp->c = nr[i].c;
		cp->slot = topo->nodes[i].channel_slot;
		cp->id = rd->id;
		cp->gen = rd->gen;
		cp->now_ns = nsdp_realtime_ns();
		cp->key = rd->key;
		cp->key_len = rd->key_len;
		cp->len = NS_BATCH_HDR_LEN;
		cp->res = res;
		cp->err = err;
		cp->errlen = errlen;
		cp->buf = malloc(NS_BATCH_MAX_LEN);
		if (cp->buf == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		nsa_logmerge_emit(&m, nsdp_realtime_ns(), route_add, &route);
		for (i = 0; i < n; i++) {
			if (nr[i].cp.failed || checkpoint_flush(&nr[i].cp) != 0)
				rc = -EINVAL;
			/* Every checkpoint acknowledged before anything
			 * expires, on every master. */
			if (replies(nr[i].c, nr[i].cp.pending, err, errlen) !=
			    0)
				rc = -EIO;
			done.parts += nr[i].cp.index;
		}
	}
	/* Then the mark on every master, before anything expires: from it
	 * on, readers leave out the checkpoints it replaces and the segments
	 * it covers, expired or not (schema/FORMAT.md, Compaction). */
	if (rc == 0) {
		mark_of_round(&done, rd->id, rd->gen, rd->grace_ms, &mk,
			      rd->until_ns);
		for (i = 0; i < n; i++)
			mark_write(nr[i].c, topo->nodes[i].channel_slot, &done);
		for (i = 0; i < n; i++)
			if (replies(nr[i].c, 1, err, errlen) != 0)
				rc = -EIO;
	}
	for (i = 0; i < n && rc == 0; i++) {
		const struct key_list *l = &nr[i].l;
		unsigned int sent = 0;
		size_t k;

		for (k = 0; k < l->n; k++) {
			if (nr[i].merged[k] || nr[i].stale[k]) {
				/* Segments outlive the old checkpoints by a
				 * grace period (nsa_compact_node). */
				redisAppendCommand(
					nr[i].c, "PEXPIRE %b %u LT", l->k[k],
					l->len[k],
					is_checkpoint(l->k[k], l->len[k])
						? rd->grace_ms
						: 2 * rd->grace_ms);
				sent++;
			}
			if (sent == 1024 || (k == l->n - 1 && sent > 0)) {
				if (replies(nr[i].c, sent, err, errlen) != 0)
					rc = -EIO;
				sent = 0;
			}
		}
	}
	for (i = 0; i < n; i++) {
		free(nr[i].cp.buf);
		free(nr[i].merged);
		free(nr[i].stale);
		keys_free(&nr[i].l);
		if (nr[i].c)
			redisFree(nr[i].c);
	}
	free(nr);
	nsa_logmerge_free(&m);
	return rc;
}
