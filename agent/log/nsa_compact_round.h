/*
 * nsa_compact_round.h - one compaction round (nsa_compact.h): who
 * compacts, under which epoch and what it may merge, and what it did.
 * Shared by the rounds (nsa_compact.c) and their parts (compact/).
 */
#ifndef NSA_COMPACT_ROUND_H
#define NSA_COMPACT_ROUND_H

#include <stddef.h>
#include <stdint.h>

struct nsa_compact_result {
	uint64_t segments; /* segments read (checkpoints included) */
	uint64_t records; /* records merged */
	uint64_t live; /* live records written back */
	uint64_t bytes_read; /* bytes of the segments read */
	uint64_t bytes_written; /* bytes of the checkpoints written */
};

/* One round: who compacts, under which epoch, and what it may merge. */
struct nsa_compact_round {
	uint32_t id; /* the checkpoints' names: k:<id>:<gen>: */
	uint64_t gen;
	/* The compacting active's epoch: a round that finds the store's
	 * epoch (natsync:epoch) above it, or whose connections (named as
	 * writers) a newer active's fence closes, writes nothing more. */
	uint32_t epoch;
	const char *key; /* the batch key (HMAC), or NULL */
	size_t key_len;
	uint64_t until_ns; /* segments sent after it wait for a later round */
	unsigned int grace_ms;
};

#endif
