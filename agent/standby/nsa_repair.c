/*
 * nsa_repair.c - the standby's targeted repair in the log layout: a
 * sequence gap of one publisher on one channel (batches a..b did not
 * come) is mended by reading back exactly those batches' segments,
 * ns:l:{N}:<publisher>:<seq> for seq in a..b (schema/FORMAT.md, Log
 * layout), and applying them in order before the batch that showed the
 * gap, instead of resyncing the channel's master.
 *
 * Invariants:
 * - A segment is applied only when it decodes, carries a valid HMAC when
 *   [store] batch_key_file is set (so a version 2 header), and its header
 *   names the publisher, seq and channel its key does; a record of
 *   another gateway pair is passed over, as a resync does.
 * - A segment refused for good (it does not decode, is not signed with
 *   the batch key, or its header does not match its key) is counted
 *   (bad_values or unauthenticated, and refused_segments) and passed
 *   over, and the repair goes on: every reader of the log leaves it out
 *   the same way (nsa_logmerge.c), so a resync would give the table
 *   without its records too, at the cost of reading the whole master.
 *   Refusing it costs the standby that segment's sessions and nothing
 *   else.
 * - The repair gives up, and the caller resyncs as before, when the gap is
 *   longer than [standby] repair_max_segments, when a segment is not in
 *   the store (folded into a checkpoint and expired, expired, or never
 *   stored: a batch published only, or one the store refused), or on any
 *   error of the store (MOVED included). What it applied before giving up
 *   are records the store holds: the resync that follows reads them
 *   again.
 * - The segments are applied as live batches, with the table's epoch and
 *   timestamp rules, as they would have been in their turn: a record older
 *   than the table's entry is ignored. A session another publisher (or
 *   channel, after resharding) deleted meanwhile, whose tombstone the
 *   table purged since, is not protected: a late live batch has the same
 *   limit, and the table keeps tombstones while a resync runs.
 * - Every value read is counted (repair_values, repair_bytes), repairs
 *   that gave up included; a repair done counts in repairs, those with
 *   segments refused for good included.
 * - Blocking, on the subscriber thread, one connection per repair, each
 *   reply within the store's timeouts (the standby's quick ones): at most
 *   repair_max_segments values, REPAIR_CHUNK per MGET (their keys share
 *   the channel's hash tag, so one slot).
 *
 * A segment the store refused for good and the active wrote again under a
 * new seq (NS_BATCH_F_REWRITE) is read back the same way, alone, when its
 * announcement comes: the store holds it, or the master is resynced.
 *
 * Not here: finding the gap (nsa_order.c), the resync it falls back to
 * (nsa_resync.c), live batches (nsa_live.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_commit.h"
#include "nsa_log.h"
#include "nsa_repair.h"

/* Segments per MGET: at most 16 × 196 688 B (about 3 MiB) per reply. */
#define REPAIR_CHUNK 16

/* Check one segment read back for seq and apply its records. 0, or 1
 * when it is refused for good, with why (counted). */
static int segment_apply(struct nsa_standby *sb, unsigned int node,
			 const struct ns_batch_hdr *gap, uint64_t seq,
			 const uint8_t *buf, size_t len, const char **why)
{
	const uint16_t channel_slot = sb->topo.nodes[node].channel_slot;
	struct ns_batch_hdr h;
	struct ns_batch_iter it;
	struct ns_rec r;
	const struct ns_session *s = &r.s; /* any family: r's lines */
	const uint8_t *body;
	uint64_t seen = 0;

	if (ns_batch_decode(buf, len, &h, &body) < 0) {
		SB_STAT_ADD(sb, bad_values, 1);
		*why = "it does not decode";
		return 1;
	}
	if (sb->conf.batch_key_len &&
	    (h.version == NS_BATCH_V1 ||
	     ns_batch_verify(buf, len, (const uint8_t *)sb->conf.batch_key,
			     sb->conf.batch_key_len) != 0)) {
		SB_STAT_ADD(sb, unauthenticated, 1);
		*why = "it is not signed with the batch key";
		return 1;
	}
	if (h.publisher_id != gap->publisher_id || h.seq != seq ||
	    (h.version != NS_BATCH_V1 && h.channel_slot != channel_slot) ||
	    h.flags & (NS_BATCH_F_STORE | NS_BATCH_F_RESYNC)) {
		SB_STAT_ADD(sb, bad_values, 1);
		*why = "its header does not match its key";
		return 1;
	}
	NSDP_TABLE_ASSERT_WRITER(sb->table, NSDP_TABLE_SUBSCRIBER);
	ns_batch_iter_init(&it, body, h.body_len);
	if (sb->ct)
		seen = nsdp_table_applied(sb->table);
	while (ns_batch_iter_next_rec(&it, &r) == 1) {
		if (s->gateway_id >> 8 != sb->conf.store.pair)
			continue;
		nsdp_table_apply(sb->table, s);
		if (sb->ct)
			nsa_commit_take(sb->ct, sb->table, s, &seen);
	}
	if (sb->ct)
		nsa_commit_flush(sb->ct);
	return 0;
}

/* MGET the segments first .. first + n - 1 (n <= REPAIR_CHUNK) and apply
 * them in order. 0, or -1 with why. */
static int chunk_read(struct nsa_standby *sb, unsigned int node,
		      redisContext *c, const struct ns_batch_hdr *gap,
		      uint64_t first, unsigned int n, const char **why)
{
	const uint16_t channel_slot = sb->topo.nodes[node].channel_slot;
	char keys[REPAIR_CHUNK][NS_SEGMENT_KEY_MAX];
	const char *argv[1 + REPAIR_CHUNK];
	size_t argl[1 + REPAIR_CHUNK];
	redisReply *r;
	unsigned int i;
	int rc = 0;

	argv[0] = "MGET";
	argl[0] = 4;
	for (i = 0; i < n; i++) {
		int l = ns_segment_key(channel_slot, gap->publisher_id,
				       first + i, keys[i]);

		if (l < 0) {
			*why = "a segment key";
			return -1;
		}
		argv[1 + i] = keys[i];
		argl[1 + i] = (size_t)l;
	}
	r = redisCommandArgv(c, (int)(1 + n), argv, argl);
	if (r == NULL) {
		*why = c->errstr[0] ? c->errstr : "no reply";
		return -1;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != n) {
		*why = r->type == REDIS_REPLY_ERROR ? "the store refused MGET"
						    : "unexpected MGET reply";
		freeReplyObject(r);
		return -1;
	}
	for (i = 0; i < n && rc == 0; i++) {
		const redisReply *v = r->element[i];

		if (v->type != REDIS_REPLY_STRING) {
			*why = "a segment is no longer in the store";
			rc = -1;
			break;
		}
		SB_STAT_ADD(sb, repair_values, 1);
		SB_STAT_ADD(sb, repair_bytes, v->len);
		if (segment_apply(sb, node, gap, first + i,
				  (const uint8_t *)v->str, v->len, why) == 0)
			continue;
		SB_STAT_ADD(sb, refused_segments, 1);
		NSA_WARN("standby: segment %s refused for good: %s; its "
			 "records are left out, as every reader of the log "
			 "leaves them (no resync)",
			 keys[i], *why);
		*why = NULL;
	}
	freeReplyObject(r);
	return rc;
}

/* Read back and apply the segments from .. gap->seq - 1 of gap's
 * publisher on node's channel (what: why they are read, for the log). 0,
 * or -1 when the master must be resynced (logged). */
static int repair_read(struct nsa_standby *sb, unsigned int node,
		       const struct ns_batch_hdr *gap, uint64_t from,
		       const char *what)
{
	const struct sb_node *nd = &sb->nodes[node];
	uint64_t values = sb->st.repair_values, bytes = sb->st.repair_bytes;
	const char *why = NULL;
	char err[256] = "";
	redisContext *c;
	uint64_t seq;

	c = nsa_store_connect(&sb->store_quick, &nd->addr, err, sizeof(err));
	if (c == NULL)
		why = err;
	for (seq = from; c && seq < gap->seq; seq += REPAIR_CHUNK) {
		uint64_t n = gap->seq - seq;

		if (chunk_read(sb, node, c, gap, seq,
			       n > REPAIR_CHUNK ? REPAIR_CHUNK
						: (unsigned int)n,
			       &why) < 0)
			break;
	}
	values = sb->st.repair_values - values;
	bytes = sb->st.repair_bytes - bytes;
	if (why && why != err) {
		/* it may be c's own text */
		snprintf(err, sizeof(err), "%s", why);
		why = err;
	}
	if (c)
		redisFree(c);
	if (why) {
		NSA_WARN("standby: %s on %s from publisher %u (seq %" PRIu64
			 "..%" PRIu64 "): repair gave up after %" PRIu64
			 " segments (%" PRIu64 " B) read: %s",
			 what, nd->channel, gap->publisher_id, from,
			 gap->seq - 1, values, bytes, why);
		return -1;
	}
	SB_STAT_ADD(sb, repairs, 1);
	NSA_INFO("standby: %s on %s from publisher %u repaired: seq %" PRIu64
		 "..%" PRIu64 " read back, %" PRIu64 " segments (%" PRIu64
		 " B)",
		 what, nd->channel, gap->publisher_id, from, gap->seq - 1,
		 values, bytes);
	return 0;
}

int nsa_sb_repair(struct nsa_standby *sb, unsigned int node,
		  const struct ns_batch_hdr *gap, uint64_t from)
{
	const struct sb_node *nd = &sb->nodes[node];
	const uint64_t missed = gap->seq - from;

	if (sb->conf.store.layout != NSA_LAYOUT_LOG ||
	    sb->conf.repair_max_segments == 0 || from >= gap->seq)
		return -1;
	if (missed > sb->conf.repair_max_segments) {
		NSA_WARN("standby: gap on %s from publisher %u: %" PRIu64
			 " batches missed (seq %" PRIu64 "..%" PRIu64
			 "), more than [standby] repair_max_segments %u: "
			 "not repaired",
			 nd->channel, gap->publisher_id, missed, from,
			 gap->seq - 1, sb->conf.repair_max_segments);
		return -1;
	}
	return repair_read(sb, node, gap, from, "gap");
}

int nsa_sb_repair_rewrite(struct nsa_standby *sb, unsigned int node,
			  const struct ns_batch_hdr *h)
{
	struct ns_batch_hdr next = *h;

	if (sb->conf.store.layout != NSA_LAYOUT_LOG ||
	    sb->conf.repair_max_segments == 0)
		return -1;
	next.seq = h->seq + 1;
	return repair_read(sb, node, &next, h->seq, "rewritten segment");
}
