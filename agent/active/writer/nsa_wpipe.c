/*
 * nsa_wpipe.c - a writer's pipeline: records become commands in their
 * master's open batch, a batch closes with its notification, and replies
 * are charged to the batch (and record) they answer.
 *
 * Every command queues an expectation naming its batch and record on its
 * connection, so that replies, which come in order per connection, are
 * charged right even when a record's SET went to another node (ASK) than
 * its batch's notification.
 *
 * Invariants:
 * - A batch is finalized once every reply it awaits came in (or was lost
 *   with its connection): acknowledged, or held for the resend when it or
 *   anything before it failed.
 * - A record refused for good is flagged dropped in its batch and counted
 *   when the batch is finalized, never retried. Its notification went out
 *   before the refusal came back, so its key is read back (GET) and what
 *   the store holds - the value, or a delete when the key is absent - is
 *   published in a STORE batch, which standbys apply over what they hold.
 *   A record of the same flow sent after the GET makes that correction
 *   needless (it tells the standbys itself, or is read back in turn), so
 *   a correction never overtakes a newer record.
 *
 * Not here: connections, redirections and the resend (nsa_wlink.c), the
 * loop (nsa_active.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nsa_log.h"
#include "nsa_writer.h"
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
		 * Log layout): the standbys read the master again. */
		NSA_ERR("writer %u: store refused a command: %.*s (records "
			"counted as dropped, lost from the store; the "
			"standbys are told to read the master again; further "
			"'%s' errors are counted, not logged)",
			w->idx, (int)(len > 200 ? 200 : len), text, kind);
	else
		NSA_ERR("writer %u: store refused a command: %.*s (records "
			"counted as dropped, their keys read back for the "
			"standbys; further '%s' errors are counted, not "
			"logged)",
			w->idx, (int)(len > 200 ? 200 : len), text, kind);
}

/* ---- batches ---------------------------------------------------------- */

struct nsa_batch *nsa_batch_get(struct nsa_writer *w)
{
	unsigned int bs = w->a->conf.batch_size;
	struct nsa_batch *b = w->free_batches;

	if (b != NULL) {
		w->free_batches = b->next_free;
	} else {
		b = calloc(1, sizeof(*b));
		if (b == NULL)
			return NULL;
		b->sess = malloc(bs * sizeof(*b->sess));
		b->rflags = malloc(bs);
		b->body = malloc(NS_BATCH_HDR_LEN +
				 (size_t)bs * NS_RECORD_MAX_LEN);
		if (!b->sess || !b->rflags || !b->body) {
			free(b->sess);
			free(b->rflags);
			free(b->body);
			free(b);
			return NULL;
		}
	}
	b->next_free = NULL;
	b->count = 0;
	b->epoch = w->a->conf.epoch;
	b->pending = 0;
	b->closed = 0;
	b->retry = 0;
	b->store = 0;
	b->resync = 0;
	b->body_len = NS_BATCH_HDR_LEN;
	b->wseq = w->wseq++;
	b->open_ns = w->now_ns;
	return b;
}

void nsa_batch_put(struct nsa_writer *w, struct nsa_batch *b)
{
	/* Never left on the list of segments in flight when reused. */
	nsa_seg_untrack(w, b);
	b->next_free = w->free_batches;
	w->free_batches = b;
}

void nsa_batch_free_all(struct nsa_writer *w)
{
	struct nsa_batch *b;

	while ((b = w->free_batches) != NULL) {
		w->free_batches = b->next_free;
		free(b->sess);
		free(b->rflags);
		free(b->body);
		free(b);
	}
}

int nsa_batch_hold(struct nsa_writer *w, struct nsa_batch *b)
{
	if (w->n_held == w->cap_held) {
		size_t cap = w->cap_held ? 2 * w->cap_held : 64;
		struct nsa_batch **h = realloc(w->held, cap * sizeof(*h));

		if (h == NULL)
			return -ENOMEM;
		w->held = h;
		w->cap_held = cap;
	}
	w->held[w->n_held++] = b;
	return 0;
}

/* ---- the replay window ------------------------------------------------ */

/* Acknowledgements older than this may leave the window: replay_ms before
 * the last moment every master was known to answer (a master whose replies
 * are overdue since wait_since_ns may be dying). */
static uint64_t replay_cutoff(const struct nsa_writer *w)
{
	uint64_t alive = w->now_ns, ns = w->a->replay_ns;
	unsigned int i;

	for (i = 0; i < w->n_conns; i++) {
		const struct nsa_link *c = w->conns[i];

		if (c->conn.fd >= 0 && c->conn.exp_count > 0 &&
		    c->wait_since_ns < alive)
			alive = c->wait_since_ns;
	}
	return alive > ns ? alive - ns : 0;
}

/* Never in retry mode: the window waits for the resend that may replay it. */
void nsa_writer_replay_trim(struct nsa_writer *w)
{
	if (w->replay.count == 0 || w->retry_mode)
		return;
	nsa_replay_trim(&w->replay, replay_cutoff(w));
}

static void replay_keep(struct nsa_writer *w, const struct nsa_batch *b)
{
	uint64_t cutoff;
	unsigned int i;

	if (w->replay.cap == 0)
		return;
	nsa_writer_replay_trim(w);
	cutoff = replay_cutoff(w);
	for (i = 0; i < b->count; i++) {
		if (b->rflags[i] & (NSA_REC_DROPPED | NSA_REC_STORE))
			continue;
		if (!nsa_replay_keep(&w->replay, &b->sess[i], b->wseq,
				     w->now_ns, cutoff))
			continue;
		if (w->st.replay_short == 0)
			NSA_WARN("writer %u: the replay window is full: "
				 "records leave it before %u ms (raise "
				 "[active] replay_records)",
				 w->idx, w->a->conf.replay_ms);
		W_STAT_ADD(w, replay_short, 1);
	}
}

unsigned int nsa_records_lost(struct nsa_writer *w, const uint8_t *flags,
			      unsigned int n)
{
	unsigned int i, lost = 0;

	for (i = 0; i < n; i++)
		if (flags && (flags[i] & NSA_REC_REPLAY))
			W_STAT_SUB(w, replay_inflight, 1);
		else if (flags && (flags[i] & NSA_REC_STORE))
			W_STAT_SUB(w, corrections_due, 1);
		else
			lost++;
	W_STAT_ADD(w, dropped, lost);
	return lost;
}

void nsa_batch_finalize(struct nsa_writer *w, struct nsa_batch *b)
{
	unsigned int i, dropped = 0, replays = 0, stores = 0;

	if (b->resync) {
		/* Not held for the resend (it has no records): asked for
		 * again, and sent once the writer is out of retry mode. */
		if (b->retry || w->retry_mode)
			w->log_resync[b->resync_slot / 64] |=
				1ull << (b->resync_slot % 64);
		if (b->retry)
			w->retry_mode = 1;
		nsa_batch_put(w, b);
		return;
	}
	if (b->retry || w->retry_mode) {
		w->retry_mode = 1;
		if (nsa_batch_hold(w, b) == 0)
			return;
		NSA_ERR("writer %u: out of memory holding a batch for resend; "
			"%u records dropped",
			w->idx, nsa_records_lost(w, b->rflags, b->count));
		nsa_batch_put(w, b);
		return;
	}
	for (i = 0; i < b->count; i++) {
		if (b->rflags[i] & NSA_REC_REPLAY)
			replays++;
		else if (b->rflags[i] & NSA_REC_STORE)
			stores++;
		else if (b->rflags[i] & NSA_REC_DROPPED)
			dropped++;
	}
	W_STAT_ADD(w, dropped, dropped);
	W_STAT_ADD(w, acked, b->count - dropped - replays - stores);
	W_STAT_SUB(w, replay_inflight, replays);
	W_STAT_ADD(w, store_corrections, stores);
	W_STAT_SUB(w, corrections_due, stores);
	W_STAT_ADD(w, batches, 1);
	w->err_backoff_ms = NSA_ERR_BACKOFF_MIN_MS;
	replay_keep(w, b);
	nsa_batch_put(w, b);
}

/* ---- commands --------------------------------------------------------- */

/* End a command whose reply answers record rec of batch b. */
static int expect(struct nsa_writer *w, struct nsa_link *c, struct nsa_batch *b,
		  uint32_t rec, uint32_t kind)
{
	const struct nsa_exp e = {.ptr = b, .kind = kind, .a = rec};

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
	for (i = 0; i < b->count; i++) {
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

/* ---- the log layout's segments in flight ------------------------------ */

static void seg_publish_low(struct nsa_writer *w)
{
	__atomic_store_n(&w->seg_low_ns,
			 w->seg_head ? w->seg_head->seg_sent_ns : UINT64_MAX,
			 __ATOMIC_SEQ_CST);
}

/* Before b's segment is signed: on the list, stamped with the monotonic
 * clock (the compactor compares it with its own listings', nsa_active.c),
 * and with an empty list the low mark set to that stamp. */
static void seg_track(struct nsa_writer *w, struct nsa_batch *b)
{
	if (b->seg_listed)
		nsa_seg_untrack(w, b);
	b->seg_sent_ns = nsdp_mono_ns();
	if (w->seg_head == NULL)
		__atomic_store_n(&w->seg_low_ns, b->seg_sent_ns,
				 __ATOMIC_SEQ_CST);
	b->seg_prev = w->seg_tail;
	b->seg_next = NULL;
	if (w->seg_tail)
		w->seg_tail->seg_next = b;
	else
		w->seg_head = b;
	w->seg_tail = b;
	b->seg_listed = 1;
}

void nsa_seg_untrack(struct nsa_writer *w, struct nsa_batch *b)
{
	if (!b->seg_listed)
		return;
	if (b->seg_prev)
		b->seg_prev->seg_next = b->seg_next;
	else
		w->seg_head = b->seg_next;
	if (b->seg_next)
		b->seg_next->seg_prev = b->seg_prev;
	else
		w->seg_tail = b->seg_prev;
	b->seg_prev = b->seg_next = NULL;
	b->seg_listed = 0;
	seg_publish_low(w);
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
				   (b->resync ? NS_BATCH_F_RESYNC : 0)),
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

	if (segment)
		seg_track(w, b);
	/* After seg_track's low mark: not before it. */
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

/* Log layout: tell the standbys of every master that refused a segment
 * for good to read it again, one NS_BATCH_F_RESYNC batch on its channel
 * after what it published before (closed first). Not while the writer
 * resends: the request follows the resent batches. */
void nsa_log_resync_send(struct nsa_writer *w)
{
	unsigned int i;

	if (w->retry_mode)
		return;
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

/* Count s, just encoded (len bytes) at the end of c's open batch, into it,
 * and close the batch once it is full. */
int nsa_batch_push(struct nsa_writer *w, struct nsa_link *c,
		   const struct ns_session *s, uint8_t rflag, size_t len)
{
	struct nsa_batch *b = c->open;

	b->sess[b->count] = *s;
	b->rflags[b->count] = rflag;
	b->body_len += len;
	b->count++;
	if (s->epoch > b->epoch)
		b->epoch = s->epoch;
	if (b->count >= w->a->conf.batch_size)
		return nsa_batch_close(w, c);
	return 0;
}

/* Which master's batch a key belongs to, and which connection its command
 * goes to (another one, with ASKING, while its slot is being migrated). */
unsigned int nsa_writer_route(const struct nsa_writer *w, const uint8_t *key,
			      unsigned int *cmd_conn, int *asking)
{
	uint16_t slot;
	unsigned int node, i;

	*asking = 0;
	if (!w->topo.cluster) {
		*cmd_conn = 0;
		return 0;
	}
	slot = ns_key_slot(key, NS_KEY_LEN);
	node = w->topo.slot_node[slot];
	*cmd_conn = node;
	for (i = 0; i < w->n_ask; i++) {
		if (w->ask[i].slot == slot) {
			*cmd_conn = w->ask[i].conn;
			*asking = 1;
			break;
		}
	}
	return node;
}

/* Whether s is below the store's epoch (nsa_fence.h): a newer active took
 * over, and s is neither written nor published; counted as fenced. A
 * read-back correction is fenced with its writer: it tells the standbys
 * what the store held before the newer active's writes. */
static int fenced(struct nsa_writer *w, const struct ns_session *s,
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

/* Append one record: its command to the pipeline, its copy and wire form to
 * its master's open batch. rflag: NSA_REC_REPLAY, NSA_REC_STORE (no
 * command) or 0. */
int nsa_append_record(struct nsa_writer *w, const struct ns_session *s,
		      uint8_t rflag)
{
	uint8_t key[NS_KEY_LEN];
	unsigned int node, cmd_idx;
	struct nsa_link *c, *cc;
	struct nsa_batch *b;
	int asking, len;
	uint32_t rec;

	if (fenced(w, s, rflag))
		return 0;
	if (rflag & NSA_REC_STORE)
		return nsa_readback_append(w, s);
	ns_key_build(s->proto, &s->orig, key);
	node = nsa_writer_route(w, key, &cmd_idx, &asking);
	c = w->conns[node];
	cc = w->conns[cmd_idx];
	if (w->rb_sent > 0)
		nsa_readback_supersede(w, s, key);
	if (c->open != NULL && c->open->store && nsa_batch_close(w, c) != 0)
		return -ENOMEM;
	if (c->open == NULL && (c->open = nsa_batch_get(w)) == NULL)
		return -ENOMEM;
	b = c->open;
	rec = b->count;
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
		nsa_conn_arg(&cc->conn, key, NS_KEY_LEN);
	} else {
		nsa_conn_cmd(&cc->conn, s->timeout_ms ? 5 : 3);
		nsa_conn_arg_str(&cc->conn, "SET");
		nsa_conn_arg(&cc->conn, key, NS_KEY_LEN);
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

/* ---- replies ---------------------------------------------------------- */

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

static void handle_reply(struct nsa_writer *w, struct nsa_link *c,
			 const struct nsa_exp *e, char type, const char *t,
			 size_t len)
{
	struct nsa_batch *b = e->ptr;

	if (type == '-' && e->kind != NSA_EXP_ASKING) {
		if (nsa_writer_error_retry(w, t, len)) {
			b->retry = 1;
			w->retry_mode = 1;
		} else if (e->kind == NSA_EXP_CMD) {
			b->rflags[e->a] |= NSA_REC_DROPPED;
			nsa_readback_queue(w, &b->sess[e->a]);
		} else if (e->kind == NSA_EXP_SEGMENT) {
			/* The log cannot be read back by key: the records
			 * are lost from the store (schema/FORMAT.md), and the
			 * standbys that got them read the master again. */
			unsigned int i;

			for (i = 0; i < b->count; i++)
				b->rflags[i] |= NSA_REC_DROPPED;
			w->log_resync[c->channel_slot / 64] |=
				1ull << (c->channel_slot % 64);
		}
	}
	if (e->kind == NSA_EXP_NOTIFY)
		c->inflight_batches--;
	if (e->kind == NSA_EXP_SEGMENT)
		nsa_seg_untrack(w, b);
	if (--b->pending == 0 && b->closed)
		nsa_batch_finalize(w, b);
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
