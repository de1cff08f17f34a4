/*
 * nsa_compact_round.h - one compaction round (nsa_compact.h): who
 * compacts, under which epoch and budget, what it may merge, and what it
 * did. Shared by the rounds (nsa_compact.c) and their parts (compact/).
 */
#ifndef NSA_COMPACT_ROUND_H
#define NSA_COMPACT_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "nsa_logmark.h"

struct nsa_compact_result {
	uint64_t segments; /* segments read (checkpoints included) */
	uint64_t records; /* records merged */
	uint64_t live; /* live records written back */
	uint64_t tombstones; /* deletes written back (schema/FORMAT.md) */
	uint64_t bytes_read; /* bytes of the segments read */
	uint64_t bytes_written; /* bytes of the checkpoints written */
	uint64_t gen; /* the round's number, its mark's gen */
	/* The most the round held at once: the merge of one pass, the keys
	 * listed, a reply and the checkpoint batches in flight. */
	uint64_t peak_bytes;
	uint64_t merge_peak_bytes; /* of which the largest pass's merge */
	unsigned int passes; /* merges, one per range of slots */
	uint64_t marks_refused; /* not a mark, or not signed with the key */
	/* Families whose channel slot moved or was migrating while the
	 * round listed: left as they were, for the next round. */
	unsigned int families_held;
	uint64_t expire_errors; /* PEXPIREs refused (a slot moving) */
};

/* What a listing of every master found: per family (a publisher's
 * segments on one channel) the highest seq listed. Every seq at or below
 * it was signed before the listing ended (a writer numbers its segments
 * as it signs them), whether it was listed or not. */
struct nsa_compact_sighting {
	struct nsa_logmark_cover *hi; /* by (tag, publisher) */
	size_t n, cap;
	uint64_t listed_ns; /* CLOCK_MONOTONIC: when the listing ended */
	int exact; /* no slot of a family moved or migrated meanwhile */
};

void nsa_compact_sighting_free(struct nsa_compact_sighting *s);

/* One round: who compacts, under which epoch, and what it may merge. */
struct nsa_compact_round {
	uint32_t id; /* the checkpoints' names: k:<id>:<gen>: */
	/* The least gen the round takes: above every mark's and every
	 * listed checkpoint's, and at least this (a caller's count of its
	 * attempts, so that a failed attempt's parts are never reused). */
	uint64_t gen;
	/* The compacting active's epoch: a round that finds the store's
	 * epoch (natsync:epoch) above it, or whose connections (named as
	 * writers) a newer active's fence closes, writes nothing more. */
	uint32_t epoch;
	const char *key; /* the batch key (HMAC), or NULL */
	size_t key_len;
	unsigned int grace_ms;
	/* A listing at least grace_ms old (CLOCK_MONOTONIC): the round
	 * merges, per family, the segments up to its highest seq, and gives
	 * up on the ones of those it does not find (never written, refused,
	 * or expired): a segment reaches the store within grace_ms of its
	 * signing. NULL: the round's own listing (a store no one writes
	 * while the round runs: tests, tools). */
	const struct nsa_compact_sighting *seen;
	/* Filled with the round's own listing (the next round's seen), when
	 * not NULL. */
	struct nsa_compact_sighting *listed;
	/* When not NULL, asked right before the listing: 1 when every
	 * segment of the caller's own writers signed before since_ns
	 * (CLOCK_MONOTONIC) has been answered by the store, so that it is
	 * listed or never will be. 0 ends the round (-EAGAIN). */
	int (*settled)(void *arg, uint64_t since_ns);
	void *settled_arg;
	/* > 0: the merge of a pass never holds more than this; the sessions
	 * are merged a range of slots at a time. */
	size_t budget_bytes;
	/* WAIT for a replica of a master that has some, this long at most,
	 * after its checkpoint and after its mark (0: 1000 ms). */
	unsigned int wait_ms;
};

#endif
