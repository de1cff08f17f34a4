/*
 * nsa_compact_checkpoint.c - what a compaction round writes on one master
 * (schema/FORMAT.md, Compaction): the live records (and a generation of
 * tombstones) as checkpoint batches of NSA_CHECKPOINT_RECORDS under
 * "ns:l:{N}:k:<id>:<gen>:<i>", acknowledged by a replica (WAIT), then the
 * round's commit mark "ns:l:{N}:c" that names them, signed and
 * acknowledged likewise, then PEXPIRE LT on what the round replaced.
 *
 * Invariants:
 * - A checkpoint batch is a batch as published (signed with the batch key
 *   when there is one), in a slot the master serves that is not moving,
 *   with the longest remaining timeout of its records as PX (none when
 *   one has timeout 0). At most NSA_CHECKPOINT_INFLIGHT batches wait for
 *   their replies: the round's memory does not grow with the table.
 * - A mark is read and written wherever its slot is (MOVED and ASK are
 *   followed, on a connection named as a writer, so that the fence closes
 *   it too).
 * - Segments outlive the checkpoints they are merged into by a grace
 *   period (they expire after two, checkpoints after one), so that a
 *   reader still reading an old checkpoint's record of a session also
 *   reads the segment whose delete the new checkpoint left out.
 * - Everything here blocks on the round's own connection (hiredis, the
 *   store's timeouts): compaction runs on its own thread.
 *
 * Not here: the order of the writes across masters and what must be
 * acknowledged before what (nsa_compact.c), the mark's text and what a
 * reader takes under it (nsa_logmerge.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_compact_checkpoint.h"
#include "nsa_fence.h"

/* 48 + 4094 * 48 = 196 560 bytes, with the 10 bytes of Redis's string
 * header within the 196 608-byte jemalloc size class (4 095 would not be). */
#define NSA_CHECKPOINT_RECORDS 4094
/* PEXPIRE commands pipelined at once. */
#define NSA_EXPIRE_PIPELINE 1024
/* Checkpoint SETs whose replies may be due at once (192 KiB each). */
#define NSA_CHECKPOINT_INFLIGHT 8

int nsa_checkpoint_open(struct nsa_checkpoint *cp, redisContext *c,
			uint16_t slot, const struct nsa_compact_round *rd,
			uint64_t gen, uint64_t now_ns,
			struct nsa_compact_result *res, char *err,
			size_t errlen)
{
	cp->c = c;
	cp->slot = slot;
	cp->id = rd->id;
	cp->gen = gen;
	cp->now_ns = now_ns;
	cp->key = rd->key;
	cp->key_len = rd->key_len;
	cp->len = NS_BATCH_HDR_LEN;
	cp->res = res;
	cp->err = err;
	cp->errlen = errlen;
	cp->buf = malloc(NS_BATCH_MAX_LEN);
	return cp->buf ? 0 : -ENOMEM;
}

void nsa_checkpoint_close(struct nsa_checkpoint *cp)
{
	free(cp->buf);
	cp->buf = NULL;
}

/* Queue the batch in cp->buf as the next part of the checkpoint. */
static int checkpoint_flush(struct nsa_checkpoint *cp)
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
	if (cp->pending >= NSA_CHECKPOINT_INFLIGHT) {
		if (nsa_compact_replies(cp->c, cp->pending, cp->err,
					cp->errlen) != 0)
			cp->failed = 1;
		cp->pending = 0;
	}
	cp->len = NS_BATCH_HDR_LEN;
	cp->count = 0;
	cp->expire_ns = 0;
	cp->forever = 0;
	return 0;
}

unsigned int nsa_checkpoint_add(void *arg, const struct ns_session *s,
				unsigned int n)
{
	struct nsa_checkpoint *cp = arg;
	unsigned int i;

	for (i = 0; i < n && !cp->failed; i++) {
		int len = ns_record_encode(&s[i], cp->buf + cp->len,
					   NS_BATCH_MAX_LEN - cp->len);
		uint64_t exp = s[i].timestamp_ns +
			       (uint64_t)s[i].timeout_ms * 1000000u;

		if (len < 0)
			continue;
		cp->len += (size_t)len;
		cp->count++;
		if (s[i].event == NS_EV_DELETE)
			cp->res->tombstones++;
		else
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

void nsa_checkpoint_drain(struct nsa_checkpoint *cp)
{
	if (cp->pending &&
	    nsa_compact_replies(cp->c, cp->pending, cp->err, cp->errlen) != 0)
		cp->failed = 1;
	cp->pending = 0;
}

int nsa_checkpoint_settle(struct nsa_checkpoint *cp)
{
	int rc = 0;

	if (checkpoint_flush(cp) != 0)
		rc = -EINVAL;
	if (nsa_compact_replies(cp->c, cp->pending, cp->err, cp->errlen) != 0)
		rc = -EIO;
	cp->pending = 0;
	return cp->failed ? -EIO : rc;
}

int nsa_compact_replies(redisContext *c, unsigned int n, char *err,
			size_t errlen)
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

/* A MOVED or ASK reply's target "host:port" into addr: 1 for ASK, 0 for
 * MOVED, -1 for any other reply. */
static int redirect_of(const redisReply *r, struct nsa_addr *addr)
{
	const char *p;
	int ask;

	if (r == NULL || r->type != REDIS_REPLY_ERROR)
		return -1;
	ask = strncmp(r->str, "ASK ", 4) == 0;
	if (!ask && strncmp(r->str, "MOVED ", 6) != 0)
		return -1;
	p = strchr(r->str + (ask ? 4 : 6), ' ');
	if (p == NULL || nsa_addr_parse(p + 1, addr) != 0)
		return -1;
	return ask;
}

redisReply *nsa_compact_cmd(const struct nsa_store_conf *conf, redisContext *c,
			    redisContext **moved, int argc, const char **argv,
			    const size_t *lens)
{
	redisReply *r = redisCommandArgv(c, argc, argv, lens);
	struct nsa_addr at;
	char err[128], name[NSA_PAIR_NAME_MAX];
	int hops, ask;

	*moved = NULL;
	/* A key of a slot being imported is MOVED back by its target, then
	 * ASKed there by its source: a few hops at most. */
	for (hops = 0; hops < 3 && (ask = redirect_of(r, &at)) >= 0; hops++) {
		freeReplyObject(r);
		if (*moved)
			redisFree(*moved);
		*moved = nsa_store_connect_named(
			conf, &at, nsa_writer_name(conf->pair, name), NULL, err,
			sizeof(err));
		if (*moved == NULL)
			return NULL;
		if (ask) {
			r = redisCommand(*moved, "ASKING");
			if (r)
				freeReplyObject(r);
		}
		r = redisCommandArgv(*moved, argc, argv, lens);
	}
	return r;
}

int nsa_compact_mark_read(const struct nsa_store_conf *conf, redisContext *c,
			  uint16_t slot, const char *key, size_t key_len,
			  struct nsa_logmark *mk, int *refused, char *err,
			  size_t errlen)
{
	char name[NS_SEGMENT_KEY_MAX];
	const char *argv[2] = {"MGET", name};
	size_t lens[2] = {4, 0};
	redisContext *moved;
	redisReply *r;
	int rc = 0;

	memset(mk, 0, sizeof(*mk));
	*refused = 0;
	nsa_logmark_key(slot, name, sizeof(name));
	lens[1] = strlen(name);
	r = nsa_compact_cmd(conf, c, &moved, 2, argv, lens);
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
		nsa_set_err(err, errlen, "MGET %s: %s", name,
			    r && r->type == REDIS_REPLY_ERROR ? r->str
							      : c->errstr);
		rc = -EIO;
	} else if (r->element[0]->type == REDIS_REPLY_STRING) {
		/* Not a mark, or not signed with the key: refused, read as
		 * none (another master's may be the newest). */
		*refused = nsa_logmark_parse_signed(r->element[0]->str,
						    r->element[0]->len, key,
						    key_len, mk) != 0;
	}
	if (r)
		freeReplyObject(r);
	if (moved)
		redisFree(moved);
	return rc;
}

int nsa_compact_mark_write(const struct nsa_store_conf *conf, redisContext *c,
			   uint16_t slot, const char *text, size_t len,
			   unsigned int wait_ms, char *err, size_t errlen)
{
	char name[NS_SEGMENT_KEY_MAX];
	const char *argv[3] = {"SET", name, text};
	size_t lens[3] = {3, 0, len};
	redisContext *moved;
	redisReply *r;
	int rc = 0;

	nsa_logmark_key(slot, name, sizeof(name));
	lens[1] = strlen(name);
	r = nsa_compact_cmd(conf, c, &moved, 3, argv, lens);
	if (r == NULL || r->type != REDIS_REPLY_STATUS) {
		nsa_set_err(err, errlen, "SET %s: %s", name,
			    r && r->type == REDIS_REPLY_ERROR ? r->str
							      : c->errstr);
		rc = -EIO;
	}
	if (r)
		freeReplyObject(r);
	if (rc == 0)
		rc = nsa_store_wait_replica(moved ? moved : c, wait_ms, err,
					    errlen);
	if (moved)
		redisFree(moved);
	return rc;
}

uint64_t nsa_compact_expire(redisContext *c, const struct nsa_compact_keys *l,
			    unsigned int grace_ms)
{
	unsigned int sent = 0;
	uint64_t refused = 0;
	size_t i;

	for (i = 0; i < l->n; i++) {
		const uint8_t p = l->plan[i];
		redisReply *r;

		if (p == NSA_PLAN_MERGE || p == NSA_PLAN_EXPIRE) {
			redisAppendCommand(c, "PEXPIRE %b %u LT", l->k[i],
					   l->len[i], 2 * grace_ms);
			sent++;
		} else if (p == NSA_PLAN_MERGE_CP || p == NSA_PLAN_EXPIRE_CP) {
			redisAppendCommand(c, "PEXPIRE %b %u LT", l->k[i],
					   l->len[i], grace_ms);
			sent++;
		}
		if (sent < NSA_EXPIRE_PIPELINE && i + 1 < l->n)
			continue;
		for (; sent > 0; sent--) {
			if (redisGetReply(c, (void **)&r) != REDIS_OK)
				return refused + sent;
			refused += r->type == REDIS_REPLY_ERROR;
			freeReplyObject(r);
		}
	}
	return refused;
}
