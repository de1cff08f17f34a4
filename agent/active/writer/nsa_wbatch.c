/*
 * nsa_wbatch.c - the bottom of a writer's stack: the pool its batches are
 * taken from, the log layout's list of segments in flight, and the end of
 * a batch once no reply is due for it (nsa_batch_finalize): acknowledged
 * and kept in the replay window, or held for the resend.
 *
 * Invariants:
 * - A batch is finalized once every reply it awaits came in (or was lost
 *   with its connection): acknowledged, or held for the resend when it or
 *   anything before it failed.
 * - A record refused for good is flagged dropped in its batch and counted
 *   when the batch is finalized, never retried.
 * - A batch back in the pool is on no list of segments in flight, and the
 *   writer's low mark (seg_low_ns) is the sent_ns of the oldest one listed
 *   (UINT64_MAX with none).
 * - The replay window is not trimmed in retry mode: it waits for the
 *   resend that may replay it.
 *
 * - An acknowledged record's burst hears of it (nsa_wsettle.c); a held
 *   one's does not: its tickets stay behind with the batch.
 *
 * Not here: what goes into a batch (nsa_wpipe.c), the replies that end it
 * (nsa_wreply.c), the resend of the held ones (nsa_wlink.c), the window
 * itself (nsa_replay.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "nsa_log.h"
#include "nsa_wbatch.h"
#include "nsa_wsettle.h"
#include "nsdp_time.h"

/* ---- batches ---------------------------------------------------------- */

unsigned int nsa_batch_cap(const struct nsa_writer *w)
{
	unsigned int bs = w->a->conf.batch_size;

	return bs > NS_BATCH_MAX_RECORDS / NSA_BATCH_GROW ? NS_BATCH_MAX_RECORDS
							  : bs * NSA_BATCH_GROW;
}

struct nsa_batch *nsa_batch_get(struct nsa_writer *w)
{
	unsigned int bs = nsa_batch_cap(w);
	struct nsa_batch *b = w->free_batches;

	if (b != NULL) {
		w->free_batches = b->next_free;
	} else {
		b = calloc(1, sizeof(*b));
		if (b == NULL)
			return NULL;
		/* Lines: an IPv6 record takes two; untouched by IPv4. */
		b->sess = malloc(2 * (size_t)bs * sizeof(*b->sess));
		b->rflags = malloc(2 * (size_t)bs);
		b->ticket = malloc(2 * (size_t)bs * sizeof(*b->ticket));
		b->body = malloc(NS_BATCH_HDR_LEN +
				 (size_t)bs * NS_RECORD_MAX_LEN);
		if (!b->sess || !b->rflags || !b->ticket || !b->body) {
			free(b->sess);
			free(b->rflags);
			free(b->ticket);
			free(b->body);
			free(b);
			return NULL;
		}
	}
	b->next_free = NULL;
	b->count = 0;
	b->grows = 0;
	b->lines = 0;
	b->epoch = w->a->conf.epoch;
	b->pending = 0;
	b->closed = 0;
	b->retry = 0;
	b->store = 0;
	b->resync = 0;
	b->lost = 0;
	b->taken = 0;
	b->rewrite = 0;
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
		free(b->ticket);
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

/* ---- the log layout's segments in flight ------------------------------ */

static void seg_publish_low(struct nsa_writer *w)
{
	__atomic_store_n(&w->seg_low_ns,
			 w->seg_head ? w->seg_head->seg_sent_ns : UINT64_MAX,
			 __ATOMIC_SEQ_CST);
}

/* Before b's segment is signed: on the list, stamped with the monotonic
 * clock (the compactor compares it with its own listings',
 * nsa_compactor.c), and with an empty list the low mark set to that
 * stamp. */
void nsa_seg_track(struct nsa_writer *w, struct nsa_batch *b)
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
	for (i = 0; i < b->lines; i++) {
		if (b->rflags[i] &
		    (NSA_REC_DROPPED | NSA_REC_STORE | NSA_REC_LINE2))
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
		if (flags && (flags[i] & NSA_REC_LINE2))
			continue;
		else if (flags && (flags[i] & NSA_REC_REPLAY))
			W_STAT_SUB(w, replay_inflight, 1);
		else if (flags && (flags[i] & NSA_REC_STORE))
			W_STAT_SUB(w, corrections_due, 1);
		else
			lost++;
	W_STAT_ADD(w, dropped, lost);
	return lost;
}

static void log_resync_ask(struct nsa_writer *w, uint16_t slot)
{
	w->log_resync[slot / 64] |= 1ull << (slot % 64);
}

/* Log layout: b's segment was refused for good; keep b for its rewrite
 * (nsa_log_resync_send), or, with no room, ask its standbys to read the
 * master again. */
static void lost_keep(struct nsa_writer *w, struct nsa_batch *b)
{
	if (w->n_lost == NSA_MAX_LOST) {
		log_resync_ask(w, b->channel_slot);
		nsa_batch_put(w, b);
		return;
	}
	b->lost_ns = w->now_ns;
	b->taken = 0;
	w->lost[w->n_lost++] = b;
}

void nsa_log_lost_taken(struct nsa_writer *w, uint16_t slot)
{
	unsigned int i;

	for (i = 0; i < w->n_lost; i++)
		if (w->lost[i]->channel_slot == slot)
			w->lost[i]->taken = 1;
}

/* A rewrite is never held for the resend nor rewritten again: a standby
 * that does not find its segment resyncs by itself; one that may not
 * have had its announcement is asked to. */
static void rewrite_finalize(struct nsa_writer *w, struct nsa_batch *b)
{
	if (b->retry || w->retry_mode) {
		log_resync_ask(w, b->channel_slot);
		if (b->retry)
			w->retry_mode = 1;
	} else if (!(b->rflags[0] & NSA_REC_DROPPED)) {
		W_STAT_ADD(w, log_rewrites, 1);
		W_STAT_ADD(w, log_rewrite_bytes,
			   b->body_len + (w->a->conf.batch_key_len
						  ? NS_BATCH_MAC_LEN
						  : 0));
	}
	nsa_batch_put(w, b);
}

void nsa_batch_finalize(struct nsa_writer *w, struct nsa_batch *b)
{
	unsigned int i, dropped = 0, replays = 0, stores = 0;

	if (b->rewrite) {
		rewrite_finalize(w, b);
		return;
	}
	if (b->resync) {
		/* Not held for the resend (it has no records): asked for
		 * again, and sent once the writer is out of retry mode. */
		if (b->retry || w->retry_mode)
			log_resync_ask(w, b->resync_slot);
		if (b->retry)
			w->retry_mode = 1;
		nsa_batch_put(w, b);
		return;
	}
	if (b->retry || w->retry_mode) {
		/* The resend leaves out the records refused for good: no
		 * rewrite of them, so the standbys read the master. */
		if (b->lost)
			log_resync_ask(w, b->channel_slot);
		w->retry_mode = 1;
		if (nsa_batch_hold(w, b) == 0)
			return;
		NSA_ERR("writer %u: out of memory holding a batch for resend; "
			"%u records dropped",
			w->idx, nsa_records_lost(w, b->rflags, b->lines));
		nsa_batch_put(w, b);
		return;
	}
	for (i = 0; i < b->lines; i++) {
		if (b->rflags[i] & NSA_REC_LINE2)
			continue;
		nsa_settle_ack(w, b->ticket[i]);
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
	if (b->lost)
		lost_keep(w, b);
	else
		nsa_batch_put(w, b);
	nsa_settle_advance(w);
}
