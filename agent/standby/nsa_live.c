/*
 * nsa_live.c - the standby's live batches: each one a subscription
 * delivers is checked, applied to the table, queued for conntrack and
 * timed for the lag histogram; a gap in its sequence is repaired by
 * reading the batches missed back (log layout, nsa_repair.c) or else
 * resyncs its master; a batch the store lost (NS_BATCH_F_RESYNC) resyncs
 * its master, one it lost and took again (NS_BATCH_F_REWRITE) is read
 * back (nsa_repair.c, the master resynced if that fails), and the first batch of a newer epoch of the pair (the older
 * active fenced, maybe between a batch's writes and its SPUBLISH)
 * resyncs every master.
 *
 * Invariants:
 * - A batch is applied only when it decodes, carries a valid HMAC when
 *   [store] batch_key_file is set (and so a version 2 header), names the
 *   channel it came by, comes from a gateway of the standby's own pair
 *   ([agent] gateway_id >> 8; other pairs' are passed over, counted), is
 *   not fenced by a newer epoch of that pair and
 *   is not stale in its sequence nor sent before its subscription began
 *   (less [standby] clock_slack_ms); otherwise it is counted and dropped.
 * - What a drain applied is written to conntrack at its end, together.
 * - On the subscriber thread only.
 *
 * Not here: the subscriptions and the loop (nsa_standby.c), resyncs
 * (nsa_resync.c), repairs (nsa_repair.c), where a batch stands in its
 * sequence (nsa_order.c).
 */
#include <inttypes.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "nsa_commit.h"
#include "nsa_fence.h"
#include "nsa_lag.h"
#include "nsa_live.h"
#include "nsa_log.h"
#include "nsa_order.h"
#include "nsa_repair.h"
#include "nsa_resync.h"
#include "nsa_standby_stats.h"
#include "nsa_sub.h"

static void lag_record(void *arg, const struct nsa_lag *lag)
{
	nsa_standby_lag_record(arg, lag);
}

/* A batch of an epoch below known, the newest its pair had on the
 * channel: either an older active still writes (fenced), or the store
 * lost the pair's counter (a restart without persistence) and a new
 * active took a lower epoch from it. Read the counter: when it is there
 * and below known the store lost it; then say so (log,
 * epoch_regressions), take the batch's epoch as the pair's on every
 * channel, and resync every master: the batches dropped meanwhile are in
 * the store. 1 then, 0 when the batch stays fenced (the counter is not
 * below known, is absent or could not be read: counted as fenced, as
 * before). Blocking, on the subscriber thread, bounded as its topology
 * reads are; once per older epoch and channel. */
static int epoch_lost(struct nsa_standby *sb, const struct ns_batch_hdr *h,
		      uint32_t known)
{
	const uint32_t pair = h->gateway_id >> 8;
	char key[NSA_PAIR_NAME_MAX], err[256];
	uint64_t counter;

	nsa_epoch_key(pair, key);
	if (nsa_fence_read(&sb->store_quick, &sb->topo, &counter, err,
			   sizeof(err)) < 0) {
		NSA_WARN("standby: gateway %u's batches of epoch %u are "
			 "below its pair's %u, and %s could not be read (%s): "
			 "dropped as fenced",
			 h->gateway_id, h->epoch, known, key, err);
		return 0;
	}
	/* Absent (0): no active took an epoch from this store, whose
	 * actives keep fixed epochs; the batch is of an older one. */
	if (counter == 0 || counter >= known)
		return 0;
	SB_STAT_ADD(sb, epoch_regressions, 1);
	NSA_WARN("standby: the store lost its epoch counter: %s reads "
		 "%" PRIu64 ", below epoch %u this standby saw of gateway "
		 "pair %u, and gateway %u writes with epoch %u. Taking %u "
		 "as the pair's epoch and resyncing every master (the "
		 "batches dropped meanwhile are in the store). Sessions of "
		 "older epochs still in the store are not rewritten; give "
		 "actives [agent] epoch_floor, as deploy/ does",
		 key, counter, known, pair, h->gateway_id, h->epoch, h->epoch);
	nsa_order_epoch_reset(&sb->order, pair, h->epoch);
	for (unsigned int n = 0; n < sb->n_nodes; n++)
		nsa_sb_resync_start(sb, n);
	return 1;
}

/* The first batch of a newer epoch of the pair (h->epoch, after known)
 * on a channel: its active raised the fence on every master before it
 * wrote, which closed the older actives' connections, maybe between a
 * batch's writes and its SPUBLISH. Such writes are in the store and were
 * never announced, on any master, including those on which the new active
 * publishes nothing: read every master again, once per epoch (the first
 * batches of that epoch on the other channels come after the fence as
 * well). Logged once per epoch. */
static void epoch_rose(struct nsa_standby *sb, const struct ns_batch_hdr *h,
		       uint32_t known)
{
	if (sb->epoch_rose_told == h->epoch)
		return;
	NSA_INFO("standby: gateway pair %u's epoch rose from %u to %u "
		 "(gateway %u): the older active is fenced, and what it "
		 "wrote without announcing it is in the store: resyncing "
		 "every master",
		 h->gateway_id >> 8, known, h->epoch, h->gateway_id);
	sb->epoch_rose_told = h->epoch;
	for (unsigned int n = 0; n < sb->n_nodes; n++) {
		SB_STAT_ADD(sb, epoch_resyncs, 1);
		nsa_sb_resync_after(sb, n);
	}
}

/* Whether the batch in buf is one to apply: it decodes (into h and body),
 * carries the HMAC the batch key asks for, names the channel it came by
 * and is neither fenced nor stale. 0 with its sequence verdict in *seq,
 * or -1 when dropped (counted). */
static int batch_admit(struct nsa_standby *sb, unsigned int node,
		       const uint8_t *buf, size_t len, struct ns_batch_hdr *h,
		       const uint8_t **body, enum nsa_seq_verdict *seq)
{
	const uint16_t channel_slot = sb->topo.nodes[node].channel_slot;
	const struct sb_node *nd = &sb->nodes[node];
	uint32_t known = 0;
	int rc;

	if (ns_batch_decode(buf, len, h, body) < 0) {
		SB_STAT_ADD(sb, bad_messages, 1);
		return -1;
	}
	/* With a batch key, only batches signed with it count: a writer
	 * without the key (or a forger on the channel) changes nothing. A
	 * version 1 batch signs neither its channel nor its time, so it
	 * could be replayed anywhere, at any time: not accepted either. And
	 * a batch signed for another channel is a copy. */
	if (sb->conf.batch_key_len &&
	    (h->version == NS_BATCH_V1 ||
	     ns_batch_verify(buf, len, (const uint8_t *)sb->conf.batch_key,
			     sb->conf.batch_key_len) != 0)) {
		SB_STAT_ADD(sb, unauthenticated, 1);
		return -1;
	}
	if (h->version != NS_BATCH_V1 && h->channel_slot != channel_slot) {
		SB_STAT_ADD(sb, unauthenticated, 1);
		return -1;
	}
	/* Another pair's: neither its sessions nor its sequences are ours. */
	if (h->gateway_id >> 8 != sb->conf.store.pair) {
		SB_STAT_ADD(sb, other_pair, 1);
		return -1;
	}
	rc = nsa_order_epoch(&sb->order, channel_slot, h, &known);
	if (rc == NSA_ORDER_FENCED_NEW && epoch_lost(sb, h, known))
		rc = nsa_order_epoch(&sb->order, channel_slot, h, &known);
	if (rc < 0) {
		if (rc == NSA_ORDER_FENCED_NEW)
			NSA_WARN("standby: gateway %u's batches of epoch %u "
				 "are dropped as fenced: its pair's epoch %u "
				 "came before, and the store's counter is not "
				 "below it (or absent): an older active still "
				 "writes. Counted in the fenced drops",
				 h->gateway_id, h->epoch, known);
		SB_STAT_ADD(sb, fenced, 1);
		return -1;
	}
	*seq = nsa_order_seq(&sb->order, channel_slot, h, nd->not_before_ns,
			     nd->loaded_once && !nd->resyncing);
	/* Even with a gap: its repair (nsa_repair.c) reads back only what
	 * this batch's publisher published. */
	if (rc == NSA_ORDER_ROSE)
		epoch_rose(sb, h, known);
	nsa_standby_epoch_seen(sb, h->epoch);
	if (*seq == NSA_SEQ_STALE) {
		SB_STAT_ADD(sb, stale, 1);
		return -1;
	}
	return 0;
}

/* Records decoded and their table buckets prefetched before the first of
 * them is applied, then the entries those buckets point at: the applies
 * overlap their cache misses (and, with the table in 4 KiB pages, their
 * TLB misses), which were most of the subscriber's time at 400 000
 * records/s. The entries' stage took the subscriber's CPU time for
 * 2 000 000 records at 1 000 000/s from 790-930 ms to 600-740 ms. */
#define LIVE_CHUNK 16

/* Apply every record of an admitted batch, queue what the table took for
 * conntrack, and time the records for the lag histogram. */
static void batch_apply(struct nsa_standby *sb, const struct ns_batch_hdr *h,
			const uint8_t *body)
{
	struct ns_batch_iter it;
	struct ns_rec r[LIVE_CHUNK];
	uint32_t hint[LIVE_CHUNK];
	uint64_t n = 0, seen = 0;
	unsigned int got, i;

	NSDP_TABLE_ASSERT_WRITER(sb->table, NSDP_TABLE_SUBSCRIBER);
	ns_batch_iter_init(&it, body, h->body_len);
	if (sb->ct)
		seen = nsdp_table_applied(sb->table);
	sb->lag.sent_ns = h->sent_ns;
	do {
		for (got = 0; got < LIVE_CHUNK &&
			      ns_batch_iter_next_rec(&it, &r[got]) == 1;
		     got++)
			hint[got] = nsdp_table_prefetch(sb->table, &r[got].s);
		for (i = 0; i < got; i++)
			nsdp_table_prefetch_entry(sb->table, &r[i].s, hint[i]);
		for (i = 0; i < got; i++) {
			const struct ns_session *s = &r[i].s; /* any family */
			/* A STORE batch corrects what a refused write told
			 * before. */
			int applied =
				h->flags & NS_BATCH_F_STORE
					? nsdp_table_apply_store(sb->table, s)
					: nsdp_table_apply(sb->table, s);

			if (applied == 0)
				n++;
			if (sb->ct)
				nsa_commit_take(sb->ct, sb->table, s, &seen);
			nsa_lag_batch_mark(&sb->lag, s->timestamp_ns);
		}
		nsa_lag_batch_stamp(&sb->lag);
	} while (got == LIVE_CHUNK);
	nsa_lag_batch_end(&sb->lag, lag_record, &sb->st);
	SB_STAT_ADD(sb, batches, 1);
	SB_STAT_ADD(sb, records, n);
}

/* The store lost a segment (log layout) whose batch this table applied
 * (NS_BATCH_F_RESYNC): read the master again. A resync under way began
 * before that batch was applied and keeps what it changed, so another
 * follows it. */
static void batch_resync_asked(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];

	if (!nd->resync_asked_logged)
		NSA_WARN("standby: %s:%u lost a batch it was sent "
			 "(refused for good): resyncing it (further "
			 "ones are not logged)",
			 nd->addr.host, nd->addr.port);
	nd->resync_asked_logged = 1;
	nsa_sb_resync_after(sb, node);
}

static void on_batch(struct nsa_standby *sb, unsigned int node,
		     const uint8_t *buf, size_t len)
{
	struct ns_batch_hdr h;
	const uint8_t *body;
	enum nsa_seq_verdict seq;

	if (batch_admit(sb, node, buf, len, &h, &body, &seq) < 0)
		return;
	/* Log layout: the batches missed read back first, in order. */
	if (seq == NSA_SEQ_GAP) {
		SB_STAT_ADD(sb, gaps, 1);
		if (nsa_sb_repair(sb, node, &h, sb->order.gap_from) == 0)
			seq = NSA_SEQ_NEXT;
	}
	/* A rewrite's records are those of a batch applied before: what
	 * counts is whether the store holds them again, read back. */
	if (!(h.flags & NS_BATCH_F_REWRITE))
		batch_apply(sb, &h, body);
	else if (seq != NSA_SEQ_GAP && nsa_sb_repair_rewrite(sb, node, &h) != 0)
		batch_resync_asked(sb, node);
	if (h.flags & NS_BATCH_F_RESYNC && seq != NSA_SEQ_GAP)
		batch_resync_asked(sb, node);
	if (seq == NSA_SEQ_GAP) {
		NSA_WARN("standby: gap on %s from publisher %u (seq %" PRIu64
			 "), resyncing %s:%u",
			 sb->nodes[node].channel, h.publisher_id, h.seq,
			 sb->nodes[node].addr.host, sb->nodes[node].addr.port);
		nsa_sb_resync_start(sb, node);
	}
}

void nsa_sb_live_drain(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];
	const uint8_t *msg;
	const char *why;
	size_t len;
	int rc;

	while (!sb->reset) {
		rc = nsa_sub_next(&nd->sub, &msg, &len, &why);
		if (rc == NSA_SUB_NONE)
			break;
		if (rc == NSA_SUB_RESET) {
			if (why)
				NSA_WARN("standby: %s:%u: %s", nd->addr.host,
					 nd->addr.port, why);
			sb->reset = 1;
			break;
		}
		on_batch(sb, node, msg, len);
	}
	/* Every batch the connection had is applied: commit them together. */
	if (sb->ct)
		nsa_commit_flush(sb->ct);
}
