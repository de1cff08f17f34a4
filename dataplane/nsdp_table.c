/*
 * nsdp_table.c - the gateway's session table (see nsdp_table.h): layout,
 * invariants, and the writer's side. The readers' side (lookups, walks,
 * dump, counters) is nsdp_table_read.c.
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
 * once promoted), holding the table (writer, taken and given back with
 * compare-and-swap, so that two writers cannot both hold it); any number
 * of fast-path threads read without locks.
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
 *   reserved as zeros. IPv6 sessions go to the table's IPv6 table
 *   (nsdp_table6.c, when it has one): a table of the same kind whose
 *   positions also hold a second line, published under the entry's seq.
 *
 * Not done here: expiry of idle sessions (the store's TTL and the active's
 * deletes do that), multi-writer updates, growing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_common.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "ns_slot.h"
#include "nsdp_table_impl.h"

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
	sig_store(&ix[b], w, (uint16_t)h);
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
				uint8_t proto, const struct ns_tuple *orig,
				const struct ns_session_v6 *x)
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
			if (p->proto == proto &&
			    ns_tuple_equal(&p->orig, orig) &&
			    (!x || memcmp(t->ext[ref - 1].orig_saddr,
					  x->orig_saddr, 32) == 0))
				return (int32_t)(ref - 1);
		}
		if (bk->passed == 0)
			break;
		b = next_bucket(t, b);
	}
	return -1;
}

/* ---- entries ------------------------------------------------------ */

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
			     (state << FLAG_STATE_SHIFT) |
			     (s->family == NS_FAMILY_NAT64 ? FLAG_NAT64 : 0));
	p->slot = slot;
}

/* Writer side of the seqlock; in the IPv6 table x (not NULL) is the
 * position's new second line, published with the packed session. */
static void entry_publish_ext(struct nsdp_table *t, uint32_t pos,
			      const union packed_words *src,
			      const struct ns_session_v6 *x)
{
	struct entry *e = &t->entries[pos];
	uint64_t *xw = x ? (uint64_t *)(void *)&t->ext[pos] : NULL;
	union ext_words xs;
	uint32_t seq = e->seq;
	size_t i;

	if (x)
		memcpy(&xs.x, x, sizeof(xs.x));
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < PACKED_WORDS; i++)
		__atomic_store_n(&e->u.w[i], src->w[i], __ATOMIC_RELAXED);
	for (i = 0; x && i < EXT_WORDS; i++)
		__atomic_store_n(&xw[i], xs.w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

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

	u.p.flags = (uint8_t)((u.p.flags & ~FLAG_STATE_MASK) |
			      (state << FLAG_STATE_SHIFT));
	entry_publish(e, &u);
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

/* Fault the whole pages of [p, p + len) in, writable, in one call (a hint:
 * a kernel before 5.14 refuses it, and they fault in as they are used). */
static void populate(void *p, size_t len)
{
	const uintptr_t page = 4096;
	uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t b = ((uintptr_t)p + len) & ~(page - 1);

	if (b > a)
		(void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
}

/* In hugepages the table's memory is there from the start; without them
 * (a standby's --no-huge) each 4 KiB page would fault in when a session
 * first lands on it, and a cold load of a million sessions took 0.45 s
 * to insert them where it takes 0.21 s with the pages faulted in at once
 * (20-60 ms for 1 250 000 sessions). */
static void table_populate(struct nsdp_table *t)
{
	populate(t->entries, (size_t)t->capacity * sizeof(struct entry));
	populate(t->flows, (size_t)t->n_buckets * sizeof(struct idx_bucket));
	populate(t->replies, (size_t)t->n_buckets * sizeof(struct idx_bucket));
}

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
	table_populate(t);
	return t;
}

void nsdp_table_free(struct nsdp_table *t)
{
	if (!t)
		return;
	nsdp_table6_free(t);
	rte_free(t->entries);
	rte_free(t->flows);
	rte_free(t->replies);
	free(t);
}

int nsdp_table_take(struct nsdp_table *t, enum nsdp_table_writer w)
{
	uint32_t nobody = NSDP_TABLE_NOBODY;

	/* Acquire: the new writer sees every write of the one before. */
	return __atomic_compare_exchange_n(&t->writer, &nobody, (uint32_t)w, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
		       ? 0
		       : -EBUSY;
}

int nsdp_table_give_back(struct nsdp_table *t, enum nsdp_table_writer w)
{
	uint32_t holder = (uint32_t)w;

	return __atomic_compare_exchange_n(&t->writer, &holder,
					   NSDP_TABLE_NOBODY, 0,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
		       ? 0
		       : -EPERM;
}

enum nsdp_table_writer nsdp_table_writer(const struct nsdp_table *t)
{
	return (enum nsdp_table_writer)__atomic_load_n(&t->writer,
						       __ATOMIC_ACQUIRE);
}

uint64_t nsdp_table_generation(const struct nsdp_table *t)
{
	return NSDP_STAT_READ(t->gen);
}

uint64_t nsdp_table_applied(const struct nsdp_table *t)
{
	return NSDP_STAT_READ(t->applied) +
	       (t->v6 ? NSDP_STAT_READ(t->v6->applied) : 0);
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
	uint64_t *c = state == ENTRY_LIVE   ? &t->live
		      : state == ENTRY_TOMB ? &t->tombstones
					    : NULL;

	if (!c)
		return;
	if (add)
		NSDP_STAT_INC(*c);
	else
		NSDP_STAT_SUB(*c, 1);
}

/* Store s into the existing entry pos and keep the reply index in step;
 * gen is the entry's new generation. */
static void entry_update(struct nsdp_table *t, uint32_t pos,
			 const struct ns_session *s,
			 const struct ns_session_v6 *x, uint64_t gen)
{
	struct entry *e = &t->entries[pos];
	uint8_t old_state = packed_state(&e->u.p);
	uint8_t state = s->event == NS_EV_DELETE ? ENTRY_TOMB : ENTRY_LIVE;
	int relink = !(old_state == ENTRY_LIVE && state == ENTRY_LIVE &&
		       ns_tuple_equal(&e->u.p.xlat, &s->xlat) && !x);
	union packed_words u;

	if (old_state == ENTRY_LIVE && relink)
		reply_unlink(t, &e->u.p, pos);
	packed_make(&u.p, s, state, e->u.p.slot);
	entry_publish_ext(t, pos, &u, x);
	e->gen = gen;
	if (state == ENTRY_LIVE && relink)
		reply_link(t, &u.p, pos);
	state_count(t, old_state, 0);
	state_count(t, state, 1);
}

/* A new entry for s under flow hash h: its position, or -ENOSPC. */
static int32_t entry_create(struct nsdp_table *t, uint32_t h,
			    const struct ns_session *s,
			    const struct ns_session_v6 *x, uint64_t gen,
			    uint32_t mark)
{
	uint8_t state = s->event == NS_EV_DELETE ? ENTRY_TOMB : ENTRY_LIVE;
	uint8_t keybuf[NS_KEY_MAX];
	size_t keylen = NS_KEY_LEN;
	union packed_words u;
	struct entry *e;
	int32_t pos = pos_alloc(t);

	if (pos < 0)
		return -ENOSPC;
	e = &t->entries[pos];
	if (x) {
		ns_key_build_v6(s->proto, x->orig_saddr, s->orig.sport,
				x->orig_daddr, s->orig.dport, keybuf);
		keylen = NS_KEY_V6_LEN;
	} else {
		ns_key_build(s->proto, &s->orig, keybuf);
	}
	packed_make(&u.p, s, state, ns_key_slot(keybuf, keylen));
	entry_publish_ext(t, (uint32_t)pos, &u, x);
	e->gen = gen;
	e->mark = mark;
	idx_insert(t, t->flows, h, (uint32_t)pos);
	if (state == ENTRY_LIVE)
		reply_link(t, &u.p, (uint32_t)pos);
	state_count(t, state, 1);
	return pos;
}

uint32_t nsdp_table_prefetch(const struct nsdp_table *t,
			     const struct ns_session *s)
{
	struct ns_tuple r = reply_tuple(&s->xlat);
	uint32_t h;

	if (ns_family_is_v6(s->family))
		return 0;
	h = key_hash(s->proto, &s->orig);
	rte_prefetch0(&t->flows[home_bucket(t, h)]);
	rte_prefetch0(&t->replies[home_bucket(t, key_hash(s->proto, &r))]);
	return h;
}

void nsdp_table_prefetch_entry(const struct nsdp_table *t,
			       const struct ns_session *s, uint32_t hint)
{
	uint32_t m;
	const struct idx_bucket *bk;

	if (ns_family_is_v6(s->family))
		return;
	bk = &t->flows[home_bucket(t, hint)];
	for (m = sig_match(bk, (uint16_t)hint); m; m &= m - 1) {
		uint32_t ref = bk->ref[__builtin_ctz(m)];

		if (ref != 0)
			rte_prefetch0(&t->entries[ref - 1]);
	}
}

/* over: apply s even when it is older than the entry. x: s's second
 * line, in the IPv6 table (s's addresses folded by the caller). */
int nsdp_table_apply_x(struct nsdp_table *t, const struct ns_session *s,
		       const struct ns_session_v6 *x, int32_t *posp, int over)
{
	uint32_t h = key_hash(s->proto, &s->orig);
	int32_t pos = flow_find_writer(t, h, s->proto, &s->orig, x);

	*posp = -1;
	if (pos < 0) {
		pos = entry_create(t, h, s, x, t->gen + 1, 0);
		if (pos < 0) {
			if (s->event == NS_EV_DELETE)
				return 0; /* nothing to delete, no room to
					     remember it */
			NSDP_STAT_INC(t->full_drops);
			return -ENOSPC;
		}
	} else if (!over && session_older(s, &t->entries[pos].u.p)) {
		*posp = pos;
		NSDP_STAT_INC(t->stale_ignored);
		return 0;
	} else {
		entry_update(t, (uint32_t)pos, s, x, t->gen + 1);
	}
	*posp = pos;
	NSDP_STAT_INC(t->gen);
	NSDP_STAT_INC(t->applied);
	return 0;
}

int nsdp_table_apply(struct nsdp_table *t, const struct ns_session *s)
{
	int32_t pos;

	if (unlikely(ns_family_is_v6(s->family)))
		return nsdp_table6_apply(t, s, 0);
	return nsdp_table_apply_x(t, s, NULL, &pos, 0);
}

int nsdp_table_apply_store(struct nsdp_table *t, const struct ns_session *s)
{
	int32_t pos;

	if (unlikely(ns_family_is_v6(s->family)))
		return nsdp_table6_apply(t, s, 1);
	return nsdp_table_apply_x(t, s, NULL, &pos, 1);
}

int nsdp_table_apply_pos(struct nsdp_table *t, const struct ns_session *s,
			 int32_t *posp)
{
	*posp = -1;
	if (unlikely(ns_family_is_v6(s->family)))
		return -EAFNOSUPPORT;
	return nsdp_table_apply_x(t, s, NULL, posp, 0);
}

int nsdp_table_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			    uint64_t gen, uint32_t mark)
{
	if (unlikely(ns_family_is_v6(s->family)))
		return nsdp_table6_apply_resync(t, s, gen, mark);
	return nsdp_table_resync_x(t, s, NULL, gen, mark);
}

int nsdp_table_resync_x(struct nsdp_table *t, const struct ns_session *s,
			const struct ns_session_v6 *x, uint64_t gen,
			uint32_t mark)
{
	uint32_t h = key_hash(s->proto, &s->orig);
	int32_t pos = flow_find_writer(t, h, s->proto, &s->orig, x);
	struct entry *e;

	if (pos < 0) {
		if (entry_create(t, h, s, x, gen, mark) < 0) {
			NSDP_STAT_INC(t->full_drops);
			return -ENOSPC;
		}
		NSDP_STAT_INC(t->applied);
		return 0;
	}
	e = &t->entries[pos];
	if (e->gen > gen)
		return 0; /* a live record won since the resync began */
	e->mark = mark;
	if (session_older(s, &e->u.p)) {
		NSDP_STAT_INC(t->stale_ignored);
		return 0;
	}
	entry_update(t, (uint32_t)pos, s, x, gen);
	NSDP_STAT_INC(t->applied);
	return 0;
}

void nsdp_table_entry_remove(struct nsdp_table *t, uint32_t pos)
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

uint64_t nsdp_table_purge_slice(struct nsdp_table *t, uint32_t slices)
{
	uint64_t n = t->ext ? 0 : nsdp_table6_purge_slice(t, slices);
	uint32_t i = t->purge_at, left;

	if (t->active_resyncs || t->tombstones == 0 || slices == 0)
		return n;
	left = t->used_end / slices + (t->used_end % slices != 0);
	for (; left > 0 && t->tombstones > 0; left--, i++) {
		if (i >= t->used_end)
			i = 0;
		if (packed_state(&t->entries[i].u.p) == ENTRY_TOMB) {
			nsdp_table_entry_remove(t, i);
			n++;
		}
	}
	t->purge_at = i;
	return n;
}

uint64_t nsdp_table_purge_tombstones(struct nsdp_table *t)
{
	return nsdp_table_purge_slice(t, 1);
}

uint64_t nsdp_table_resync_finish(struct nsdp_table *t, uint64_t gen,
				  uint32_t mark, const uint8_t *in_scope)
{
	return nsdp_table_resync_finish_each(t, gen, mark, in_scope, NULL,
					     NULL);
}

uint64_t nsdp_table_resync_finish_each(
	struct nsdp_table *t, uint64_t gen, uint32_t mark,
	const uint8_t *in_scope,
	void (*removed_fn)(const struct ns_session *s, void *arg), void *arg)
{
	uint64_t removed = 0;
	uint32_t i;

	for (i = 0; i < t->used_end; i++) {
		const struct entry *e = &t->entries[i];

		if (packed_state(&e->u.p) != ENTRY_LIVE || e->mark == mark ||
		    e->gen > gen || !in_scope[e->u.p.slot])
			continue;
		if (removed_fn) {
			struct ns_session s;

			packed_unpack(&e->u.p, &s);
			removed_fn(&s, arg);
		}
		nsdp_table_entry_remove(t, i);
		removed++;
	}
	removed += nsdp_table6_resync_finish(t, gen, mark, in_scope, removed_fn,
					     arg);
	nsdp_table_resync_abort(t);
	nsdp_table_purge_tombstones(t);
	return removed;
}

int nsdp_table_remove(struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig)
{
	int32_t pos =
		flow_find_writer(t, key_hash(proto, orig), proto, orig, NULL);

	if (pos < 0)
		return -ENOENT;
	nsdp_table_entry_remove(t, (uint32_t)pos);
	NSDP_STAT_INC(t->gen);
	return 0;
}
