/*
 * nsa_wpipe.c - a writer's pipeline: a record becomes its command in the
 * pipeline and its wire form in its master's open batch, a batch closes
 * with its notification (and, in the log layout, its segment before it),
 * and an error reply from the store is told apart: worth a resend or
 * refused for good.
 *
 * Every command queues an expectation naming its batch and record on its
 * connection, so that replies, which come in order per connection, are
 * charged right even when a record's SET went to another node (ASK) than
 * its batch's notification.
 *
 * Invariants:
 * - A batch holds records of one kind: records with commands, or
 *   corrections (NSA_REC_STORE, NS_BATCH_F_STORE), or none
 *   (NS_BATCH_F_RESYNC).
 * - A segment is on its writer's list of segments in flight before its
 *   signing time is read (nsa_seg_track): the compactor's cut relies on
 *   it.
 *
 * Not here: the batch pool and the end of a batch (nsa_wbatch.c), the
 * read-back of refused keys and the entry for every record
 * (nsa_wreadback.c), reading replies (nsa_wreply.c), connections,
 * redirections and the resend (nsa_wlink.c), the loop (nsa_active.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wpipe.h"
#include "nsa_wsettle.h"
#include "nsdp_time.h"

/* Log an error reply once per kind (its first word) and writer. */
static void log_error_once(struct nsa_writer *w, const char *text, size_t len)
{
	char kind[32];
	size_t k = 0;
	unsigned int i;

	while (k < len && k < sizeof(kind) - 1 && text[k] != ' ') {
		kind[k] = text[k];
		k++;
	}
	kind[k] = '\0';
	for (i = 0; i < w->n_logged; i++)
		if (strcmp(w->logged[i], kind) == 0)
			return;
	if (w->n_logged < NSA_MAX_LOGGED_KINDS)
		memcpy(w->logged[w->n_logged++], kind, k + 1);
	if (w->a->conf.store.layout == NSA_LAYOUT_LOG)
		/* A segment cannot be read back by key (schema/FORMAT.md,
		 * Log layout): it is written again, or the standbys read
		 * the master again. */
		NSA_ERR("writer %u: store refused a command: %.*s (records "
			"counted as dropped, written again once the master "
			"takes a segment, else the standbys are told to read "
			"the master again; further '%s' errors are counted, "
			"not logged)",
			w->idx, (int)(len > 200 ? 200 : len), text, kind);
	else
		NSA_ERR("writer %u: store refused a command: %.*s (records "
			"counted as dropped, their keys read back for the "
			"standbys; further '%s' errors are counted, not "
			"logged)",
			w->idx, (int)(len > 200 ? 200 : len), text, kind);
}

/* ---- commands --------------------------------------------------------- */

/* End a command whose reply answers record rec of batch b. */
static int expect(struct nsa_writer *w, struct nsa_link *c, struct nsa_batch *b,
		  uint32_t rec, uint32_t kind)
{
	const struct nsa_exp e = {.ptr = b, .kind = kind, .pos = rec};

	if (c->conn.exp_count == 0)
		c->wait_since_ns = w->now_ns;
	if (nsa_conn_cmd_end(&c->conn, &e) != 0)
		return -ENOMEM;
	b->pending++;
	return 0;
}

/* The connection a command for slot goes to (an ASK target while the slot
 * is being migrated), and whether it needs ASKING. */
static unsigned int route_slot(const struct nsa_writer *w, uint16_t slot,
			       unsigned int node, int *asking)
{
	unsigned int i;

	*asking = 0;
	for (i = 0; w->topo.cluster && i < w->n_ask; i++) {
		if (w->ask[i].slot == slot) {
			*asking = 1;
			return w->ask[i].conn;
		}
	}
	return node;
}

/* Log layout: the batch as published, stored as one segment in its
 * channel's slot (schema/FORMAT.md), before the notification. Its expiry is
 * the longest timeout among its records; none if one never expires. */
static int segment_write(struct nsa_writer *w, struct nsa_link *c,
			 struct nsa_batch *b, uint64_t seq, const uint8_t *mac,
			 size_t mac_len)
{
	char key[NS_SEGMENT_KEY_MAX];
	unsigned int i, cmd_idx, node;
	uint32_t px = 0;
	int forever = 0, asking, len;
	struct nsa_link *cc;

	for (node = 0; node < w->n_conns && w->conns[node] != c; node++)
		;
	for (i = 0; i < b->lines; i++) {
		if (b->rflags[i] & NSA_REC_LINE2)
			continue;
		if (b->sess[i].timeout_ms == 0)
			forever = 1;
		else if (b->sess[i].timeout_ms > px)
			px = b->sess[i].timeout_ms;
	}
	len = ns_segment_key(c->channel_slot, w->publisher_id, seq, key);
	if (len < 0)
		return len;
	cmd_idx = route_slot(w, c->channel_slot, node, &asking);
	cc = cmd_idx < w->n_conns ? w->conns[cmd_idx] : c;
	if (asking) {
		nsa_conn_cmd(&cc->conn, 1);
		nsa_conn_arg_str(&cc->conn, "ASKING");
		if (expect(w, cc, b, 0, NSA_EXP_ASKING) != 0)
			return -ENOMEM;
	}
	nsa_conn_cmd(&cc->conn, forever ? 3 : 5);
	nsa_conn_arg_str(&cc->conn, "SET");
	nsa_conn_arg(&cc->conn, key, (size_t)len);
	nsa_conn_arg2(&cc->conn, b->body, b->body_len, mac, mac_len);
	if (!forever) {
		nsa_conn_arg_str(&cc->conn, "PX");
		nsa_conn_arg_u32(&cc->conn, px);
	}
	if (expect(w, cc, b, 0, NSA_EXP_SEGMENT) != 0)
		return -ENOMEM;
	W_STAT_ADD(w, sets, 1);
	W_STAT_ADD(w, log_bytes, b->body_len + mac_len);
	return 0;
}

int nsa_batch_close(struct nsa_writer *w, struct nsa_link *c)
{
	const struct nsa_config *conf = &w->a->conf;
	struct nsa_batch *b = c->open;
	struct ns_batch_hdr h = {
		.publisher_id = w->publisher_id,
		.gateway_id = conf->gateway_id,
		.epoch = b->epoch,
		.count = (uint16_t)b->count,
		.flags = (uint8_t)((conf->batch_key_len ? NS_BATCH_F_HMAC : 0) |
				   (b->store ? NS_BATCH_F_STORE : 0) |
				   (b->resync ? NS_BATCH_F_RESYNC : 0) |
				   (b->rewrite ? NS_BATCH_F_REWRITE : 0)),
		.seq = ++w->seq[c->channel_slot],
		.body_len = (uint32_t)(b->body_len - NS_BATCH_HDR_LEN),
		/* Signed with the records: a standby refuses the batch on
		 * another channel, or once it is older than its subscription
		 * (nsa_order.c). */
		.channel_slot = c->channel_slot,
	};
	const int segment =
		conf->store.layout == NSA_LAYOUT_LOG && !b->store && !b->resync;
	uint8_t mac[NS_BATCH_MAC_LEN];
	size_t mac_len = 0;

	b->channel_slot = c->channel_slot;
	if (segment)
		nsa_seg_track(w, b);
	/* After nsa_seg_track's low mark: not before it. */
	h.sent_ns = nsdp_realtime_ns();
	ns_batch_hdr_encode(&h, b->body);
	if (conf->batch_key_len) {
		/* The trailer goes out after the body; the batch keeps only
		 * header and records, so a resend signs its new header. */
		if (ns_batch_mac((const uint8_t *)conf->batch_key,
				 conf->batch_key_len, b->body, b->body_len,
				 mac) != 0)
			return -EINVAL;
		mac_len = NS_BATCH_MAC_LEN;
	}
	if (segment && segment_write(w, c, b, h.seq, mac, mac_len) != 0) {
		nsa_seg_untrack(w, b);
		return -ENOMEM;
	}
	nsa_conn_cmd(&c->conn, 3);
	nsa_conn_arg_str(&c->conn,
			 w->topo.sharded_pubsub ? "SPUBLISH" : "PUBLISH");
	nsa_conn_arg(&c->conn, c->channel, c->channel_len);
	nsa_conn_arg2(&c->conn, b->body, b->body_len, mac, mac_len);
	if (expect(w, c, b, 0, NSA_EXP_NOTIFY) != 0)
		return -ENOMEM;
	b->closed = 1;
	c->open = NULL;
	c->inflight_batches++;
	return 0;
}

/* Write lost's records again as a new batch on its channel, after what
 * was published there before (closed first): its segment under the new
 * seq, its announcement flagged NS_BATCH_F_REWRITE, so that a standby
 * reads that segment back. 0 when sent, -EAGAIN to try again later,
 * -ENOENT when no connection serves the channel, -ESTALE when the writer
 * is fenced below the batch's epoch. */
static int lost_rewrite(struct nsa_writer *w, const struct nsa_batch *lost)
{
	struct nsa_link *c = NULL;
	struct nsa_batch *b;
	unsigned int i;

	for (i = 0; i < w->topo.n_nodes && i < w->n_conns; i++)
		if (w->conns[i]->channel_slot == lost->channel_slot)
			c = w->conns[i];
	if (lost->epoch < w->fence)
		return -ESTALE; /* a newer active took over: never written */
	if (c == NULL)
		return -ENOENT;
	if (c->conn.fd < 0)
		return -EAGAIN;
	if (c->open != NULL && nsa_batch_close(w, c) != 0)
		return -EAGAIN;
	if ((b = nsa_batch_get(w)) == NULL)
		return -EAGAIN;
	b->count = lost->count;
	b->lines = lost->lines;
	b->epoch = lost->epoch;
	memcpy(b->sess, lost->sess, lost->lines * sizeof(*b->sess));
	for (i = 0; i < lost->lines; i++) {
		b->rflags[i] = lost->rflags[i] & NSA_REC_LINE2;
		b->ticket[i] = 0;
	}
	memcpy(b->body, lost->body, lost->body_len);
	b->body_len = lost->body_len;
	b->rewrite = 1;
	c->open = b;
	if (nsa_batch_close(w, c) != 0) {
		c->open = NULL;
		nsa_batch_put(w, b);
		return -EAGAIN;
	}
	return 0;
}

/* The batches whose segment was refused: rewritten once their master took
 * a segment again; after NSA_LOST_HOLD_NS without, or with no connection
 * to their channel, their standbys are asked to read the master. */
static void lost_send(struct nsa_writer *w)
{
	unsigned int i, k = 0;

	for (i = 0; i < w->n_lost; i++) {
		struct nsa_batch *b = w->lost[i];
		int rc = b->taken ? lost_rewrite(w, b) : -EAGAIN;

		if (rc == -EAGAIN &&
		    w->now_ns - b->lost_ns < NSA_LOST_HOLD_NS) {
			w->lost[k++] = b;
			continue;
		}
		if (rc != 0 && rc != -ESTALE)
			w->log_resync[b->channel_slot / 64] |=
				1ull << (b->channel_slot % 64);
		nsa_batch_put(w, b);
	}
	w->n_lost = k;
}

/* Log layout: rewrite the batches whose segment the store refused for
 * good (lost_send); tell the standbys of every master whose refused
 * segment was not rewritten to read it again, one NS_BATCH_F_RESYNC batch
 * on its channel after what it published before (closed first). Not while
 * the writer resends: the rewrite and the request follow the resent
 * batches. */
void nsa_log_resync_send(struct nsa_writer *w)
{
	unsigned int i;

	if (w->retry_mode)
		return;
	lost_send(w);
	for (i = 0; i < w->topo.n_nodes && i < w->n_conns; i++) {
		struct nsa_link *c = w->conns[i];
		uint16_t slot = c->channel_slot;
		struct nsa_batch *b;

		if (!((w->log_resync[slot / 64] >> (slot % 64)) & 1) ||
		    c->conn.fd < 0)
			continue;
		if (c->open != NULL && nsa_batch_close(w, c) != 0)
			return;
		if ((b = nsa_batch_get(w)) == NULL)
			return;
		b->resync = 1;
		b->resync_slot = slot;
		b->epoch = w->epoch_seen;
		c->open = b;
		if (nsa_batch_close(w, c) != 0) {
			c->open = NULL;
			nsa_batch_put(w, b);
			return;
		}
		w->log_resync[slot / 64] &= ~(1ull << (slot % 64));
	}
}

/* Whether the writer is behind: one of its lanes holds a quarter of its
 * capacity or more (16 384 records of the default 65 536, some 40 ms of a
 * 400 000 /s stream: a stream flat out, or the backlog of a long stall). */
static int lanes_behind(const struct nsa_writer *w)
{
	unsigned int l;

	for (l = 0; l < w->n_lanes; l++) {
		const struct rte_ring *r = w->lanes[l]->ring;

		if (rte_ring_count(r) >= rte_ring_get_capacity(r) / 4)
			return 1;
	}
	return 0;
}

/* Whether b, at batch_size records or more, stays open: it grows up to
 * nsa_batch_cap() when, as it reached batch_size, the writer was behind
 * (lanes_behind). The records waiting would wait for a batch anyway, and
 * one larger batch costs the store, the standby and the writer less per
 * record than several (a segment and a notification each): a stream flat
 * out gets batches of up to NSA_BATCH_GROW times batch_size, one that
 * keeps up (or is behind by less) gets batch_size, its lag untouched. A
 * growing batch still closes when its oldest record has waited flush_us. */
static int batch_grows(const struct nsa_writer *w, struct nsa_batch *b)
{
	if (b->count == w->a->conf.batch_size)
		b->grows = lanes_behind(w);
	return b->grows && b->count < nsa_batch_cap(w);
}

/* Count s, just encoded (len bytes) at the end of c's open batch, into it,
 * and close the batch once it is full (batch_grows). */
int nsa_batch_push(struct nsa_writer *w, struct nsa_link *c,
		   const struct ns_session *s, uint8_t rflag, size_t len)
{
	struct nsa_batch *b = c->open;
	unsigned int at = b->lines;

	b->sess[at] = *s;
	b->rflags[at] = rflag;
	b->ticket[at] = nsa_settle_push(w);
	if (unlikely(ns_session_lines(s) == 2)) {
		memcpy(&b->sess[at + 1], ns_session_v6_of(s),
		       sizeof(struct ns_session_v6));
		b->rflags[at + 1] = NSA_REC_LINE2;
		b->ticket[at + 1] = 0;
		b->lines++;
	}
	b->body_len += len;
	b->count++;
	b->lines++;
	if (s->epoch > b->epoch)
		b->epoch = s->epoch;
	if (b->count >= w->a->conf.batch_size && !batch_grows(w, b))
		return nsa_batch_close(w, c);
	return 0;
}

/* Which master's batch a key belongs to, and which connection its command
 * goes to (another one, with ASKING, while its slot is being migrated). */
unsigned int nsa_writer_route(const struct nsa_writer *w, const uint8_t *key,
			      size_t key_len, unsigned int *cmd_conn,
			      int *asking)
{
	uint16_t slot;
	unsigned int node;

	*asking = 0;
	if (!w->topo.cluster) {
		*cmd_conn = 0;
		return 0;
	}
	slot = ns_key_slot(key, key_len);
	node = w->topo.slot_node[slot];
	*cmd_conn = route_slot(w, slot, node, asking);
	return node;
}

/* Whether s is below the store's epoch (nsa_fence.h): a newer active took
 * over, and s is neither written nor published; counted as fenced. A
 * read-back correction is fenced with its writer: it tells the standbys
 * what the store held before the newer active's writes. */
int nsa_record_fenced(struct nsa_writer *w, const struct ns_session *s,
		      uint8_t rflag)
{
	uint32_t epoch = rflag & NSA_REC_STORE ? w->epoch_seen : s->epoch;

	if (!(rflag & NSA_REC_STORE) && s->epoch > w->epoch_seen)
		w->epoch_seen = s->epoch;
	if (epoch >= w->fence)
		return 0;
	if (w->st.fenced == 0)
		NSA_ERR("writer %u: fenced: the store's epoch is %u, above "
			"this active's %u: another active was promoted. "
			"Records of older epochs are dropped (counted as "
			"fenced), never written or published",
			w->idx, w->fence, epoch);
	nsa_records_lost(w, &rflag, 1);
	W_STAT_ADD(w, fenced, 1);
	return 1;
}

/* Append one record that is no correction: its command to the pipeline,
 * its copy and wire form to its master's open batch. */
int nsa_pipe_append(struct nsa_writer *w, const struct ns_session *s,
		    uint8_t rflag)
{
	uint8_t key[NS_KEY_MAX];
	unsigned int node, cmd_idx;
	struct nsa_link *c, *cc;
	struct nsa_batch *b;
	int asking, len;
	uint32_t rec;
	size_t key_len = ns_key_of(s, key);

	node = nsa_writer_route(w, key, key_len, &cmd_idx, &asking);
	if (!(rflag & NSA_REC_ASKED)) {
		/* Not answered ASK: to the slot's master, migrating or not
		 * (NSA_REC_ASKED). */
		cmd_idx = node;
		asking = 0;
	}
	rflag &= (uint8_t)~NSA_REC_ASKED;
	c = w->conns[node];
	cc = w->conns[cmd_idx];
	if (c->open != NULL && c->open->store && nsa_batch_close(w, c) != 0)
		return -ENOMEM;
	if (c->open == NULL && (c->open = nsa_batch_get(w)) == NULL)
		return -ENOMEM;
	b = c->open;
	rec = b->lines;
	len = ns_record_encode(s, b->body + b->body_len, NS_RECORD_MAX_LEN);
	if (len < 0) {
		static const char why[] =
			"record-encode: unknown version, family or event";

		if (rflag & NSA_REC_REPLAY)
			W_STAT_SUB(w, replay_inflight, 1);
		else
			W_STAT_ADD(w, dropped, 1);
		log_error_once(w, why, sizeof(why) - 1);
		if (b->count == 0) {
			nsa_batch_put(w, b);
			c->open = NULL;
		}
		return 0;
	}
	/* Log layout: the batch is the store's write (segment_write). */
	if (w->a->conf.store.layout == NSA_LAYOUT_LOG)
		return nsa_batch_push(w, c, s, rflag, (size_t)len);
	if (asking) {
		nsa_conn_cmd(&cc->conn, 1);
		nsa_conn_arg_str(&cc->conn, "ASKING");
		if (expect(w, cc, b, rec, NSA_EXP_ASKING) != 0)
			return -ENOMEM;
	}
	if (s->event == NS_EV_DELETE) {
		nsa_conn_cmd(&cc->conn, 2);
		nsa_conn_arg_str(&cc->conn, "DEL");
		nsa_conn_arg(&cc->conn, key, key_len);
	} else {
		nsa_conn_cmd(&cc->conn, s->timeout_ms ? 5 : 3);
		nsa_conn_arg_str(&cc->conn, "SET");
		nsa_conn_arg(&cc->conn, key, key_len);
		nsa_conn_arg(&cc->conn, b->body + b->body_len, (size_t)len);
		if (s->timeout_ms) {
			nsa_conn_arg_str(&cc->conn, "PX");
			nsa_conn_arg_u32(&cc->conn, s->timeout_ms);
		}
	}
	if (expect(w, cc, b, rec, NSA_EXP_CMD) != 0)
		return -ENOMEM;
	if (s->event == NS_EV_DELETE)
		W_STAT_ADD(w, dels, 1);
	else
		W_STAT_ADD(w, sets, 1);
	return nsa_batch_push(w, c, s, rflag, (size_t)len);
}

/* ---- error replies ---------------------------------------------------- */

static int starts_with(const char *t, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len >= n && memcmp(t, word, n) == 0 && (len == n || t[n] == ' ');
}

/* "ASK <slot> <host>:<port>" */
static void learn_ask(struct nsa_writer *w, const char *t, size_t len)
{
	char buf[128], *sp;
	struct nsa_ask a;
	unsigned int i;

	if (len >= sizeof(buf))
		return;
	memcpy(buf, t, len);
	buf[len] = '\0';
	a.slot = (uint16_t)strtoul(buf + 4, &sp, 10);
	if (*sp != ' ' || nsa_addr_parse(sp + 1, &a.addr) != 0)
		return;
	for (i = 0; i < w->n_ask_pending; i++)
		if (w->ask_pending[i].slot == a.slot)
			return;
	if (w->n_ask_pending < NSA_MAX_ASK)
		w->ask_pending[w->n_ask_pending++] = a;
	else
		w->need_refresh = 1;
}

/* An error reply: which ones are worth a resend, and what else they mean. */
int nsa_writer_error_retry(struct nsa_writer *w, const char *t, size_t len)
{
	if (starts_with(t, len, "MOVED")) {
		W_STAT_ADD(w, moved, 1);
		w->need_refresh = 1;
	} else if (starts_with(t, len, "ASK")) {
		W_STAT_ADD(w, ask, 1);
		learn_ask(w, t, len);
	} else if (starts_with(t, len, "TRYAGAIN") ||
		   starts_with(t, len, "LOADING") ||
		   starts_with(t, len, "BUSY") ||
		   starts_with(t, len, "NOREPLICAS") ||
		   starts_with(t, len, "MASTERDOWN")) {
		/* Passing states of a server that will take the write
		 * again: wait and resend. */
		W_STAT_ADD(w, tryagain, 1);
		w->err_seen = 1;
	} else if (starts_with(t, len, "READONLY")) {
		/* A replica now, after a failover: find the master. */
		W_STAT_ADD(w, tryagain, 1);
		w->err_seen = 1;
		w->need_refresh = 1;
	} else if (starts_with(t, len, "CLUSTERDOWN")) {
		W_STAT_ADD(w, clusterdown, 1);
		w->err_seen = 1;
		w->need_refresh = 1;
	} else {
		W_STAT_ADD(w, other_errors, 1);
		log_error_once(w, t, len);
		return 0;
	}
	return 1;
}
