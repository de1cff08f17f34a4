/*
 * nsa_loader_log.c - the loader's reader of the log layout ([store]
 * layout = log, schema/FORMAT.md, Log layout): the keys read are the
 * segments and checkpoints (ns:l:*), each value a batch; they are merged
 * (nsa_logmerge.h) and the live records go to the sink once the load is
 * done, so the sink sees the table the keys layout would hold.
 *
 * On a cluster a segment stays in the slot of the channel it was
 * published on, so the records of a slot that moved since lie on its
 * former master: after its own master the reader has every other master's
 * segments listed (one after the other on the same connection) and keeps
 * the records of its master's slots. A load of one master thus reads
 * every segment of the store; loads of each master in turn would read
 * each segment once per master. A cold load reads every master's
 * sessions in one load instead (nsa_loader_every_master): each master's
 * keys listed once, by slot and probed as the first master's are, every
 * covered slot's records kept, each segment read once.
 *
 * Invariants:
 * - Only what compaction's mark leaves in is merged (its checkpoint, the
 *   segments sent after it: nsa_logmark_takes).
 * - The mark is read before the first keys, before each other master's,
 *   and after the last value; a load that saw it change gives the sink
 *   nothing and says NSA_LOADER_RACED, unless it took less than the
 *   marks' grace (what a newer round replaced expires that long after its
 *   mark, which the first read missed).
 * - Segments not signed with the sink's batch key (when it has one) are
 *   refused and counted, never merged.
 *
 * Not here: listing the keys and asking their values (nsa_loader_list.c,
 * nsa_loader_ask.c); the merge itself (nsa_logmerge.c).
 */
#include <errno.h>
#include <stdio.h>

#include "nsa_loader_list.h"
#include "nsa_loader_log.h"
#include "nsdp_time.h"

/* Segments and checkpoints per MGET, and per SCAN (see mget_keys and
 * scan_count below). */
#define NSA_LOG_MGET_KEYS 32
#define NSA_LOG_SCAN_COUNT "64"
#define NSA_LOG_MGET_WINDOW 4

/* A segment or checkpoint; a mark is read on its own (send_mark). */
static int log_key_wanted(const redisReply *k)
{
	return nsa_loader_key_of_log(k) &&
	       nsa_logkey_kind(k->str, k->len) != NSA_LOGKEY_MARK;
}

/* Ask for compaction's mark on the connection's master (MGET, as the
 * standby's ACL allows); its reply comes before those of the key listings
 * queued after it. */
static int send_mark(struct nsa_loader *ld)
{
	const struct nsa_exp e = {.kind = NSA_LD_READER};
	char key[NS_SEGMENT_KEY_MAX];

	nsa_logmark_key(ld->topo->nodes[ld->conn_node].channel_slot, key,
			sizeof(key));
	nsa_conn_cmd(ld->conn, 2);
	nsa_conn_arg_str(ld->conn, "MGET");
	nsa_conn_arg_str(ld->conn, key);
	return nsa_conn_cmd_end(ld->conn, &e);
}

static void log_on_mark(struct nsa_loader *ld, const redisReply *r)
{
	struct nsa_loader_logstate *lg = &ld->log;
	static __thread struct nsa_logmark mk;

	memset(&mk, 0, sizeof(mk));
	/* A mark not signed with the batch key is refused and counted, and
	 * read as none. */
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    nsa_logmark_parse_signed(r->element[0]->str, r->element[0]->len,
				     ld->sink.batch_key, ld->sink.batch_key_len,
				     &mk) != 0) {
		if (ld->sink.unauthenticated)
			ld->sink.unauthenticated(ld->sink.arg, 1);
		else
			ld->sink.bad(ld->sink.arg, 1);
	}
	if (lg->marks_read++ == 0)
		lg->mark = mk;
	else if (!nsa_logmark_same(&mk, &lg->mark))
		lg->mark_changed = 1;
	if (mk.set && mk.grace_ms < lg->mark_grace_ms)
		lg->mark_grace_ms = mk.grace_ms;
}

/* Merge the segments of values v (nil: expired since listed) under keys k:
 * those the mark leaves in (a checkpoint of the marked round, a segment
 * sent after it covers). 0, or -ENOMEM. */
static int log_values(struct nsa_loader *ld, const redisReply *const *k,
		      redisReply *const *v, size_t n)
{
	uint64_t bad = 0, unauth = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		int rc;

		if (v[i]->type != REDIS_REPLY_STRING ||
		    !nsa_logmark_takes(&ld->log.mark, k[i]->str, k[i]->len,
				       (const uint8_t *)v[i]->str, v[i]->len))
			continue;
		rc = nsa_logmerge_segment(
			&ld->log.merge, (const uint8_t *)v[i]->str, v[i]->len);
		if (rc == -ENOMEM)
			return rc;
		unauth += rc == -EACCES;
		bad += rc < 0 && rc != -EACCES;
	}
	if (unauth && ld->sink.unauthenticated)
		ld->sink.unauthenticated(ld->sink.arg, unauth);
	else
		bad += unauth;
	if (bad)
		ld->sink.bad(ld->sink.arg, bad);
	return 0;
}

/* Before the first listing: an empty merge of the master's slots, and
 * the mark asked for first. */
static int log_begin(struct nsa_loader *ld)
{
	struct nsa_loader_logstate *lg = &ld->log;
	uint32_t slot;

	lg->next_other = 0;
	memset(&lg->mark, 0, sizeof(lg->mark));
	lg->marks_read = 0;
	lg->mark_changed = 0;
	lg->mark_grace_ms = UINT32_MAX;
	lg->mark_asked_ns = nsdp_mono_ns();
	lg->mark_final = 0;
	nsa_logmerge_free(&lg->merge);
	if (nsa_logmerge_init(&lg->merge) != 0 || send_mark(ld) < 0)
		return -ENOMEM;
	nsa_logmerge_expect(&lg->merge, ld->sink.expect);
	if (ld->topo->cluster) {
		uint32_t kept = 0;

		memset(lg->keep_slots, 0, sizeof(lg->keep_slots));
		for (slot = 0; slot < NS_SLOTS; slot++)
			if (nsa_loader_keeps_slot(ld, slot)) {
				lg->keep_slots[slot / 64] |= 1ull
							     << (slot % 64);
				kept++;
			}
		/* A load of every master of a covered cluster keeps every
		 * record: no record's slot to hash. */
		lg->merge.keep_slots = kept < NS_SLOTS ? lg->keep_slots : NULL;
	}
	lg->merge.batch_key = ld->sink.batch_key;
	lg->merge.batch_key_len = ld->sink.batch_key_len;
	return 0;
}

/* On a cluster, the connection's master read whole: go on with the next
 * other master. 1 when its mark and key listing are queued, 0 when every
 * master is read, NSA_LOADER_FAILED. Another master is listed by SCAN,
 * unless the load reads its sessions too: then as the first master is
 * (by slot and probed, or SCAN and probed). */
static int next_master(struct nsa_loader *ld)
{
	const struct nsa_topology *t = ld->topo;
	struct nsa_loader_logstate *lg = &ld->log;
	char err[128] = "";
	unsigned int i;

	if (!t->cluster)
		return 0;
	while (lg->next_other < t->n_nodes && lg->next_other == ld->node)
		lg->next_other++;
	if (lg->next_other >= t->n_nodes)
		return 0;
	i = lg->next_other++;
	nsa_conn_free(ld->conn); /* nothing is due on it */
	ld->conn = nsa_conn_new(&t->nodes[i].addr);
	if (ld->conn == NULL) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	if (nsa_conn_open(ld->conn, ld->conf, err, sizeof(err)) < 0) {
		snprintf(ld->why, sizeof(ld->why), "%s:%u: %s",
			 t->nodes[i].addr.host, t->nodes[i].addr.port, err);
		nsa_conn_free(ld->conn);
		ld->conn = NULL;
		return NSA_LOADER_FAILED;
	}
	ld->conn_node = i;
	ld->keys_done = 0;
	ld->next_slot = 0;
	ld->slots_inflight = 0;
	ld->last_rx_ns = nsdp_mono_ns();
	if (send_mark(ld) < 0 ||
	    (ld->every_master && ld->by_slot
		     ? nsa_loader_send_slots(ld)
		     : nsa_loader_send_scan(ld, "0")) < 0) {
		snprintf(ld->why, sizeof(ld->why), "out of memory");
		return NSA_LOADER_FAILED;
	}
	return 1;
}

static unsigned int emit_apply(void *arg, const struct ns_session *s,
			       unsigned int n)
{
	struct nsa_loader *ld = arg;

	return ld->sink.apply(ld->sink.arg, ld->node, s, n);
}

/* Every key listed on the connection is read: the next master, or the
 * mark once more, or the live records to the sink (DONE), or RACED. */
static int log_finish(struct nsa_loader *ld)
{
	struct nsa_loader_logstate *lg = &ld->log;
	int rc = next_master(ld);

	if (rc != 0)
		return rc > 0 ? NSA_LOADER_MORE : rc;
	if (!lg->mark_final) {
		/* Every segment read: the mark once more. A round that
		 * replaced it meanwhile may have expired part of what was
		 * read (its checkpoint, the segments after it). */
		lg->mark_final = 1;
		if (send_mark(ld) < 0) {
			snprintf(ld->why, sizeof(ld->why), "out of memory");
			return NSA_LOADER_FAILED;
		}
		return NSA_LOADER_MORE;
	}
	/* Every value was read by now; a round whose mark the first read
	 * missed expires nothing it replaced sooner than its grace after
	 * that read. */
	if (lg->mark_changed &&
	    nsdp_mono_ns() - lg->mark_asked_ns >=
		    (uint64_t)lg->mark_grace_ms * 1000000u) {
		snprintf(ld->why, sizeof(ld->why),
			 "the log was compacted during the load");
		nsa_logmerge_free(&lg->merge);
		return NSA_LOADER_RACED;
	}
	ld->loaded += nsa_logmerge_emit(&lg->merge, nsdp_realtime_ns(),
					emit_apply, ld);
	nsa_logmerge_free(&lg->merge);
	return NSA_LOADER_DONE;
}

static void log_close(struct nsa_loader *ld)
{
	nsa_logmerge_free(&ld->log.merge);
}

const struct nsa_loader_layout nsa_loader_log = {
	.scan_match = NS_SEGMENT_PREFIX "*",
	/* A segment of 256 records is about 12 KB, a checkpoint up to 196
	 * KB: a SCAN's thousand of them in one MGET made one reply of 12 MB
	 * or more, which the store built while the reader waited and the
	 * reader merged while the store waited (a cold load of 1 000 000
	 * sessions read them in 0.37-0.60 s, 0.29-0.40 s by 32). */
	.mget_keys = NSA_LOG_MGET_KEYS,
	/* The next SCAN goes out with the MGETs of the one before, so its
	 * reply comes after their values: a SCAN of a thousand keys had 12
	 * MB of values built before the reader got the first, and the next
	 * thousand's MGETs asked for while it read them (the first values
	 * came 90-120 ms into a cold load of 1 000 000 sessions, 8-15 ms by
	 * 128). By 64 the store builds about 0.8 MB ahead of the reader (9
	 * loads by 64 took 0.36-0.49 s, 9 by 128 0.38-0.54 s, taking
	 * turns). */
	.scan_count = NSA_LOG_SCAN_COUNT,
	/* A cluster master's channel slots hold most of its segments: their
	 * GETKEYSINSLOT replies listed a thousand segments or more, and the
	 * first values of each master came 0.2 s after its listing began. */
	.mget_window = NSA_LOG_MGET_WINDOW,
	.key_wanted = log_key_wanted,
	.begin = log_begin,
	.values = log_values,
	.on_reply = log_on_mark,
	.finish = log_finish,
	.close = log_close,
};
