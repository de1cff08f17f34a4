/*
 * nsa_wreadback.c - after the store refused a record for good, a writer
 * reads its key back (GET) and publishes what the store holds - the value,
 * or a delete when the key is absent - in a STORE batch, which standbys
 * apply over what they hold: the record's notification went out before the
 * refusal came back.
 *
 * Every record a writer appends enters here (nsa_append_record): a
 * correction goes to its master's STORE batch, any other record first
 * supersedes the read-back of its flow, then goes to the pipeline.
 *
 * Invariants: a record of the same flow sent after the GET supersedes the
 * correction (it tells the standbys itself, or is read back in turn), so a
 * correction never overtakes a newer record; a GET lost with its
 * connection, redirected, or answered during the resend is sent again.
 *
 * Not here: batches, routing and the meaning of error replies
 * (nsa_wbatch.c, nsa_wpipe.c), reading the replies (nsa_wreply.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wpipe.h"
#include "nsa_wreadback.h"

static int rb_slot_seen(const struct nsa_writer *w, uint16_t slot)
{
	return w->rb_slots[slot / 8] & (1u << (slot % 8));
}

void nsa_readback_queue(struct nsa_writer *w, const struct ns_session *s)
{
	if (w->n_rb == w->cap_rb) {
		size_t cap = w->cap_rb ? 2 * w->cap_rb : 64;
		struct nsa_readback *rb = realloc(w->rb, cap * sizeof(*rb));

		if (rb == NULL) {
			NSA_ERR("writer %u: out of memory: a refused key is "
				"not read back, the standbys may hold what "
				"the store refused",
				w->idx);
			return;
		}
		w->rb = rb;
		w->cap_rb = cap;
	}
	w->rb[w->n_rb] = (struct nsa_readback){.s = *s, .state = NSA_RB_QUEUED};
	if (ns_session_lines(s) == 2)
		w->rb[w->n_rb].v6 = *ns_session_v6_of(s);
	w->n_rb++;
	w->rb_undone++;
	W_STAT_ADD(w, corrections_due, 1);
}

static void readback_done(struct nsa_writer *w, struct nsa_readback *r)
{
	r->state = NSA_RB_DONE;
	if (--w->rb_undone == 0)
		w->n_rb = 0;
	if (w->rb_sent == 0)
		memset(w->rb_slots, 0, sizeof(w->rb_slots));
}

/* A record of s's flow goes out: a GET sent before it no longer tells the
 * last word on the key. */
static void readback_supersede(struct nsa_writer *w, const struct ns_session *s)
{
	uint8_t key[NS_KEY_MAX];
	size_t i, key_len;

	if (w->rb_sent == 0)
		return;
	key_len = ns_key_of(s, key);
	if (!rb_slot_seen(w, ns_key_slot(key, key_len)))
		return;
	for (i = 0; i < w->n_rb; i++)
		if (w->rb[i].state == NSA_RB_SENT &&
		    ns_session_same_flow(&w->rb[i].s, s))
			w->rb[i].superseded = 1;
}

/* Send GET for every queued read-back whose master is connected. */
void nsa_readback_send(struct nsa_writer *w)
{
	size_t i;

	if (w->rb_undone == w->rb_sent)
		return;
	for (i = 0; i < w->n_rb; i++) {
		struct nsa_readback *r = &w->rb[i];
		const struct nsa_exp e = {.kind = NSA_EXP_READBACK,
					  .pos = (uint32_t)i};
		uint8_t key[NS_KEY_MAX];
		unsigned int cmd_idx;
		struct nsa_link *c;
		uint16_t slot;
		size_t key_len;
		int asking;

		if (r->state != NSA_RB_QUEUED)
			continue;
		key_len = ns_key_of(&r->s, key);
		/* The slot's master: an ASK while it migrates sends the
		 * GET again after the resend. */
		c = w->conns[nsa_writer_route(w, key, key_len, &cmd_idx,
					      &asking)];
		if (c->conn.fd < 0)
			continue;
		nsa_conn_cmd(&c->conn, 2);
		nsa_conn_arg_str(&c->conn, "GET");
		nsa_conn_arg(&c->conn, key, key_len);
		if (c->conn.exp_count == 0)
			c->wait_since_ns = w->now_ns;
		if (nsa_conn_cmd_end(&c->conn, &e) != 0)
			return; /* out of memory: tried again next round */
		r->state = NSA_RB_SENT;
		r->superseded = 0;
		w->rb_sent++;
		slot = ns_key_slot(key, key_len);
		w->rb_slots[slot / 8] |= (uint8_t)(1u << (slot % 8));
	}
}

/* The connection died before the GET's reply: send it again. */
void nsa_readback_lost(struct nsa_writer *w, const struct nsa_exp *e)
{
	w->rb[e->pos].state = NSA_RB_QUEUED;
	w->rb_sent--;
}

/* Append s, which states what the store holds, to its master's STORE
 * batch (closing an open batch of other records first). */
static int readback_append(struct nsa_writer *w, const struct ns_session *s)
{
	uint8_t key[NS_KEY_MAX];
	unsigned int cmd_idx;
	struct nsa_link *c;
	struct nsa_batch *b;
	int asking, len;
	size_t key_len = ns_key_of(s, key);

	c = w->conns[nsa_writer_route(w, key, key_len, &cmd_idx, &asking)];
	if (c->open != NULL && !c->open->store && nsa_batch_close(w, c) != 0)
		return -ENOMEM;
	if (c->open == NULL) {
		if ((c->open = nsa_batch_get(w)) == NULL)
			return -ENOMEM;
		c->open->store = 1;
	}
	b = c->open;
	len = ns_record_encode(s, b->body + b->body_len, NS_RECORD_MAX_LEN);
	if (len < 0) {
		W_STAT_SUB(w, corrections_due, 1);
		if (b->count == 0) {
			nsa_batch_put(w, b);
			c->open = NULL;
		}
		return 0;
	}
	return nsa_batch_push(w, c, s, NSA_REC_STORE, (size_t)len);
}

/* What the store answered to GET for a refused record's key: its value,
 * nil, or an error. type '$' (text NULL for nil) or a line's type. */
void nsa_readback_reply(struct nsa_writer *w, const struct nsa_exp *e,
			char type, const char *text, long len)
{
	struct nsa_readback *r = &w->rb[e->pos];
	struct ns_rec held = {.s = r->s, .v6 = r->v6};

	w->rb_sent--;
	if (type == '-' && nsa_writer_error_retry(w, text, (size_t)len)) {
		/* Redirected or passing: read it again after the resend. */
		r->state = NSA_RB_QUEUED;
		w->retry_mode = 1;
		return;
	}
	if (type != '$') {
		/* Not knowing what the store holds, the writer leaves the
		 * standbys as they are rather than guess. */
		if (!w->rb_unreadable_logged)
			NSA_ERR("writer %u: a refused key could not be read "
				"back (%.*s): the standbys may hold what the "
				"store refused (the active's store user needs "
				"GET on ns:*; further ones are not logged)",
				w->idx, (int)(len > 200 ? 200 : len), text);
		w->rb_unreadable_logged = 1;
		W_STAT_SUB(w, corrections_due, 1);
		readback_done(w, r);
		return;
	}
	/* A value that is no session of this flow is no session the
	 * standbys could hold: the key is as good as absent. */
	if (text == NULL ||
	    ns_record_decode_rec((const uint8_t *)text, (size_t)len, &held) <
		    0 ||
	    !ns_session_same_flow(&held.s, &r->s)) {
		held = (struct ns_rec){.s = r->s, .v6 = r->v6};
		held.s.event = NS_EV_DELETE;
		held.s.timeout_ms = 0;
	}
	if (r->superseded) {
		W_STAT_SUB(w, corrections_due, 1);
	} else if (w->retry_mode) {
		/* Nothing new goes out now: read it again after the resend. */
		r->state = NSA_RB_QUEUED;
		return;
	} else if (readback_append(w, &held.s) != 0) {
		NSA_ERR("writer %u: out of memory: a standby may hold what "
			"the store refused",
			w->idx);
		W_STAT_SUB(w, corrections_due, 1);
	}
	readback_done(w, r);
}

/* Every record a writer appends: a correction to its STORE batch, any other
 * to the pipeline once the read-back of its flow is superseded. */
int nsa_append_record(struct nsa_writer *w, const struct ns_session *s,
		      uint8_t rflag)
{
	if (nsa_record_fenced(w, s, rflag))
		return 0;
	if (rflag & NSA_REC_STORE)
		return readback_append(w, s);
	readback_supersede(w, s);
	return nsa_pipe_append(w, s, rflag);
}
