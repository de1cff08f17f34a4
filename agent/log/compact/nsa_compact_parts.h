/*
 * nsa_compact_parts.h - what compaction's files share (nsa_compact.c and
 * agent/log/compact/; no other room includes it): the keys a round listed
 * on a master and what it does with each, and the checkpoint it writes
 * there.
 *
 * A round (nsa_compact.c) lists every master and decides what it merges
 * (nsa_compact_plan.c), reads and merges it (nsa_compact_segments.c), then
 * writes its checkpoint, its mark and the expiries of what it replaced
 * (nsa_compact_checkpoint.c).
 */
#ifndef NSA_COMPACT_PARTS_H
#define NSA_COMPACT_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "nsa_cluster.h"
#include "nsa_compact_round.h"
#include "nsa_logmerge.h"

/* What a round does with a listed key. */
enum nsa_compact_plan {
	NSA_PLAN_NONE, /* left as it is (a younger segment, a mark) */
	NSA_PLAN_MERGE, /* a segment merged, covered by the round's mark */
	NSA_PLAN_MERGE_CP, /* a part of the marked round's checkpoint */
	NSA_PLAN_EXPIRE, /* a segment an earlier mark covers */
	NSA_PLAN_EXPIRE_CP, /* a checkpoint no mark will name again */
};

/* The keys under "ns:l:" listed on one master. */
struct nsa_compact_keys {
	char **k; /* NUL-terminated copies */
	size_t *len;
	uint8_t *plan; /* enum nsa_compact_plan, per key */
	size_t n, cap;
	size_t bytes; /* what the listing holds */
};

/* Whether listed key i is a checkpoint ("ns:l:{N}:k:..."). */
static inline int nsa_compact_is_checkpoint(const struct nsa_compact_keys *l,
					    size_t i)
{
	return nsa_logkey_kind(l->k[i], l->len[i]) == NSA_LOGKEY_CHECKPOINT;
}

/* Whether listed key i is merged by the round. */
static inline int nsa_compact_merged(const struct nsa_compact_keys *l, size_t i)
{
	return l->plan[i] == NSA_PLAN_MERGE || l->plan[i] == NSA_PLAN_MERGE_CP;
}

/* The checkpoint being written on one master, batch by batch. */
struct nsa_checkpoint {
	redisContext *c;
	uint16_t slot; /* the slot its parts go to, one the master serves */
	uint32_t id;
	uint64_t gen, now_ns;
	const char *key; /* the batch key (HMAC), or NULL */
	size_t key_len;
	uint8_t *buf; /* the batch being filled */
	size_t len;
	unsigned int count; /* records in buf */
	unsigned int pending; /* SETs whose replies are due */
	unsigned int index; /* batches written: the next one's name */
	uint64_t expire_ns; /* the latest expiry among the records */
	int forever; /* a record of timeout 0 */
	int failed;
	struct nsa_compact_result *res;
	char *err;
	size_t errlen;
};

#endif
