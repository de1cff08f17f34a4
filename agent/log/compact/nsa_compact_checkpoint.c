/*
 * nsa_compact_checkpoint.c - what a compaction round writes on one master
 * (schema/FORMAT.md, Compaction): the live records as checkpoint batches
 * of NSA_CHECKPOINT_RECORDS under "ns:l:{N}:k:<id>:<gen>:<i>", then the
 * round's commit mark "ns:l:{N}:c" that names them, then PEXPIRE LT on
 * what the round merged or found stale.
 *
 * Invariants:
 * - A checkpoint batch is a batch as published (signed with the batch key
 *   when there is one), in the master's channel slot, with the longest
 *   remaining timeout of its records as PX (none when one has timeout 0).
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

/* 48 + 4094 * 48 = 196 560 bytes, with the 10 bytes of Redis's string
 * header within the 196 608-byte jemalloc size class (4 095 would not be). */
#define NSA_CHECKPOINT_RECORDS 4094
/* PEXPIRE commands pipelined at once. */
#define NSA_EXPIRE_PIPELINE 1024

int nsa_checkpoint_open(struct nsa_checkpoint *cp, redisContext *c,
			uint16_t slot, const struct nsa_compact_round *rd,
			uint64_t now_ns, struct nsa_compact_result *res,
			char *err, size_t errlen)
{
	cp->c = c;
	cp->slot = slot;
	cp->id = rd->id;
	cp->gen = rd->gen;
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

int nsa_checkpoint_settle(struct nsa_checkpoint *cp)
{
	int rc = 0;

	if (cp->failed || checkpoint_flush(cp) != 0)
		rc = -EINVAL;
	if (nsa_compact_replies(cp->c, cp->pending, cp->err, cp->errlen) != 0)
		rc = -EIO;
	return rc;
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

int nsa_compact_mark_read(redisContext *c, uint16_t slot,
			  struct nsa_logmark *mk, char *err, size_t errlen)
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

void nsa_compact_mark_of_round(struct nsa_logmark *done,
			       const struct nsa_compact_round *rd,
			       const struct nsa_logmark *mk)
{
	done->set = 1;
	done->id = rd->id;
	done->gen = rd->gen;
	done->grace_ms = rd->grace_ms;
	/* Covered: sent at or before the round's until_ns. */
	done->until_ns = mk->set && mk->until_ns > rd->until_ns - 1
				 ? mk->until_ns
				 : rd->until_ns - 1;
}

void nsa_compact_mark_write(redisContext *c, uint16_t slot,
			    const struct nsa_logmark *mk)
{
	char name[NS_SEGMENT_KEY_MAX], v[NSA_LOGMARK_MAX];
	int len = nsa_logmark_format(mk, v, sizeof(v));

	nsa_logmark_key(slot, name, sizeof(name));
	redisAppendCommand(c, "SET %s %b", name, v, (size_t)len);
}

int nsa_compact_expire(redisContext *c, const struct nsa_compact_keys *l,
		       const uint8_t *merged, const uint8_t *stale,
		       unsigned int grace_ms, char *err, size_t errlen)
{
	unsigned int sent = 0;
	int rc = 0;
	size_t i;

	for (i = 0; i < l->n; i++) {
		if (merged[i] || stale[i]) {
			redisAppendCommand(
				c, "PEXPIRE %b %u LT", l->k[i], l->len[i],
				nsa_compact_is_checkpoint(l, i) ? grace_ms
								: 2 * grace_ms);
			sent++;
		}
		if (sent == NSA_EXPIRE_PIPELINE ||
		    (i == l->n - 1 && sent > 0)) {
			if (nsa_compact_replies(c, sent, err, errlen) != 0)
				rc = -EIO;
			sent = 0;
		}
	}
	return rc;
}
