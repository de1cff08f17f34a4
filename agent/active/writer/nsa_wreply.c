/*
 * nsa_wreply.c - a writer's replies: read off a link as they come, each
 * charged to the batch and record it answers (in order per connection,
 * as the expectations were queued), or every one a dead link owed settled
 * as lost.
 *
 * Invariants:
 * - A reply due is settled exactly once, answered or lost: the batch's
 *   pending count falls by one, and the batch is finalized when it falls
 *   to zero on a closed batch.
 * - A lost connection puts the writer in retry mode with a topology
 *   refresh, and makes the resend replay the window too (nsa_replay.c);
 *   every batch it served is resent.
 *
 * Not here: what the commands were (nsa_wpipe.c), the read-back's replies
 * (nsa_wreadback.c), reconnecting and the resend (nsa_wlink.c).
 */
#include <string.h>

#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wpipe.h"
#include "nsa_wreadback.h"
#include "nsa_wreply.h"

/* The reply e, due on c for a batch, came in or was lost. */
static void reply_settle(struct nsa_writer *w, struct nsa_link *c,
			 const struct nsa_exp *e)
{
	struct nsa_batch *b = e->ptr;

	if (e->kind == NSA_EXP_NOTIFY)
		c->inflight_batches--;
	if (e->kind == NSA_EXP_SEGMENT)
		nsa_seg_untrack(w, b);
	if (--b->pending == 0 && b->closed)
		nsa_batch_finalize(w, b);
}

/* The connection is gone: every reply it owed is lost, so every batch it
 * served must be resent after a reconnect. */
void nsa_link_kill(struct nsa_writer *w, struct nsa_link *c, const char *why)
{
	NSA_WARN("writer %u: connection to %s:%u lost (%s); will reconnect and "
		 "resend",
		 w->idx, c->conn.addr.host, c->conn.addr.port, why);
	nsa_conn_close(&c->conn);
	w->retry_mode = 1;
	w->need_refresh = 1;
	w->master_lost = 1;
	while (c->conn.exp_count > 0) {
		struct nsa_exp e = nsa_conn_exp_pop(&c->conn);
		struct nsa_batch *b = e.ptr;

		if (e.kind == NSA_EXP_READBACK) {
			nsa_readback_lost(w, &e);
			continue;
		}
		b->retry = 1;
		reply_settle(w, c, &e);
	}
	c->inflight_batches = 0;
}

/* A reply for a batch: an error worth a resend puts the writer in retry
 * mode; a refusal for good drops the record (its key is read back) or, for
 * a segment, the whole batch (written again once its master takes a
 * segment: nsa_log_resync_send). */
static void handle_reply(struct nsa_writer *w, struct nsa_link *c,
			 const struct nsa_exp *e, char type, const char *t,
			 size_t len)
{
	struct nsa_batch *b = e->ptr;

	if (type == '-' && e->kind != NSA_EXP_ASKING) {
		if (nsa_writer_error_retry(w, t, len)) {
			b->retry = 1;
			w->retry_mode = 1;
			if (e->kind == NSA_EXP_CMD && len > 4 &&
			    memcmp(t, "ASK ", 4) == 0)
				b->rflags[e->pos] |= NSA_REC_ASKED;
		} else if (e->kind == NSA_EXP_CMD) {
			b->rflags[e->pos] |= NSA_REC_DROPPED;
			nsa_readback_queue(w, &b->sess[e->pos]);
		} else if (e->kind == NSA_EXP_SEGMENT) {
			/* The log cannot be read back by key: the records
			 * are lost from the store (schema/FORMAT.md) until
			 * the batch is written again (finalize keeps it);
			 * a rewrite refused is not, its standbys resync. */
			unsigned int i;

			for (i = 0; i < b->lines; i++)
				b->rflags[i] |= NSA_REC_DROPPED;
			b->lost = !b->rewrite;
		}
	} else if (e->kind == NSA_EXP_SEGMENT) {
		nsa_log_lost_taken(w, b->channel_slot);
	}
	reply_settle(w, c, e);
}

/* Account the next complete reply: 1, 0 when none is complete, -1 on a
 * protocol error (the connection is dead then). */
static int link_next_reply(struct nsa_writer *w, struct nsa_link *c)
{
	const struct nsa_exp *next = nsa_conn_exp_peek(&c->conn);
	const char *text;
	struct nsa_exp e;
	long blen;
	size_t len;
	char type;
	int rc;

	if (next != NULL && next->kind == NSA_EXP_READBACK &&
	    c->conn.in_pos < c->conn.in_len &&
	    c->conn.in[c->conn.in_pos] == '$') {
		const uint8_t *data;

		rc = nsa_conn_bulk(&c->conn, &data, &blen);
		if (rc != 1)
			goto out;
		e = nsa_conn_exp_pop(&c->conn);
		nsa_readback_reply(w, &e, '$', (const char *)data, blen);
		return 1;
	}
	rc = nsa_conn_line(&c->conn, &type, &text, &len);
	if (rc != 1)
		goto out;
	if (c->conn.exp_count == 0) {
		nsa_link_kill(w, c, "unexpected reply");
		return -1;
	}
	e = nsa_conn_exp_pop(&c->conn);
	if (e.kind == NSA_EXP_READBACK)
		nsa_readback_reply(w, &e, type, text, (long)len);
	else
		handle_reply(w, c, &e, type, text, len);
	return 1;
out:
	if (rc < 0)
		nsa_link_kill(w, c, c->conn.err);
	return rc;
}

/* Read what the socket has and account every complete reply. Returns the
 * number of bytes read (0 if none); the connection may die meanwhile. */
size_t nsa_link_read(struct nsa_writer *w, struct nsa_link *c)
{
	size_t total = 0;

	while (c->conn.fd >= 0) {
		ssize_t n = nsa_conn_recv(&c->conn);
		int rc;

		if (n < 0) {
			nsa_link_kill(w, c, c->conn.err);
			break;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		c->wait_since_ns = w->now_ns;
		while ((rc = link_next_reply(w, c)) == 1)
			;
		if (rc < 0)
			return total;
		if ((size_t)n < NSA_CONN_IN_CAP / 2)
			break;
	}
	return total;
}
