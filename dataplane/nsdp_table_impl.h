/*
 * nsdp_table_impl.h - the layout of the session table and the inline
 * helpers its writer (nsdp_table.c) and its readers (nsdp_table_read.c)
 * share. Private to dataplane/nsdp_table*.c; see nsdp_table.c for the
 * invariants.
 */
#ifndef NSDP_TABLE_IMPL_H
#define NSDP_TABLE_IMPL_H

#include <stdint.h>
#include <string.h>

#include <rte_common.h>
#include <rte_hash_crc.h>
#include <rte_pause.h>
#if defined(RTE_ARCH_X86)
#include <rte_vect.h>
#endif

#include "ns_record.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"

#define IDX_WAYS 8
/* Index slots per position of capacity, in eighths: 10/8 = 80 % load when
 * the table is full. */
#define IDX_SLOTS_PER_8_POS 10
#define IDX_HASH_SEED 0x9e3779b9u
/* Marks the end of the free list. */
#define POS_NONE UINT32_MAX

enum entry_state { ENTRY_FREE = 0, ENTRY_LIVE = 1, ENTRY_TOMB = 2 };

#define FLAG_EVENT_MASK 0x03u
#define FLAG_STATE_SHIFT 2
#define FLAG_STATE_MASK 0x0cu
/* IPv6 table: the session is NAT64 (else NAT66). */
#define FLAG_NAT64 0x10u

/* What readers copy: a session minus the bytes that are the same for
 * every v1 IPv4 record, plus the entry's state and cluster slot. In the
 * IPv6 table (nsdp_table6.c) the same, the IPv6 addresses folded to 32
 * bits (the index keys; the addresses are in the position's struct
 * ns_session_v6). */
struct packed {
	uint64_t timestamp_ns;
	uint32_t gateway_id;
	uint32_t epoch;
	uint32_t timeout_ms;
	struct ns_tuple orig;
	struct ns_tuple xlat;
	uint8_t proto;
	uint8_t flags; /* event | state << FLAG_STATE_SHIFT */
	uint16_t slot; /* set when the entry is created */
};

#define PACKED_WORDS (sizeof(struct packed) / sizeof(uint64_t))

union packed_words {
	struct packed p;
	uint64_t w[PACKED_WORDS];
};

struct entry {
	uint32_t seq; /* odd while the writer changes the entry */
	/* writer only: the last resync that saw the entry; for a free entry,
	 * the next position of the free list */
	uint32_t mark;
	uint64_t gen; /* writer only */
	union packed_words u;
};

_Static_assert(sizeof(struct packed) == 48, "packed session is 48 bytes");
_Static_assert(sizeof(struct entry) == 64, "an entry is one cache line");

/* Ways whose 16-bit signatures share one 64-bit word. */
#define IDX_SIGS_PER_WORD 4

struct idx_bucket {
	/* Way w's signature is bits 16 * (w % 4) of sigs[w / 4]. Each word
	 * is read and written whole with atomics, so that readers match all
	 * eight ways with two loads and no data race (see sig_match). */
	uint64_t sigs[IDX_WAYS / IDX_SIGS_PER_WORD];
	uint32_t ref[IDX_WAYS]; /* position + 1; 0 = empty way */
	uint32_t passed;
	uint32_t pad[3];
};

_Static_assert(sizeof(struct idx_bucket) == 64, "a bucket is one line");

struct nsdp_table {
	struct entry *entries;
	struct idx_bucket *flows;
	struct idx_bucket *replies;
	uint32_t n_buckets; /* of each index */
	uint32_t capacity;
	uint32_t used_end; /* positions at or above were never used */
	uint32_t free_head, free_tail, free_n;
	uint64_t gen;
	uint32_t active_resyncs;
	uint32_t purge_at; /* where the next purge slice begins */
	uint32_t writer; /* enum nsdp_table_writer, atomic */
	/* read by other threads with relaxed atomics */
	uint64_t live, tombstones, applied, stale_ignored, full_drops;
	uint64_t memory_bytes;
	/* The IPv4 table: its IPv6 table (nsdp_table6.c), or NULL. */
	struct nsdp_table *v6;
	/* An IPv6 table: the second line of each position's session,
	 * published under the entry's seq with its packed session. */
	struct ns_session_v6 *ext;
};

#define EXT_WORDS (sizeof(struct ns_session_v6) / sizeof(uint64_t))

union ext_words {
	struct ns_session_v6 x;
	uint64_t w[EXT_WORDS];
};

/* ---- keys and hashing --------------------------------------------- */

static inline uint32_t key_hash(uint8_t proto, const struct ns_tuple *t)
{
	uint64_t a = (uint64_t)t->saddr << 32 | t->daddr;
	uint64_t b =
		(uint64_t)t->sport << 32 | (uint64_t)t->dport << 16 | proto;

	return rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, IDX_HASH_SEED));
}

static inline uint32_t home_bucket(const struct nsdp_table *t, uint32_t h)
{
	return (uint32_t)(((uint64_t)h * t->n_buckets) >> 32);
}

static inline uint32_t next_bucket(const struct nsdp_table *t, uint32_t b)
{
	return b + 1 == t->n_buckets ? 0 : b + 1;
}

/* The reply tuple of a translated direction: from the remote to the
 * outside address. */
static inline struct ns_tuple reply_tuple(const struct ns_tuple *xlat)
{
	struct ns_tuple r = {.saddr = xlat->daddr,
			     .daddr = xlat->saddr,
			     .sport = xlat->dport,
			     .dport = xlat->sport};
	return r;
}

static inline int reply_matches(const struct packed *p,
				const struct ns_tuple *reply)
{
	return p->xlat.daddr == reply->saddr && p->xlat.saddr == reply->daddr &&
	       p->xlat.dport == reply->sport && p->xlat.sport == reply->dport;
}

/* Ways of bk whose signature is sig, one bit per way. The writer stores a
 * whole signature word with a relaxed atomic store (sig_store), so each
 * word read here is one it wrote: a word read stale only costs a miss on
 * a key being inserted, or a way whose ref and key are then checked. Two
 * relaxed 64-bit loads are plain moves on x86, and this is the code a
 * ThreadSanitizer build checks too. */
static inline uint32_t sig_match(const struct idx_bucket *bk, uint16_t sig)
{
	uint64_t lo = __atomic_load_n(&bk->sigs[0], __ATOMIC_RELAXED);
	uint64_t hi = __atomic_load_n(&bk->sigs[1], __ATOMIC_RELAXED);
#if defined(RTE_ARCH_X86)
	__m128i v = _mm_set_epi64x((long long)hi, (long long)lo);
	__m128i eq = _mm_cmpeq_epi16(v, _mm_set1_epi16((short)sig));

	return (uint32_t)_mm_movemask_epi8(
		_mm_packs_epi16(eq, _mm_setzero_si128()));
#else
	uint32_t m = 0, w;

	for (w = 0; w < IDX_WAYS; w++)
		m |= (uint32_t)((uint16_t)((w < IDX_SIGS_PER_WORD ? lo : hi) >>
					   16 * (w % IDX_SIGS_PER_WORD)) == sig)
		     << w;
	return m;
#endif
}

/* Set way w's signature; the writer only. */
static inline void sig_store(struct idx_bucket *bk, uint32_t w, uint16_t sig)
{
	uint64_t *word = &bk->sigs[w / IDX_SIGS_PER_WORD];
	unsigned int shift = 16 * (w % IDX_SIGS_PER_WORD);

	__atomic_store_n(
		word, (*word & ~(0xffffull << shift)) | (uint64_t)sig << shift,
		__ATOMIC_RELAXED);
}

/* ---- entries ------------------------------------------------------ */

static inline uint8_t packed_state(const struct packed *p)
{
	return (uint8_t)((p->flags & FLAG_STATE_MASK) >> FLAG_STATE_SHIFT);
}

/* The session a packed entry holds; what packing dropped is the same for
 * every v1 IPv4 record. */
static inline void packed_unpack(const struct packed *p, struct ns_session *s)
{
	*s = (struct ns_session){
		.version = NS_RECORD_VERSION,
		.family = NS_FAMILY_IPV4,
		.proto = p->proto,
		.event = p->flags & FLAG_EVENT_MASK,
		.gateway_id = p->gateway_id,
		.epoch = p->epoch,
		.timeout_ms = p->timeout_ms,
		.timestamp_ns = p->timestamp_ns,
		.orig = p->orig,
		.xlat = p->xlat,
	};
}

/* Reader side of the seqlock: a consistent copy of e's packed session,
 * and of its second line ext into xdst when ext is not NULL (the IPv6
 * table). */
static inline void entry_read_ext(const struct entry *e,
				  union packed_words *dst,
				  const struct ns_session_v6 *ext,
				  union ext_words *xdst)
{
	const uint64_t *xw = (const uint64_t *)(const void *)ext;
	uint32_t s1, s2;
	size_t i;

	for (;;) {
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1) {
			rte_pause();
			continue;
		}
		for (i = 0; i < PACKED_WORDS; i++)
			dst->w[i] =
				__atomic_load_n(&e->u.w[i], __ATOMIC_RELAXED);
		for (i = 0; ext && i < EXT_WORDS; i++)
			xdst->w[i] = __atomic_load_n(&xw[i], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return;
	}
}

static inline void entry_read(const struct entry *e, union packed_words *dst)
{
	entry_read_ext(e, dst, NULL, NULL);
}

/* nsdp_table.c, for the IPv6 table: apply s (its addresses folded) with
 * its second line x, as nsdp_table_apply* do without one. */
int nsdp_table_apply_x(struct nsdp_table *t, const struct ns_session *s,
		       const struct ns_session_v6 *x, int32_t *posp, int over);
int nsdp_table_resync_x(struct nsdp_table *t, const struct ns_session *s,
			const struct ns_session_v6 *x, uint64_t gen,
			uint32_t mark);
void nsdp_table_entry_remove(struct nsdp_table *t, uint32_t pos);

/* nsdp_table6.c, for the IPv4 table's entry points. */
int nsdp_table6_apply(struct nsdp_table *t, const struct ns_session *s,
		      int over);
int nsdp_table6_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			     uint64_t gen, uint32_t mark);
uint64_t nsdp_table6_purge_slice(struct nsdp_table *t, uint32_t slices);
void nsdp_table6_free(struct nsdp_table *t);
uint64_t nsdp_table6_resync_finish(
	struct nsdp_table *t, uint64_t gen, uint32_t mark,
	const uint8_t *in_scope,
	void (*removed_fn)(const struct ns_session *s, void *arg), void *arg);
uint64_t nsdp_table6_walk(const struct nsdp_table *t,
			  void (*fn)(const struct ns_session *, void *),
			  void *arg);

#endif
