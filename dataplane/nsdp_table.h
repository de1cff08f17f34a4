/*
 * nsdp_table.h - the session table of a gateway: filled by the standby
 * subscriber while the gateway is a standby, written by the NAT fast path
 * once it is promoted.
 *
 * A fixed array of compact entries (64 bytes) indexed by the inside
 * five-tuple and by the translated tuple as return traffic carries it,
 * lock-free for readers, written by one thread at a time: the standby
 * subscriber, or the gateway's forwarding lcore once it is active, each
 * holding the table (nsdp_table_take) while it writes. It costs
 * about 84 bytes per session of capacity. Each entry remembers the
 * generation at which it was last changed, so that a resync that reads the
 * store while live batches are applied never puts back an older record:
 * live batches always win over what a resync read, and deletes leave a
 * tombstone until no resync needs it.
 */
#ifndef NSDP_TABLE_H
#define NSDP_TABLE_H

#include <stdint.h>

#include "ns_record.h"

struct nsdp_table;

struct nsdp_table_stats {
	uint64_t live; /* sessions in the table, IPv6 ones included */
	uint64_t tombstones;
	uint64_t applied, stale_ignored, full_drops;
	uint64_t memory_bytes; /* memory the table holds, both families */
	uint64_t live_v6, capacity_v6; /* the IPv6 table's */
	uint64_t memory_bytes_v6;
};

struct nsdp_table *nsdp_table_create(const char *name, uint32_t capacity);
void nsdp_table_free(struct nsdp_table *t);

/*
 * IPv6 sessions (NAT66, NAT64) live in the table's IPv6 table, made with
 * room for capacity of them by nsdp_table_add_v6() (0, -EEXIST, -ENOMEM;
 * writer, before the first IPv6 session). Every entry point below takes a
 * session of any family (an IPv6 one's second line following it, a
 * struct ns_rec) unless it says otherwise; without an IPv6 table an IPv6
 * session is refused with -EAFNOSUPPORT and counted in full_drops. An
 * IPv6 position costs 148 bytes of capacity (two 64-byte lines and the
 * two indexes), an IPv4 one 84.
 */
int nsdp_table_add_v6(struct nsdp_table *t, uint32_t capacity);

/* The live IPv6 session of proto whose inside tuple is the given one (any
 * thread): 0 and *out filled, or -ENOENT. */
int nsdp_table_lookup_v6(const struct nsdp_table *t, uint8_t proto,
			 const uint8_t saddr[16], uint16_t sport,
			 const uint8_t daddr[16], uint16_t dport,
			 struct ns_rec *out);

/* The same, returning the session's position in the IPv6 table (below
 * nsdp_table_positions_v6()), or -ENOENT. */
int32_t nsdp_table_find_v6(const struct nsdp_table *t, uint8_t proto,
			   const uint8_t saddr[16], uint16_t sport,
			   const uint8_t daddr[16], uint16_t dport,
			   struct ns_rec *out);

/* The live NAT64 session of proto (its inside protocol: ICMPv6 for ICMP
 * echo) whose IPv4 reply tuple is reply, host order as
 * nsdp_table_find_reply() takes it (any thread): its position in the
 * IPv6 table and *out filled, or -ENOENT. */
int32_t nsdp_table_find_reply64(const struct nsdp_table *t, uint8_t proto,
				const struct ns_tuple *reply,
				struct ns_rec *out);

/* The live NAT66 session of proto whose reply tuple (from the remote
 * saddr, sport to the outside daddr, dport) is the given one (any
 * thread): its position in the IPv6 table and *out filled, or -ENOENT. */
int32_t nsdp_table_find_reply66(const struct nsdp_table *t, uint8_t proto,
				const uint8_t saddr[16], uint16_t sport,
				const uint8_t daddr[16], uint16_t dport,
				struct ns_rec *out);

/* Positions of the IPv6 table (its capacity; 0 without one), and the live
 * session at one of them (writer): 0, or -ENOENT. */
uint32_t nsdp_table_positions_v6(const struct nsdp_table *t);
int nsdp_table_at_v6(const struct nsdp_table *t, uint32_t pos,
		     struct ns_rec *out);

/* Writer only, IPv6 sessions: nsdp_table_apply_pos() and
 * nsdp_table_remove() by position for the IPv6 table (a fast path that
 * keeps per-session state by position). -EAFNOSUPPORT for an IPv4
 * session or without an IPv6 table; -ENOENT for a free position. */
int nsdp_table_apply_pos_v6(struct nsdp_table *t, const struct ns_session *s,
			    int32_t *pos);
int nsdp_table_remove_v6(struct nsdp_table *t, uint32_t pos);

/*
 * The writer. A table has one writer at a time and the hand-over is
 * explicit: a writer takes the table before its first write and gives it
 * back after its last (a gateway's subscriber while it runs, its fast path
 * from promotion until its lcore has confirmed it is a standby again).
 * Writers check that they hold it at their entry points with
 * NSDP_TABLE_ASSERT_WRITER (debug builds). A fresh table is nobody's.
 */
enum nsdp_table_writer {
	NSDP_TABLE_NOBODY = 0,
	NSDP_TABLE_SUBSCRIBER = 1, /* the standby subscriber */
	NSDP_TABLE_FASTPATH = 2, /* the NAT fast path (its lcore) */
};

/* Take the table for w: 0, or -EBUSY when another writer holds it (also
 * when w holds it already: a hand-over is never implicit). */
int nsdp_table_take(struct nsdp_table *t, enum nsdp_table_writer w);
/* Give the table back if w holds it: 0, or -EPERM (nothing changed). */
int nsdp_table_give_back(struct nsdp_table *t, enum nsdp_table_writer w);
/* Who holds the table now (any thread). */
enum nsdp_table_writer nsdp_table_writer(const struct nsdp_table *t);

#ifdef NDEBUG
#define NSDP_TABLE_ASSERT_WRITER(t, w) ((void)0)
#else
#include <assert.h>
#define NSDP_TABLE_ASSERT_WRITER(t, w) assert(nsdp_table_writer(t) == (w))
#endif

/* The current generation; a resync notes it before reading the store. */
uint64_t nsdp_table_generation(const struct nsdp_table *t);

/* Records that changed the table so far (nsdp_table_stats' applied): a
 * writer that compares it before and after an apply knows whether the
 * record was taken or ignored as older. */
uint64_t nsdp_table_applied(const struct nsdp_table *t);

/* Begin a resync: returns the current generation and counts the resync as
 * running, so that tombstones are kept until it finishes (resync_finish)
 * or is abandoned (resync_abort). */
uint64_t nsdp_table_resync_begin(struct nsdp_table *t);
void nsdp_table_resync_abort(struct nsdp_table *t);

/* Remove every tombstone when no resync is running (the writer thread).
 * Returns how many were removed. Its time grows with the table (about
 * 7 ms for 250 000 positions and 50 000 tombstones on a Xeon vCPU): a
 * thread with a latency to keep purges in slices instead. */
uint64_t nsdp_table_purge_tombstones(struct nsdp_table *t);

/* Remove the tombstones of the next 1/slices of the table's positions
 * (in both families), where the last slice ended, when no resync is
 * running (the writer thread): `slices` calls sweep every position once,
 * whatever the table's size. Returns how many were removed. */
uint64_t nsdp_table_purge_slice(struct nsdp_table *t, uint32_t slices);

/* Apply a live record (create, refresh, delete). Older records than the
 * entry's (by epoch, then timestamp) are ignored. 0, or -ENOSPC when the
 * table is full (counted). */
int nsdp_table_apply(struct nsdp_table *t, const struct ns_session *s);

/* Apply a record that states what the store holds (a batch flagged
 * NS_BATCH_F_STORE): over the entry whatever its epoch and timestamp,
 * since the publisher sent it after every record of the flow the store
 * took. 0, or -ENOSPC as apply. */
int nsdp_table_apply_store(struct nsdp_table *t, const struct ns_session *s);

/* Writer hint: bring in what applying s will touch (its buckets in both
 * indexes), so that a burst of applies overlaps its cache misses: call it
 * for record i + k while applying record i. Returns the hint that
 * nsdp_table_prefetch_entry takes for s. */
uint32_t nsdp_table_prefetch(const struct nsdp_table *t,
			     const struct ns_session *s);

/* Writer hint, the second stage: once s's buckets are in, bring in the
 * entries they point at for s; hint is what nsdp_table_prefetch returned
 * for s (its flow key's hash, not computed again). */
void nsdp_table_prefetch_entry(const struct nsdp_table *t,
			       const struct ns_session *s, uint32_t hint);

/* Apply a record read from the store by a resync that began at generation
 * gen: ignored when a live record changed the entry since gen. The entry is
 * marked as seen by resync mark. */
int nsdp_table_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			    uint64_t gen, uint32_t mark);

/* End of a resync begun at gen with the given mark over the slots where
 * in_scope[slot] != 0: removes entries of those slots unchanged since gen
 * and not seen by the resync. Returns how many were removed. */
uint64_t nsdp_table_resync_finish(struct nsdp_table *t, uint64_t gen,
				  uint32_t mark, const uint8_t *in_scope);

/* The same, handing each session it removes to removed (before it goes),
 * for a writer that keeps a copy elsewhere (the kernel commit). */
uint64_t nsdp_table_resync_finish_each(
	struct nsdp_table *t, uint64_t gen, uint32_t mark,
	const uint8_t *in_scope,
	void (*removed)(const struct ns_session *s, void *arg), void *arg);

/* Lookups for the fast path (any thread), IPv4 sessions. 0 and *out
 * filled, or -ENOENT. */
int nsdp_table_lookup(const struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig, struct ns_session *out);
int nsdp_table_lookup_reply(const struct nsdp_table *t, uint8_t proto,
			    const struct ns_tuple *reply,
			    struct ns_session *out);

/* Most keys nsdp_table_find_bulk() takes in one pass (it makes as many
 * passes as n needs). */
#define NSDP_TABLE_BULK 64u

/* nsdp_table_find() (by_reply 0) or nsdp_table_find_reply() (by_reply 1)
 * of the keys {proto[i], key[i]}, i < n, for a burst: pos[i] and out[i]
 * as each single find would give them. Hashes every key and prefetches
 * its bucket, then the entries the buckets point to, then reads, so that
 * the cache misses of the burst overlap (rte_hash_lookup_bulk's shape). */
void nsdp_table_find_bulk(const struct nsdp_table *t, int by_reply,
			  const uint8_t *proto, const struct ns_tuple *key,
			  unsigned int n, int32_t *pos, struct ns_session *out);

/*
 * Positions: every entry has a stable index below nsdp_table_positions()
 * for as long as it lives, so that a fast path can keep its own per-session
 * state (last packet time, TCP state) in a parallel array.
 */
uint32_t nsdp_table_positions(const struct nsdp_table *t);

/* Like lookup and lookup_reply, returning the entry's position (>= 0) or
 * -ENOENT. */
int32_t nsdp_table_find(const struct nsdp_table *t, uint8_t proto,
			const struct ns_tuple *orig, struct ns_session *out);
int32_t nsdp_table_find_reply(const struct nsdp_table *t, uint8_t proto,
			      const struct ns_tuple *reply,
			      struct ns_session *out);

/* Writer only: the live session at position pos into *out; 0, or -ENOENT
 * when the position holds no live session. */
int nsdp_table_at(const struct nsdp_table *t, uint32_t pos,
		  struct ns_session *out);

/* Writer only: like apply, and on success *pos is the entry's position
 * (IPv4 sessions only: an IPv6 one is -EAFNOSUPPORT). */
int nsdp_table_apply_pos(struct nsdp_table *t, const struct ns_session *s,
			 int32_t *pos);

/* Writer only: remove a flow's entry at once, without a tombstone (a
 * gateway that is active runs no resync). 0 or -ENOENT. */
int nsdp_table_remove(struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig);

/* Visit every live session, the IPv6 ones after the IPv4 ones (writer
 * thread, or with writes paused). */
uint64_t nsdp_table_walk(const struct nsdp_table *t,
			 void (*fn)(const struct ns_session *, void *),
			 void *arg);

/* Write every live session as wire records to path (a table file). */
int64_t nsdp_table_dump(const struct nsdp_table *t, const char *path);

void nsdp_table_stats(const struct nsdp_table *t, struct nsdp_table_stats *s);

#endif
