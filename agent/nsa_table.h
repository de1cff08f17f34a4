/*
 * nsa_table.h - the standby's session table.
 *
 * An rte_hash keyed by the inside five-tuple (and a second one keyed by the
 * translated tuple as return traffic carries it), lock-free for readers,
 * written by one thread: the standby subscriber. Each entry remembers the
 * generation at which it was last changed, so that a resync that reads the
 * store while live batches are applied never puts back an older record:
 * live batches always win over what a resync read, and deletes leave a
 * tombstone until no resync needs it.
 */
#ifndef NSA_TABLE_H
#define NSA_TABLE_H

#include <stdint.h>

#include "ns_record.h"

struct nsa_table;

struct nsa_table_stats {
	uint64_t live; /* sessions in the table */
	uint64_t tombstones;
	uint64_t applied, stale_ignored, full_drops;
	uint64_t memory_bytes; /* memory the table holds */
};

struct nsa_table *nsa_table_create(const char *name, uint32_t capacity);
void nsa_table_free(struct nsa_table *t);

/* The current generation; a resync notes it before reading the store. */
uint64_t nsa_table_generation(const struct nsa_table *t);

/* Begin a resync: returns the current generation and counts the resync as
 * running, so that tombstones are kept until it finishes (resync_finish)
 * or is abandoned (resync_abort). */
uint64_t nsa_table_resync_begin(struct nsa_table *t);
void nsa_table_resync_abort(struct nsa_table *t);

/* Remove every tombstone when no resync is running (call periodically from
 * the writer thread). Returns how many were removed. */
uint64_t nsa_table_purge_tombstones(struct nsa_table *t);

/* Apply a live record (create, refresh, delete). Older records than the
 * entry's (by epoch, then timestamp) are ignored. 0, or -ENOSPC when the
 * table is full (counted). */
int nsa_table_apply(struct nsa_table *t, const struct ns_session *s);

/* Apply a record read from the store by a resync that began at generation
 * gen: ignored when a live record changed the entry since gen. The entry is
 * marked as seen by resync mark. */
int nsa_table_apply_resync(struct nsa_table *t, const struct ns_session *s,
			   uint64_t gen, uint32_t mark);

/* End of a resync begun at gen with the given mark over the slots where
 * in_scope[slot] != 0: removes entries of those slots unchanged since gen
 * and not seen by the resync. Returns how many were removed. */
uint64_t nsa_table_resync_finish(struct nsa_table *t, uint64_t gen,
				 uint32_t mark, const uint8_t *in_scope);

/* Lookups for the fast path (any thread). 0 and *out filled, or -ENOENT. */
int nsa_table_lookup(const struct nsa_table *t, uint8_t proto,
		     const struct ns_tuple *orig, struct ns_session *out);
int nsa_table_lookup_reply(const struct nsa_table *t, uint8_t proto,
			   const struct ns_tuple *reply,
			   struct ns_session *out);

/* Visit every live session (writer thread, or with writes paused). */
uint64_t nsa_table_walk(const struct nsa_table *t,
			void (*fn)(const struct ns_session *, void *),
			void *arg);

/* Write every live session as wire records to path (a table file). */
int64_t nsa_table_dump(const struct nsa_table *t, const char *path);

void nsa_table_stats(const struct nsa_table *t, struct nsa_table_stats *s);

#endif
