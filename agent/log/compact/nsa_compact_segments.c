/*
 * nsa_compact_segments.c - what a compaction round reads on one master:
 * SCAN lists its segment keys (checkpoints too), GETRANGE reads each
 * segment's header (its send time), MGET reads the checkpoint and the
 * segments old enough slot by slot, and nsa_logmerge merges them.
 *
 * Invariants:
 * - A young segment (most of the log at a high rate, a grace period of
 *   writes) is never read whole only to be left out: its header says so
 *   first.
 * - An MGET asks for a few hundred KiB at most, which the store builds
 *   while every other client waits, so that it stays free for the writers.
 * - Everything here blocks on the round's own connections (hiredis, the
 *   store's timeouts): compaction runs on its own thread.
 *
 * Not here: what the round writes (nsa_compact_checkpoint.c), which
 * segments a round may take and why (nsa_compact.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_compact_segments.h"

/* An MGET asks for at most 64 segments (12 KiB each at 256 records), or
 * 4 checkpoints (192 KiB each): under 1 MiB per reply, which the store
 * builds while every other client waits. */
#define NSA_COMPACT_MGET 64
#define NSA_CHECKPOINT_WEIGHT 16
/* GETRANGE commands pipelined at once. */
#define NSA_COMPACT_PEEK 1024

void nsa_compact_keys_free(struct nsa_compact_keys *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->k[i]);
	free(l->k);
	free(l->len);
}

static int keys_add(struct nsa_compact_keys *l, const char *k, size_t len)
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

int nsa_compact_list(redisContext *c, struct nsa_compact_keys *l, char *err,
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

/* want[i]: whether listed key i is worth reading: the checkpoint of the
 * round mk marks (any checkpoint without a mark), or a segment whose
 * header (GETRANGE, pipelined) says it was sent before until_ns and after
 * the mark's until_ns. stale[i]: a checkpoint of no marked round begun
 * before mk's: one that no reader merges (replaced, or of a round that
 * failed), expired with the segments of this round. */
static int peek_segments(redisContext *c, const struct nsa_compact_keys *l,
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
			if (nsa_compact_is_checkpoint(l, i))
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

/* The wanted keys of l (want[i] set) by slot, then index: the slot above
 * the index. Clears want. The number of them. */
static size_t order_by_slot(const struct nsa_compact_keys *l, uint8_t *want,
			    uint64_t *order)
{
	size_t i, n = 0;

	for (i = 0; i < l->n; i++) {
		if (want[i])
			order[n++] = (uint64_t)ns_key_slot(l->k[i], l->len[i])
					     << 32 |
				     i;
		want[i] = 0;
	}
	qsort(order, n, sizeof(*order), by_slot);
	return n;
}

/* The keys of the next MGET, from order's first on: one slot's, up to
 * NSA_COMPACT_MGET segments' weight. Their number (at least one). */
static size_t mget_keys(const struct nsa_compact_keys *l, const uint64_t *order,
			size_t n_left, const char **argv, size_t *lens)
{
	size_t n = 0, weight = 0;

	while (n < n_left && weight < NSA_COMPACT_MGET &&
	       order[n] >> 32 == order[0] >> 32) {
		size_t k = (uint32_t)order[n];

		argv[n] = l->k[k];
		lens[n] = l->len[k];
		weight += nsa_compact_is_checkpoint(l, k)
				  ? NSA_CHECKPOINT_WEIGHT
				  : 1;
		n++;
	}
	return n;
}

/* Merge the values of MGET reply r, of the n keys of order: a checkpoint
 * whole, a segment if it was sent before until_ns (merged[] set for those
 * merged). 0 or -ENOMEM. */
static int merge_reply(const struct nsa_compact_keys *l, const uint64_t *order,
		       size_t n, const redisReply *r, uint64_t until_ns,
		       uint8_t *merged, struct nsa_logmerge *m,
		       struct nsa_compact_result *res)
{
	size_t j;

	for (j = 0; j < n; j++) {
		const redisReply *v = r->element[j];
		size_t k = (uint32_t)order[j];
		int took;

		if (v->type != REDIS_REPLY_STRING)
			continue; /* expired since listed */
		took = nsa_logmerge_segment_until(
			m, (const uint8_t *)v->str, v->len,
			nsa_compact_is_checkpoint(l, k) ? UINT64_MAX
							: until_ns);
		if (took == -ENOMEM)
			return -ENOMEM;
		if (took <= 0)
			continue; /* too young, or not a batch */
		merged[k] = 1;
		res->segments++;
		res->bytes_read += v->len;
	}
	return 0;
}

int nsa_compact_read(redisContext *c, const struct nsa_compact_keys *l,
		     const struct nsa_logmark *mk, uint64_t until_ns,
		     uint8_t *merged, uint8_t *stale, struct nsa_logmerge *m,
		     struct nsa_compact_result *res, char *err, size_t errlen)
{
	uint64_t *order = malloc((l->n ? l->n : 1) * sizeof(*order));
	const char *argv[NSA_COMPACT_MGET + 1] = {"MGET"};
	size_t lens[NSA_COMPACT_MGET + 1] = {4}, i, n, n_want = 0;
	int rc;

	if (order == NULL)
		return -ENOMEM;
	/* merged[] doubles as the wanted marks until the MGETs set it. */
	rc = peek_segments(c, l, mk, until_ns, merged, stale, err, errlen);
	if (rc == 0)
		n_want = order_by_slot(l, merged, order);
	for (i = 0; i < n_want && rc == 0; i += n) {
		redisReply *r;

		n = mget_keys(l, order + i, n_want - i, argv + 1, lens + 1);
		r = redisCommandArgv(c, (int)n + 1, argv, lens);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements != n) {
			nsa_set_err(err, errlen, "MGET: %s",
				    r && r->type == REDIS_REPLY_ERROR
					    ? r->str
					    : c->errstr);
			rc = -EIO;
		} else {
			rc = merge_reply(l, order + i, n, r, until_ns, merged,
					 m, res);
		}
		if (r)
			freeReplyObject(r);
	}
	free(order);
	res->records = m->records;
	return rc;
}
