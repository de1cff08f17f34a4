/*
 * nsa_compact_segments.c - what a compaction round reads on one master:
 * SCAN lists its keys under "ns:l:" (checkpoints and mark too), GETRANGE
 * reads the record counts of those it merges (to plan its passes), and
 * MGET reads them slot by slot into a merge (nsa_logmerge), once per pass.
 *
 * Invariants:
 * - Only the keys the round's plan merges are read (nsa_compact_plan.c):
 *   a younger segment is never read whole only to be left out.
 * - An MGET asks for a few hundred KiB at most, and a SCAN visits 100
 *   buckets, since the store builds each reply while every other client
 *   waits: it stays free for the writers.
 * - Everything here blocks on the round's own connections (hiredis, the
 *   store's timeouts): compaction runs on its own thread.
 *
 * Not here: what the round writes (nsa_compact_checkpoint.c), which keys a
 * round merges and why (nsa_compact_plan.c, nsa_compact.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_compact_checkpoint.h"
#include "nsa_compact_segments.h"

/* An MGET asks for at most 64 segments (12 KiB each at 256 records), or
 * 4 checkpoints (192 KiB each): under 1 MiB per reply, which the store
 * builds while every other client waits. */
#define NSA_COMPACT_MGET 64
#define NSA_CHECKPOINT_WEIGHT 16
/* A SCAN visits 100 of the store's buckets: at 1000 it held the store for
 * 0.5-1.3 ms each on a 2-vCPU host, and the dozens of a round's listings
 * held the writers' replies and the standbys' notifications for as long
 * (lag p99 at 400 000 records/s 0.86-2.0 ms in six runs, against
 * 0.56-0.78 ms at 100). */
#define NSA_COMPACT_SCAN_COUNT "100"
/* GETRANGE commands pipelined at once. */
#define NSA_COMPACT_PEEK 1024
/* A batch header's record count: bytes 6-7 (schema/FORMAT.md, Batch). */
#define BATCH_COUNT_END 8

void nsa_compact_keys_free(struct nsa_compact_keys *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->k[i]);
	free(l->k);
	free(l->len);
	free(l->plan);
	memset(l, 0, sizeof(*l));
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
	l->bytes += len + 1 + sizeof(char *) + sizeof(size_t) + 1;
	return 0;
}

int nsa_compact_list(redisContext *c, struct nsa_compact_keys *l, char *err,
		     size_t errlen)
{
	char cursor[32] = "0";

	do {
		redisReply *r =
			redisCommand(c, "SCAN %s MATCH %s* COUNT %s", cursor,
				     NS_SEGMENT_PREFIX, NSA_COMPACT_SCAN_COUNT);
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
	l->plan = calloc(l->n ? l->n : 1, 1);
	return l->plan ? 0 : -ENOMEM;
}

static int by_slot(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int nsa_compact_count(redisContext *c, const struct nsa_compact_keys *l,
		      uint64_t *records, char *err, size_t errlen)
{
	size_t i = 0;

	while (i < l->n) {
		size_t sent = 0, j;

		for (j = i; j < l->n && sent < NSA_COMPACT_PEEK; j++) {
			if (!nsa_compact_merged(l, j))
				continue;
			redisAppendCommand(c, "GETRANGE %b 0 %d", l->k[j],
					   l->len[j], BATCH_COUNT_END - 1);
			sent++;
		}
		for (; i < j; i++) {
			redisReply *r;

			if (!nsa_compact_merged(l, i))
				continue;
			if (redisGetReply(c, (void **)&r) != REDIS_OK) {
				nsa_set_err(err, errlen, "GETRANGE: %s",
					    c->errstr);
				return -EIO;
			}
			/* A key whose slot moved (MOVED, ASK) counts for
			 * nothing here: the count only plans the passes. */
			if (r->type == REDIS_REPLY_STRING &&
			    r->len >= BATCH_COUNT_END)
				*records += (uint64_t)(uint8_t)r->str[6] << 8 |
					    (uint8_t)r->str[7];
			freeReplyObject(r);
		}
	}
	return 0;
}

/* The keys l merges by slot, then index: the slot above the index. The
 * number of them. */
static size_t order_by_slot(const struct nsa_compact_keys *l, uint64_t *order)
{
	size_t i, n = 0;

	for (i = 0; i < l->n; i++)
		if (nsa_compact_merged(l, i))
			order[n++] = (uint64_t)ns_key_slot(l->k[i], l->len[i])
					     << 32 |
				     i;
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

/* Merge the values of MGET reply r, of the n keys of order: a checkpoint's
 * records flagged as such. 0, -ENOMEM or -ENOBUFS. */
static int merge_reply(const struct nsa_compact_keys *l, const uint64_t *order,
		       size_t n, const redisReply *r, struct nsa_logmerge *m,
		       struct nsa_compact_result *res, int count)
{
	size_t j;

	for (j = 0; j < n; j++) {
		const redisReply *v = r->element[j];
		size_t k = (uint32_t)order[j];
		int rc;

		if (v->type != REDIS_REPLY_STRING)
			continue; /* expired since listed */
		m->from_checkpoint = l->plan[k] == NSA_PLAN_MERGE_CP;
		rc = nsa_logmerge_segment(m, (const uint8_t *)v->str, v->len);
		if (rc == -ENOMEM || rc == -ENOBUFS)
			return rc;
		if (rc < 0 || !count)
			continue; /* not a batch, or not signed with the key */
		res->segments++;
		res->bytes_read += v->len;
	}
	return 0;
}

/* MGET's reply made of a GET of each of the n keys, each following
 * MOVED or ASK (nsa_compact_cmd): an array, NULL when one failed. */
static redisReply *mget_each(const struct nsa_store_conf *conf, redisContext *c,
			     size_t n, const char **keys, const size_t *lens)
{
	redisReply *all = calloc(1, sizeof(*all));

	if (all == NULL ||
	    (all->element = calloc(n, sizeof(*all->element))) == NULL) {
		free(all);
		return NULL;
	}
	all->type = REDIS_REPLY_ARRAY;
	for (all->elements = 0; all->elements < n; all->elements++) {
		const char *argv[2] = {"GET", keys[all->elements]};
		size_t argl[2] = {3, lens[all->elements]};
		redisContext *moved;
		redisReply *r = nsa_compact_cmd(conf, c, &moved, 2, argv, argl);

		if (moved)
			redisFree(moved);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			if (r)
				freeReplyObject(r);
			freeReplyObject(all);
			return NULL;
		}
		all->element[all->elements] = r;
	}
	return all;
}

int nsa_compact_read(const struct nsa_store_conf *conf, redisContext *c,
		     const struct nsa_compact_keys *l, struct nsa_logmerge *m,
		     int count, struct nsa_compact_result *res,
		     size_t *reply_bytes, char *err, size_t errlen)
{
	uint64_t *order = malloc((l->n ? l->n : 1) * sizeof(*order));
	const char *argv[NSA_COMPACT_MGET + 1] = {"MGET"};
	size_t lens[NSA_COMPACT_MGET + 1] = {4}, i, n, n_want;
	int rc = 0;

	if (order == NULL)
		return -ENOMEM;
	n_want = order_by_slot(l, order);
	for (i = 0; i < n_want && rc == 0; i += n) {
		redisReply *r;
		size_t bytes = 0;

		n = mget_keys(l, order + i, n_want - i, argv + 1, lens + 1);
		r = redisCommandArgv(c, (int)n + 1, argv, lens);
		if (r && r->type == REDIS_REPLY_ERROR) {
			/* The slot moves (MOVED, ASK, TRYAGAIN): key by key,
			 * where each is now. */
			freeReplyObject(r);
			r = mget_each(conf, c, n, argv + 1, lens + 1);
		}
		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements != n) {
			nsa_set_err(err, errlen, "MGET: %s",
				    r && r->type == REDIS_REPLY_ERROR
					    ? r->str
					    : c->errstr);
			rc = -EIO;
		} else {
			for (size_t j = 0; j < n; j++)
				bytes += r->element[j]->len;
			if (bytes > *reply_bytes)
				*reply_bytes = bytes;
			rc = merge_reply(l, order + i, n, r, m, res, count);
		}
		if (r)
			freeReplyObject(r);
	}
	free(order);
	return rc;
}
