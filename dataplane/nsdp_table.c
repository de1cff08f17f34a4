/*
 * nsdp_table.c - the gateway's session table (see nsdp_table.h).
 *
 * A fixed array of 64-byte entries, one per position, and two open
 * addressing indexes that map a key to a position: the flow index keyed by
 * {proto, orig tuple}, the reply index keyed by {proto, reply tuple} (the
 * translated tuple as return traffic carries it). An index is an array of
 * 64-byte buckets of 8 ways, each way a 16-bit signature and a position
 * (+ 1, so that zeroed memory is an empty index); a key lives in its home
 * bucket or, when that was full at insertion, in one of the buckets after
 * it. The keys themselves are not stored twice: a way's key is the key of
 * the entry it points to. The table costs about 84 bytes per session of
 * capacity (64 for the entry, 2 x 10 for the indexes at 80 % load when
 * full). One thread writes (the standby subscriber, or the forwarding lcore
 * once promoted); any number of fast-path threads read without locks.
 *
 * Invariants
 * - Each entry's session is published through a sequence counter (a
 *   hand-rolled seqlock; DPDK 22.11's rte_seqlock is experimental and
 *   carries a spinlock a single writer does not need): the writer makes the
 *   counter odd, stores the packed session (which holds the state) with
 *   relaxed atomics, and makes it even again with release order. Readers
 *   copy, then re-check the counter, so they never return a torn entry.
 * - Readers check that the entry they copied is live and carries the key
 *   they looked up: an index way may point to a position that was freed and
 *   reused for another flow while the reader held it.
 * - Keys never move inside an index. A bucket's `passed` counts the keys
 *   stored beyond it whose probe passed it; a lookup stops after the first
 *   bucket whose count is 0. The writer raises the counts before it stores
 *   the way (release), and lowers them after it clears the way, so a key
 *   present for the whole of a lookup is always found.
 * - A position is in the flow index exactly while its entry is live or a
 *   tombstone, and in the reply index exactly while it is live (under the
 *   reply key of its current xlat: the writer unlinks before it changes
 *   xlat). Two live entries may share a reply key (a delete that has not
 *   arrived yet); reply lookups return the first one found.
 * - Freed positions are reused first in, first out, after every position
 *   never used so far, so that readers rarely meet a reused position.
 * - An entry's gen is the table generation of its last live change (or the
 *   start generation of the resync that last wrote it), so "changed since
 *   gen" is entry.gen > gen.
 * - A delete leaves a tombstone that keeps the delete's epoch and
 *   timestamp; tombstones are purged only while no resync is running.
 * - The table keeps v1 IPv4 sessions (all struct ns_session can hold):
 *   version and family read back as NS_RECORD_VERSION and NS_FAMILY_IPV4,
 *   reserved as zeros.
 *
 * Not done here: expiry of idle sessions (the store's TTL and the active's
 * deletes do that), multi-writer updates, growing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#if defined(RTE_ARCH_X86)
#include <rte_vect.h>
#endif

#include "ns_record.h"
#include "ns_slot.h"
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

/* What readers copy: a session minus the bytes that are the same for
 * every v1 IPv4 record, plus the entry's state and cluster slot. */
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

struct idx_bucket {
	uint16_t sig[IDX_WAYS];
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
	/* read by other threads with relaxed atomics */
	uint64_t live, tombstones, applied, stale_ignored, full_drops;
	uint64_t memory_bytes;
};

#define STAT_ADD(t, f, v) \
	__atomic_store_n(&(t)->f, (t)->f + (v), __ATOMIC_RELAXED)
#define STAT_SUB(t, f, v) \
	__atomic_store_n(&(t)->f, (t)->f - (v), __ATOMIC_RELAXED)

static size_t heap_allocated(void)
{
	struct rte_malloc_socket_stats st;
	size_t sum = 0;
	unsigned int i;

	for (i = 0; i < rte_socket_count(); i++) {
		int sock = rte_socket_id_by_idx(i);

		if (sock >= 0 && rte_malloc_get_socket_stats(sock, &st) == 0)
			sum += st.heap_allocsz_bytes;
	}
	return sum;
}

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

static inline int tuple_equal(const struct ns_tuple *a,
			      const struct ns_tuple *b)
{
	return a->saddr == b->saddr && a->daddr == b->daddr &&
	       a->sport == b->sport && a->dport == b->dport;
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

/* ThreadSanitizer cannot take sig_match's vector load for what it is; see
 * there. */
#if defined(__SANITIZE_THREAD__)
#define NSDP_TABLE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NSDP_TABLE_TSAN 1
#endif
#endif

/* Ways of bk whose signature is sig, one bit per way. On x86 one 16-byte
 * load reads all eight signatures while the writer stores them one by one
 * with relaxed atomics: each aligned 16-bit lane is read whole, and a lane
 * read stale only costs a miss on a key being inserted or a way whose ref
 * and key are then checked. That plain load is a data race to the C memory
 * model and to ThreadSanitizer, so a TSan build takes the portable loop of
 * relaxed atomic loads instead. */
static inline uint32_t sig_match(const struct idx_bucket *bk, uint16_t sig)
{
#if defined(RTE_ARCH_X86) && !defined(NSDP_TABLE_TSAN)
	__m128i v = _mm_load_si128((const __m128i *)(const void *)bk->sig);
	__m128i eq = _mm_cmpeq_epi16(v, _mm_set1_epi16((short)sig));

	return (uint32_t)_mm_movemask_epi8(
		_mm_packs_epi16(eq, _mm_setzero_si128()));
#else
	uint32_t m = 0, w;

	for (w = 0; w < IDX_WAYS; w++)
		m |= (uint32_t)(__atomic_load_n(&bk->sig[w],
						__ATOMIC_RELAXED) == sig)
		     << w;
	return m;
#endif
}

/* ---- indexes (writer) --------------------------------------------- */

/* Store pos under hash h. The index always has a free way: it has more
 * ways than the table has positions. */
static void idx_insert(struct nsdp_table *t, struct idx_bucket *ix, uint32_t h,
		       uint32_t pos)
{
	uint32_t home = home_bucket(t, h), b = home, c, w, n;

	for (n = 0; n < t->n_buckets; n++) {
		for (w = 0; w < IDX_WAYS; w++)
			if (ix[b].ref[w] == 0)
				goto found;
		b = next_bucket(t, b);
	}
	return; /* unreachable: more ways than positions */
found:
	for (c = home; c != b; c = next_bucket(t, c))
		__atomic_store_n(&ix[c].passed, ix[c].passed + 1,
				 __ATOMIC_RELAXED);
	__atomic_store_n(&ix[b].sig[w], (uint16_t)h, __ATOMIC_RELAXED);
	__atomic_store_n(&ix[b].ref[w], pos + 1, __ATOMIC_RELEASE);
}

/* Remove the way that holds pos, stored under hash h. */
static void idx_remove(struct nsdp_table *t, struct idx_bucket *ix, uint32_t h,
		       uint32_t pos)
{
	uint32_t home = home_bucket(t, h), b = home, c, w, n;

	for (n = 0; n < t->n_buckets; n++) {
		for (w = 0; w < IDX_WAYS; w++)
			if (ix[b].ref[w] == pos + 1)
				goto found;
		if (ix[b].passed == 0)
			return;
		b = next_bucket(t, b);
	}
	return;
found:
	__atomic_store_n(&ix[b].ref[w], 0, __ATOMIC_RELEASE);
	for (c = home; c != b; c = next_bucket(t, c))
		__atomic_store_n(&ix[c].passed, ix[c].passed - 1,
				 __ATOMIC_RELEASE);
}

/* Writer's flow lookup: the position of the live or tombstone entry of
 * {proto, orig}, or -1. */
static int32_t flow_find_writer(const struct nsdp_table *t, uint32_t h,
				uint8_t proto, const struct ns_tuple *orig)
{
	uint32_t b = home_bucket(t, h), n;

	for (n = 0; n < t->n_buckets; n++) {
		const struct idx_bucket *bk = &t->flows[b];
		uint32_t m = sig_match(bk, (uint16_t)h);

		while (m) {
			uint32_t w = (uint32_t)__builtin_ctz(m), ref;
			const struct packed *p;

			m &= m - 1;
			ref = bk->ref[w];
			if (ref == 0)
				continue;
			p = &t->entries[ref - 1].u.p;
			if (p->proto == proto && tuple_equal(&p->orig, orig))
				return (int32_t)(ref - 1);
		}
		if (bk->passed == 0)
			break;
		b = next_bucket(t, b);
	}
	return -1;
}

/* ---- entries ------------------------------------------------------ */

static inline uint8_t packed_state(const struct packed *p)
{
	return (uint8_t)(p->flags >> FLAG_STATE_SHIFT);
}

static void packed_make(struct packed *p, const struct ns_session *s,
			uint8_t state, uint16_t slot)
{
	memset(p, 0, sizeof(*p));
	p->timestamp_ns = s->timestamp_ns;
	p->gateway_id = s->gateway_id;
	p->epoch = s->epoch;
	p->timeout_ms = s->timeout_ms;
	p->orig = s->orig;
	p->xlat = s->xlat;
	p->proto = s->proto;
	p->flags = (uint8_t)((s->event & FLAG_EVENT_MASK) |
			     (state << FLAG_STATE_SHIFT));
	p->slot = slot;
}

static void packed_unpack(const struct packed *p, struct ns_session *s)
{
	s->version = NS_RECORD_VERSION;
	s->family = NS_FAMILY_IPV4;
	s->proto = p->proto;
	s->event = p->flags & FLAG_EVENT_MASK;
	s->gateway_id = p->gateway_id;
	s->epoch = p->epoch;
	s->timeout_ms = p->timeout_ms;
	s->timestamp_ns = p->timestamp_ns;
	s->orig = p->orig;
	s->xlat = p->xlat;
	memset(s->reserved, 0, sizeof(s->reserved));
}

/* Writer side of the seqlock. */
static void entry_publish(struct entry *e, const union packed_words *src)
{
	uint32_t seq = e->seq;
	size_t i;

	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < PACKED_WORDS; i++)
		__atomic_store_n(&e->u.w[i], src->w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

static void entry_set_state(struct entry *e, uint8_t state)
{
	union packed_words u = e->u;

	u.p.flags = (uint8_t)((u.p.flags & FLAG_EVENT_MASK) |
			      (state << FLAG_STATE_SHIFT));
	entry_publish(e, &u);
}

/* Reader side: a consistent copy of e's packed session. */
static inline void entry_read(const struct entry *e, union packed_words *dst)
{
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
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			return;
	}
}

/* ---- positions ---------------------------------------------------- */

static int32_t pos_alloc(struct nsdp_table *t)
{
	uint32_t pos;

	if (t->used_end < t->capacity)
		return (int32_t)t->used_end++;
	if (t->free_n == 0)
		return -1;
	pos = t->free_head;
	t->free_head = t->entries[pos].mark;
	if (--t->free_n == 0)
		t->free_tail = POS_NONE;
	t->entries[pos].mark = 0;
	return (int32_t)pos;
}

static void pos_free(struct nsdp_table *t, uint32_t pos)
{
	t->entries[pos].mark = POS_NONE;
	if (t->free_n == 0)
		t->free_head = pos;
	else
		t->entries[t->free_tail].mark = pos;
	t->free_tail = pos;
	t->free_n++;
}

/* ---- create and free ---------------------------------------------- */

struct nsdp_table *nsdp_table_create(const char *name, uint32_t capacity)
{
	int socket = (int)rte_socket_id();
	uint64_t slots;
	struct nsdp_table *t;
	size_t before;

	if (!name || capacity == 0 || capacity > INT32_MAX / 2) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	before = heap_allocated();
	t->capacity = capacity;
	slots = ((uint64_t)capacity * IDX_SLOTS_PER_8_POS + 7) / 8;
	t->n_buckets = (uint32_t)((slots + IDX_WAYS - 1) / IDX_WAYS);
	t->free_head = t->free_tail = POS_NONE;

	/* Zeroed memory is an empty table: free entries, empty ways. */
	t->entries = rte_zmalloc_socket("nsdp_table_entries",
					(size_t)capacity * sizeof(struct entry),
					RTE_CACHE_LINE_SIZE, socket);
	t->flows = rte_zmalloc_socket("nsdp_table_flows",
				      (size_t)t->n_buckets *
					      sizeof(struct idx_bucket),
				      RTE_CACHE_LINE_SIZE, socket);
	t->replies = rte_zmalloc_socket("nsdp_table_replies",
					(size_t)t->n_buckets *
						sizeof(struct idx_bucket),
					RTE_CACHE_LINE_SIZE, socket);
	if (!t->entries || !t->flows || !t->replies) {
		nsdp_table_free(t);
		errno = ENOMEM;
		return NULL;
	}
	t->memory_bytes = heap_allocated() - before;
	return t;
}

void nsdp_table_free(struct nsdp_table *t)
{
	if (!t)
		return;
	rte_free(t->entries);
	rte_free(t->flows);
	rte_free(t->replies);
	free(t);
}

uint64_t nsdp_table_generation(const struct nsdp_table *t)
{
	return __atomic_load_n(&t->gen, __ATOMIC_RELAXED);
}

uint64_t nsdp_table_resync_begin(struct nsdp_table *t)
{
	t->active_resyncs++;
	return t->gen;
}

void nsdp_table_resync_abort(struct nsdp_table *t)
{
	if (t->active_resyncs)
		t->active_resyncs--;
}

/* ---- writing ------------------------------------------------------ */

static void reply_link(struct nsdp_table *t, const struct packed *p,
		       uint32_t pos)
{
	struct ns_tuple r = reply_tuple(&p->xlat);

	idx_insert(t, t->replies, key_hash(p->proto, &r), pos);
}

static void reply_unlink(struct nsdp_table *t, const struct packed *p,
			 uint32_t pos)
{
	struct ns_tuple r = reply_tuple(&p->xlat);

	idx_remove(t, t->replies, key_hash(p->proto, &r), pos);
}

static int session_older(const struct ns_session *a, const struct packed *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch;
	return a->timestamp_ns < b->timestamp_ns;
}

static void state_count(struct nsdp_table *t, uint8_t state, int add)
{
	if (state == ENTRY_LIVE) {
		if (add)
			STAT_ADD(t, live, 1);
		else
			STAT_SUB(t, live, 1);
	} else if (state == ENTRY_TOMB) {
		if (add)
			STAT_ADD(t, tombstones, 1);
		else
			STAT_SUB(t, tombstones, 1);
	}
}

/* Store s into the existing entry pos and keep the reply index in step;
 * gen is the entry's new generation. */
static void entry_update(struct nsdp_table *t, uint32_t pos,
			 const struct ns_session *s, uint64_t gen)
{
	struct entry *e = &t->entries[pos];
	uint8_t old_state = packed_state(&e->u.p);
	uint8_t state = s->event == NS_EV_DELETE ? ENTRY_TOMB : ENTRY_LIVE;
	int relink = !(old_state == ENTRY_LIVE && state == ENTRY_LIVE &&
		       tuple_equal(&e->u.p.xlat, &s->xlat));
	union packed_words u;

	if (old_state == ENTRY_LIVE && relink)
		reply_unlink(t, &e->u.p, pos);
	packed_make(&u.p, s, state, e->u.p.slot);
	entry_publish(e, &u);
	e->gen = gen;
	if (state == ENTRY_LIVE && relink)
		reply_link(t, &u.p, pos);
	state_count(t, old_state, 0);
	state_count(t, state, 1);
}

/* A new entry for s under flow hash h: its position, or -ENOSPC. */
static int32_t entry_create(struct nsdp_table *t, uint32_t h,
			    const struct ns_session *s, uint64_t gen,
			    uint32_t mark)
{
	uint8_t state = s->event == NS_EV_DELETE ? ENTRY_TOMB : ENTRY_LIVE;
	uint8_t keybuf[NS_KEY_LEN];
	union packed_words u;
	struct entry *e;
	int32_t pos = pos_alloc(t);

	if (pos < 0)
		return -ENOSPC;
	e = &t->entries[pos];
	ns_key_build(s->proto, &s->orig, keybuf);
	packed_make(&u.p, s, state, ns_key_slot(keybuf, NS_KEY_LEN));
	entry_publish(e, &u);
	e->gen = gen;
	e->mark = mark;
	idx_insert(t, t->flows, h, (uint32_t)pos);
	if (state == ENTRY_LIVE)
		reply_link(t, &u.p, (uint32_t)pos);
	state_count(t, state, 1);
	return pos;
}

void nsdp_table_prefetch(const struct nsdp_table *t, const struct ns_session *s)
{
	struct ns_tuple r = reply_tuple(&s->xlat);

	rte_prefetch0(&t->flows[home_bucket(t, key_hash(s->proto, &s->orig))]);
	rte_prefetch0(&t->replies[home_bucket(t, key_hash(s->proto, &r))]);
}

int nsdp_table_apply(struct nsdp_table *t, const struct ns_session *s)
{
	int32_t pos;

	return nsdp_table_apply_pos(t, s, &pos);
}

int nsdp_table_apply_pos(struct nsdp_table *t, const struct ns_session *s,
			 int32_t *posp)
{
	uint32_t h = key_hash(s->proto, &s->orig);
	int32_t pos = flow_find_writer(t, h, s->proto, &s->orig);

	*posp = -1;
	if (pos < 0) {
		pos = entry_create(t, h, s, t->gen + 1, 0);
		if (pos < 0) {
			if (s->event == NS_EV_DELETE)
				return 0; /* nothing to delete, no room to
					     remember it */
			STAT_ADD(t, full_drops, 1);
			return -ENOSPC;
		}
	} else if (session_older(s, &t->entries[pos].u.p)) {
		*posp = pos;
		STAT_ADD(t, stale_ignored, 1);
		return 0;
	} else {
		entry_update(t, (uint32_t)pos, s, t->gen + 1);
	}
	*posp = pos;
	__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELAXED);
	STAT_ADD(t, applied, 1);
	return 0;
}

int nsdp_table_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			    uint64_t gen, uint32_t mark)
{
	uint32_t h = key_hash(s->proto, &s->orig);
	int32_t pos = flow_find_writer(t, h, s->proto, &s->orig);
	struct entry *e;

	if (pos < 0) {
		if (entry_create(t, h, s, gen, mark) < 0) {
			STAT_ADD(t, full_drops, 1);
			return -ENOSPC;
		}
		STAT_ADD(t, applied, 1);
		return 0;
	}
	e = &t->entries[pos];
	if (e->gen > gen)
		return 0; /* a live record won since the resync began */
	e->mark = mark;
	if (session_older(s, &e->u.p)) {
		STAT_ADD(t, stale_ignored, 1);
		return 0;
	}
	entry_update(t, (uint32_t)pos, s, gen);
	STAT_ADD(t, applied, 1);
	return 0;
}

static void entry_remove(struct nsdp_table *t, uint32_t pos)
{
	struct entry *e = &t->entries[pos];
	const struct packed *p = &e->u.p;
	uint8_t state = packed_state(p);

	if (state == ENTRY_LIVE)
		reply_unlink(t, p, pos);
	state_count(t, state, 0);
	entry_set_state(e, ENTRY_FREE);
	idx_remove(t, t->flows, key_hash(p->proto, &p->orig), pos);
	pos_free(t, pos);
}

uint64_t nsdp_table_purge_tombstones(struct nsdp_table *t)
{
	uint64_t n = 0;
	uint32_t i;

	if (t->active_resyncs || t->tombstones == 0)
		return 0;
	for (i = 0; i < t->used_end; i++) {
		if (packed_state(&t->entries[i].u.p) == ENTRY_TOMB) {
			entry_remove(t, i);
			n++;
		}
	}
	return n;
}

uint64_t nsdp_table_resync_finish(struct nsdp_table *t, uint64_t gen,
				  uint32_t mark, const uint8_t *in_scope)
{
	uint64_t removed = 0;
	uint32_t i;

	for (i = 0; i < t->used_end; i++) {
		const struct entry *e = &t->entries[i];

		if (packed_state(&e->u.p) != ENTRY_LIVE || e->mark == mark ||
		    e->gen > gen || !in_scope[e->u.p.slot])
			continue;
		entry_remove(t, i);
		removed++;
	}
	nsdp_table_resync_abort(t);
	nsdp_table_purge_tombstones(t);
	return removed;
}

int nsdp_table_remove(struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig)
{
	int32_t pos = flow_find_writer(t, key_hash(proto, orig), proto, orig);

	if (pos < 0)
		return -ENOENT;
	entry_remove(t, (uint32_t)pos);
	__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- reading ------------------------------------------------------ */

/* Probe one index (flows, or replies when by_reply) for the live session
 * of proto whose inside tuple (or reply tuple) is key. Inlined into both
 * finds with by_reply constant, so neither pays for the other's test. */
static __rte_always_inline int32_t idx_find(const struct nsdp_table *t,
					    int by_reply, uint8_t proto,
					    const struct ns_tuple *key,
					    struct ns_session *out)
{
	const struct idx_bucket *index = by_reply ? t->replies : t->flows;
	uint32_t h = key_hash(proto, key);
	uint32_t b = home_bucket(t, h), n;
	union packed_words u;

	for (n = 0; n < t->n_buckets; n++) {
		const struct idx_bucket *bk = &index[b];
		uint32_t m = sig_match(bk, (uint16_t)h);

		while (m) {
			uint32_t w = (uint32_t)__builtin_ctz(m), ref;

			m &= m - 1;
			ref = __atomic_load_n(&bk->ref[w], __ATOMIC_ACQUIRE);
			if (ref == 0)
				continue;
			entry_read(&t->entries[ref - 1], &u);
			if (packed_state(&u.p) == ENTRY_LIVE &&
			    u.p.proto == proto &&
			    (by_reply ? reply_matches(&u.p, key)
				      : tuple_equal(&u.p.orig, key))) {
				packed_unpack(&u.p, out);
				return (int32_t)(ref - 1);
			}
		}
		if (__atomic_load_n(&bk->passed, __ATOMIC_ACQUIRE) == 0)
			break;
		b = next_bucket(t, b);
	}
	return -ENOENT;
}

int32_t nsdp_table_find(const struct nsdp_table *t, uint8_t proto,
			const struct ns_tuple *orig, struct ns_session *out)
{
	return idx_find(t, 0, proto, orig, out);
}

int nsdp_table_lookup(const struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig, struct ns_session *out)
{
	return nsdp_table_find(t, proto, orig, out) < 0 ? -ENOENT : 0;
}

int32_t nsdp_table_find_reply(const struct nsdp_table *t, uint8_t proto,
			      const struct ns_tuple *reply,
			      struct ns_session *out)
{
	return idx_find(t, 1, proto, reply, out);
}

int nsdp_table_lookup_reply(const struct nsdp_table *t, uint8_t proto,
			    const struct ns_tuple *reply,
			    struct ns_session *out)
{
	return nsdp_table_find_reply(t, proto, reply, out) < 0 ? -ENOENT : 0;
}

uint32_t nsdp_table_positions(const struct nsdp_table *t)
{
	return t->capacity;
}

int nsdp_table_at(const struct nsdp_table *t, uint32_t pos,
		  struct ns_session *out)
{
	if (pos >= t->used_end ||
	    packed_state(&t->entries[pos].u.p) != ENTRY_LIVE)
		return -ENOENT;
	packed_unpack(&t->entries[pos].u.p, out);
	return 0;
}

uint64_t nsdp_table_walk(const struct nsdp_table *t,
			 void (*fn)(const struct ns_session *, void *),
			 void *arg)
{
	struct ns_session s;
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < t->used_end; i++) {
		if (packed_state(&t->entries[i].u.p) != ENTRY_LIVE)
			continue;
		packed_unpack(&t->entries[i].u.p, &s);
		fn(&s, arg);
		n++;
	}
	return n;
}

int64_t nsdp_table_dump(const struct nsdp_table *t, const char *path)
{
	uint8_t rec[NS_RECORD_MAX_LEN];
	struct ns_session s;
	char tmp[4096];
	int64_t n = 0;
	uint32_t i;
	FILE *f;
	int err = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "wb");
	if (!f)
		return -errno;
	for (i = 0; i < t->used_end && !err; i++) {
		int len;

		if (packed_state(&t->entries[i].u.p) != ENTRY_LIVE)
			continue;
		packed_unpack(&t->entries[i].u.p, &s);
		len = ns_record_encode(&s, rec, sizeof(rec));
		if (len < 0) {
			err = len;
			break;
		}
		if (fwrite(rec, 1, (size_t)len, f) != (size_t)len)
			err = -EIO;
		n++;
	}
	if (fflush(f) != 0 && !err)
		err = -errno;
	if (fclose(f) != 0 && !err)
		err = -EIO;
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err) {
		remove(tmp);
		return err;
	}
	return n;
}

void nsdp_table_stats(const struct nsdp_table *t, struct nsdp_table_stats *s)
{
	s->live = __atomic_load_n(&t->live, __ATOMIC_RELAXED);
	s->tombstones = __atomic_load_n(&t->tombstones, __ATOMIC_RELAXED);
	s->applied = __atomic_load_n(&t->applied, __ATOMIC_RELAXED);
	s->stale_ignored = __atomic_load_n(&t->stale_ignored, __ATOMIC_RELAXED);
	s->full_drops = __atomic_load_n(&t->full_drops, __ATOMIC_RELAXED);
	s->memory_bytes = t->memory_bytes;
}
