/*
 * nsa_logmerge.c - merging log segments into the table the keys layout
 * holds (schema/FORMAT.md, "Reading the log: order and expiry").
 *
 * The merge is commutative: a record replaces the one kept for its session
 * only when it is newer or as new by (epoch, timestamp_ns), so segments may
 * be read in any order, and twice. Deletes are kept until the end, where
 * they and the records past their timeout are left out.
 *
 * Not here: finding and reading the segments (loader/nsa_loader_log.c,
 * compact/nsa_compact_segments.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_batch.h"
#include "ns_slot.h"
#include "nsa_logmerge.h"
#include "nsa_logmerge_pages.h"

#define MERGE_MIN_CAP 1024
/* Records of a segment whose index slots are fetched MERGE_AHEAD ahead of
 * their merge, and whose entries (when the slot's tag matches) half as far:
 * a large merge is a cache (and TLB) miss per record, and overlapping them
 * is most of its speed. */
#define MERGE_AHEAD 16
#define EMIT_CHUNK 16

/* The sessions merged, dense, in the order they were first seen; the index
 * maps a key to its entry. */
struct nsa_logmerge_entry {
	uint8_t key[NS_KEY_LEN];
	struct ns_session s;
};

/* An index slot: 0 empty, else the entry's position + 1 (low 32 bits) and
 * the key hash's high 32 bits (a tag: most probes that would miss compare
 * no key). The index is 8 B a slot at most half full, the entries 80 B a
 * session: a merge of n sessions zeroes and touches about 96 n bytes
 * rather than 160 n to 320 n with the entries in the index. */
#define SLOT_POS(v) ((uint32_t)(v))
#define SLOT_TAG(v) ((uint32_t)((v) >> 32))
#define HASH_TAG(h) ((uint32_t)((h) >> 32))

static uint64_t key_hash(const uint8_t *k)
{
	uint64_t a, b;

	memcpy(&a, k, 8);
	memcpy(&b, k + 8, 8);
	a ^= b * 0x9e3779b97f4a7c15ull;
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return a;
}

#define IDX_BYTES(cap) ((cap) * sizeof(uint64_t))
#define ENTRIES_BYTES(cap) ((cap) / 2 * sizeof(struct nsa_logmerge_entry))

/* The bytes of a merge of index capacity cap. */
static size_t merge_bytes(size_t cap)
{
	return IDX_BYTES(cap) + ENTRIES_BYTES(cap);
}

/* An IPv6 session, as nsa_logmerge_entry (below, their merge). */
struct nsa_logmerge_entry6 {
	uint8_t key[NS_KEY_V6_LEN];
	struct ns_rec r;
};

#define ENTRIES6_BYTES(cap) ((cap) / 2 * sizeof(struct nsa_logmerge_entry6))

static size_t v6_bytes(size_t cap)
{
	return IDX_BYTES(cap) + ENTRIES6_BYTES(cap);
}

static void prefault_stop(struct nsa_logmerge *m);

int nsa_logmerge_init(struct nsa_logmerge *m)
{
	memset(m, 0, sizeof(*m));
	m->idx = nsa_pages_alloc(IDX_BYTES(MERGE_MIN_CAP));
	m->e = nsa_pages_alloc(ENTRIES_BYTES(MERGE_MIN_CAP));
	m->cap = MERGE_MIN_CAP;
	m->peak_bytes = merge_bytes(MERGE_MIN_CAP);
	if (m->idx == NULL || m->e == NULL) {
		nsa_logmerge_free(m);
		return -ENOMEM;
	}
	return 0;
}

void nsa_logmerge_free(struct nsa_logmerge *m)
{
	prefault_stop(m);
	nsa_pages_free(m->idx, IDX_BYTES(m->cap));
	nsa_pages_free(m->e, ENTRIES_BYTES(m->cap));
	free(m->idx6);
	free(m->e6);
	m->idx = NULL;
	m->e = NULL;
	m->idx6 = NULL;
	m->e6 = NULL;
	m->cap = m->used = 0;
	m->cap6 = m->used6 = 0;
}

/* The slot of key (hash), or the empty one where it goes. */
static uint64_t *slot_of(const struct nsa_logmerge *m, const uint8_t *key,
			 uint64_t hash)
{
	const uint32_t tag = HASH_TAG(hash);
	size_t i = hash & (m->cap - 1);

	while (m->idx[i] != 0 && (SLOT_TAG(m->idx[i]) != tag ||
				  memcmp(m->e[SLOT_POS(m->idx[i]) - 1].key, key,
					 NS_KEY_LEN) != 0))
		i = (i + 1) & (m->cap - 1);
	return &m->idx[i];
}

/* Index entry pos (of hash h) in idx of cap slots, where it is not. */
static void idx_put(uint64_t *idx, size_t cap, uint64_t h, size_t pos)
{
	size_t j = h & (cap - 1);

	while (idx[j] != 0)
		j = (j + 1) & (cap - 1);
	idx[j] = (uint64_t)HASH_TAG(h) << 32 | (uint32_t)(pos + 1);
}

/* ---- a merge sized for what it expects -------------------------------
 * A cold load's merge of 1 000 000 sessions touches about 100 MB that no
 * one touched before, which the kernel zeroes page by page in the thread
 * that first writes it (slowly where a virtual machine's host takes freed
 * memory back; docs/performance.md, Cold load), and doubling the index
 * rehashes every session once more each time. Told how many sessions
 * may come (nsa_logmerge_expect), a merge that reaches EXPECT_START
 * sessions, and so looks large, maps blocks for them and a thread of its
 * own (nsa_logmerge_pages.c) faults their pages in on another core with
 * MADV_POPULATE_WRITE (which writes nothing): the index first, then the
 * entries. At its next growth after the index is faulted in, the merge
 * moves into those blocks (one copy, one rehash) and the thread goes on
 * with the entries a little ahead of their use. A small load never
 * starts it; a page the merge reaches first it faults itself. */
#define EXPECT_START ((size_t)1 << 16)
/* Sessions a merge is sized for at most (an index of 128 MB): past them
 * it grows as any. */
#define EXPECT_MAX ((size_t)1 << 23)

struct nsa_logmerge_prefault {
	struct nsa_pages_faulter *f; /* its thread */
	uint64_t *idx; /* the blocks sized for cap, the merge's once moved */
	struct nsa_logmerge_entry *e;
	size_t cap;
	int moved; /* the merge lives in idx and e */
};

/* Stop the thread; the blocks go too unless the merge moved into them. */
static void prefault_stop(struct nsa_logmerge *m)
{
	struct nsa_logmerge_prefault *pf = m->prefault;

	if (pf == NULL)
		return;
	nsa_pages_fault_stop(pf->f);
	if (!pf->moved) {
		nsa_pages_free(pf->idx, IDX_BYTES(pf->cap));
		nsa_pages_free(pf->e, ENTRIES_BYTES(pf->cap));
	}
	free(pf);
	m->prefault = NULL;
}

/* The blocks for m->expect sessions, and the thread that faults them in
 * (nothing when they would be no larger, or out of memory: the merge
 * grows as any). */
static void prefault_start(struct nsa_logmerge *m)
{
	struct nsa_logmerge_prefault *pf;
	size_t cap = m->cap;

	while (cap < 2 * m->expect)
		cap *= 2;
	m->expect = 0; /* once */
	if (cap <= 2 * m->cap ||
	    (m->max_bytes &&
	     merge_bytes(cap) + merge_bytes(m->cap) > m->max_bytes))
		return;
	pf = calloc(1, sizeof(*pf));
	if (pf == NULL)
		return;
	pf->cap = cap;
	pf->idx = nsa_pages_alloc(IDX_BYTES(cap));
	pf->e = nsa_pages_alloc(ENTRIES_BYTES(cap));
	pf->f = pf->idx && pf->e
			? nsa_pages_fault_start(pf->idx, IDX_BYTES(cap), pf->e,
						ENTRIES_BYTES(cap))
			: NULL;
	if (pf->f == NULL) {
		nsa_pages_free(pf->idx, IDX_BYTES(cap));
		nsa_pages_free(pf->e, ENTRIES_BYTES(cap));
		free(pf);
		return;
	}
	m->prefault = pf;
	if (merge_bytes(cap) + merge_bytes(m->cap) > m->peak_bytes)
		m->peak_bytes = merge_bytes(cap) + merge_bytes(m->cap);
}

/* Into the sized blocks, their index faulted in: the entries copied, the
 * index rebuilt; the thread goes on with the entries. */
static void prefault_move(struct nsa_logmerge *m)
{
	struct nsa_logmerge_prefault *pf = m->prefault;
	size_t i;

	memcpy(pf->e, m->e, m->used * sizeof(*m->e));
	nsa_pages_free(m->idx, IDX_BYTES(m->cap));
	nsa_pages_free(m->e, ENTRIES_BYTES(m->cap));
	m->idx = pf->idx;
	m->e = pf->e;
	m->cap = pf->cap;
	pf->moved = 1;
	for (i = 0; i < m->used; i++)
		idx_put(m->idx, m->cap, key_hash(m->e[i].key), i);
}

/* Whether the merge moves into the sized blocks now, to hold need
 * sessions; the blocks go when too small for them by now. */
static int prefault_ready(struct nsa_logmerge *m, size_t need)
{
	struct nsa_logmerge_prefault *pf = m->prefault;

	if (pf == NULL || pf->moved)
		return 0;
	if (2 * need > pf->cap) {
		prefault_stop(m);
		return 0;
	}
	return nsa_pages_head_ready(pf->f);
}

void nsa_logmerge_expect(struct nsa_logmerge *m, size_t sessions)
{
	if (m->prefault == NULL)
		m->expect = sessions < EXPECT_MAX ? sessions : EXPECT_MAX;
}

/* Twice the index (rebuilt from the entries) and room for as many entries
 * as it may index. */
static int grow(struct nsa_logmerge *m)
{
	size_t cap = m->cap * 2, i;
	uint64_t *idx;
	struct nsa_logmerge_entry *e;

	if (m->prefault && m->prefault->moved)
		prefault_stop(m); /* the entries may move */
	idx = nsa_pages_alloc(IDX_BYTES(cap));
	e = idx ? nsa_pages_grow(m->e, ENTRIES_BYTES(m->cap),
				 ENTRIES_BYTES(cap))
		: NULL;
	if (e == NULL) {
		nsa_pages_free(idx, IDX_BYTES(cap));
		return -ENOMEM;
	}
	nsa_pages_free(m->idx, IDX_BYTES(m->cap));
	m->idx = idx;
	m->e = e;
	m->cap = cap;
	for (i = 0; i < m->used; i++)
		idx_put(idx, cap, key_hash(e[i].key), i);
	return 0;
}

size_t nsa_logmerge_bytes(const struct nsa_logmerge *m)
{
	return (m->idx ? merge_bytes(m->cap) : 0) +
	       (m->cap6 ? v6_bytes(m->cap6) : 0);
}

/* Room for n more sessions: 0, -ENOMEM, or -ENOBUFS past max_bytes (a
 * grow holds the old index and the new one at once). */
static int reserve(struct nsa_logmerge *m, size_t n)
{
	if (m->expect && m->used + n >= EXPECT_START)
		prefault_start(m);
	while (2 * (m->used + n) > m->cap) {
		size_t during;

		if (prefault_ready(m, m->used + n)) {
			prefault_move(m);
			continue;
		}
		during = merge_bytes(2 * m->cap) + IDX_BYTES(m->cap);

		if (m->max_bytes && during > m->max_bytes)
			return -ENOBUFS;
		if (m->cap >= ((size_t)1 << 32) || grow(m) != 0)
			return -ENOMEM;
		if (during > m->peak_bytes)
			m->peak_bytes = during;
	}
	if (m->prefault && m->prefault->moved)
		nsa_pages_tail_used(m->prefault->f,
				    (m->used + n) *
					    sizeof(struct nsa_logmerge_entry));
	return 0;
}

static int kept(const struct nsa_logmerge *m, const uint8_t *key,
		size_t key_len)
{
	uint16_t slot;

	if (m->keep_slots == NULL)
		return 1;
	slot = ns_key_slot(key, key_len);
	return (m->keep_slots[slot / 64] >> (slot % 64)) & 1;
}

/* Merge s under key (room reserved). */
static void merge_one(struct nsa_logmerge *m, const struct ns_session *s,
		      const uint8_t *key, uint64_t hash)
{
	uint64_t *slot = slot_of(m, key, hash);
	struct nsa_logmerge_entry *x;

	m->records++;
	if (*slot == 0) {
		x = &m->e[m->used++];
		memcpy(x->key, key, NS_KEY_LEN);
		x->s = *s;
		*slot = (uint64_t)HASH_TAG(hash) << 32 | (uint32_t)m->used;
		return;
	}
	x = &m->e[SLOT_POS(*slot) - 1];
	if (s->epoch > x->s.epoch ||
	    (s->epoch == x->s.epoch && s->timestamp_ns >= x->s.timestamp_ns))
		x->s = *s; /* as new counts as newer: the same record twice */
}

/* ---- IPv6 sessions ----------------------------------------------------
 * As the IPv4 merge, on arrays of their own (calloc'd: far fewer of them
 * in a mixed load, and no prefetching). */
static uint64_t key6_hash(const uint8_t *k)
{
	uint64_t a = 0, w;

	for (size_t i = 0; i < NS_KEY_V6_LEN; i += 8) {
		memcpy(&w, k + i, 8);
		a = (a ^ w) * 0x9e3779b97f4a7c15ull;
		a ^= a >> 29;
	}
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return a;
}

static uint64_t *slot6_of(const struct nsa_logmerge *m, const uint8_t *key,
			  uint64_t hash)
{
	const uint32_t tag = HASH_TAG(hash);
	size_t i = hash & (m->cap6 - 1);

	while (m->idx6[i] != 0 && (SLOT_TAG(m->idx6[i]) != tag ||
				   memcmp(m->e6[SLOT_POS(m->idx6[i]) - 1].key,
					  key, NS_KEY_V6_LEN) != 0))
		i = (i + 1) & (m->cap6 - 1);
	return &m->idx6[i];
}

static int grow6(struct nsa_logmerge *m)
{
	size_t cap = m->cap6 ? m->cap6 * 2 : MERGE_MIN_CAP, i;
	uint64_t *idx = calloc(cap, sizeof(*idx));
	struct nsa_logmerge_entry6 *e =
		idx ? realloc(m->e6, ENTRIES6_BYTES(cap)) : NULL;

	if (e == NULL) {
		free(idx);
		return -ENOMEM;
	}
	free(m->idx6);
	m->idx6 = idx;
	m->e6 = e;
	m->cap6 = cap;
	for (i = 0; i < m->used6; i++)
		idx_put(idx, cap, key6_hash(e[i].key), i);
	return 0;
}

/* Room for one more IPv6 session, within max_bytes with the IPv4 part. */
static int reserve6(struct nsa_logmerge *m)
{
	while (2 * (m->used6 + 1) > m->cap6) {
		size_t next = m->cap6 ? m->cap6 * 2 : MERGE_MIN_CAP;
		size_t during = merge_bytes(m->cap) + v6_bytes(next) +
				IDX_BYTES(m->cap6);

		if (m->max_bytes && during > m->max_bytes)
			return -ENOBUFS;
		if (m->cap6 >= ((size_t)1 << 32) || grow6(m) != 0)
			return -ENOMEM;
		if (during > m->peak_bytes)
			m->peak_bytes = during;
	}
	return 0;
}

static int merge_v6(struct nsa_logmerge *m, const struct ns_rec *r)
{
	uint8_t key[NS_KEY_MAX];
	struct nsa_logmerge_entry6 *x;
	uint64_t h, *slot;
	int rc;

	ns_key_of(&r->s, key);
	if (!kept(m, key, NS_KEY_V6_LEN))
		return 0;
	if ((rc = reserve6(m)) != 0)
		return rc;
	h = key6_hash(key);
	slot = slot6_of(m, key, h);
	m->records++;
	if (*slot == 0) {
		x = &m->e6[m->used6++];
		memcpy(x->key, key, NS_KEY_V6_LEN);
		*slot = (uint64_t)HASH_TAG(h) << 32 | (uint32_t)m->used6;
	} else {
		x = &m->e6[SLOT_POS(*slot) - 1];
		if (r->s.epoch < x->r.s.epoch ||
		    (r->s.epoch == x->r.s.epoch &&
		     r->s.timestamp_ns < x->r.s.timestamp_ns))
			return 0;
	}
	x->r = *r;
	x->r.s.reserved[0] = (uint8_t)(m->from_checkpoint != 0);
	return 0;
}

int nsa_logmerge_record(struct nsa_logmerge *m, const struct ns_session *s)
{
	uint8_t key[NS_KEY_LEN];
	struct ns_session c = *s;
	int rc;

	ns_key_build(s->proto, &s->orig, key);

	if (ns_session_lines(s) == 2) {
		struct ns_rec r = {.s = *s, .v6 = *ns_session_v6_of(s)};

		return merge_v6(m, &r);
	}
	if (!kept(m, key, NS_KEY_LEN))
		return 0;
	if ((rc = reserve(m, 1)) != 0)
		return rc;
	c.reserved[0] = (uint8_t)(m->from_checkpoint != 0);
	merge_one(m, &c, key, key_hash(key));
	return 0;
}

/* Up to MERGE_CHUNK records of a segment, decoded, keyed and hashed
 * before any is merged, so that their buckets can be fetched ahead. */
#define MERGE_CHUNK 64
struct chunk {
	struct ns_session s[MERGE_CHUNK];
	uint8_t key[MERGE_CHUNK][NS_KEY_LEN];
	uint64_t hash[MERGE_CHUNK];
	unsigned int n;
};

/* A hint: the entry slot h points at now, when its tag matches. */
static void prefetch_entry(const struct nsa_logmerge *m, uint64_t h)
{
	uint64_t v = m->idx[h & (m->cap - 1)];

	if (v != 0 && SLOT_TAG(v) == HASH_TAG(h))
		__builtin_prefetch(&m->e[SLOT_POS(v) - 1]);
}

static int merge_chunk(struct nsa_logmerge *m, struct chunk *c)
{
	const unsigned int half = MERGE_AHEAD / 2;
	unsigned int i;
	int rc;

	if (c->n == 0)
		return 0;
	if ((rc = reserve(m, c->n)) != 0)
		return rc;
	for (i = 0; i < c->n && i < MERGE_AHEAD; i++)
		__builtin_prefetch(&m->idx[c->hash[i] & (m->cap - 1)]);
	for (i = 0; i < c->n && i < half; i++)
		prefetch_entry(m, c->hash[i]);
	for (i = 0; i < c->n; i++) {
		if (i + MERGE_AHEAD < c->n)
			__builtin_prefetch(&m->idx[c->hash[i + MERGE_AHEAD] &
						   (m->cap - 1)]);
		if (i + half < c->n)
			prefetch_entry(m, c->hash[i + half]);
		merge_one(m, &c->s[i], c->key[i], c->hash[i]);
	}
	c->n = 0;
	return 0;
}

int nsa_logmerge_segment_until(struct nsa_logmerge *m, const uint8_t *v,
			       size_t len, uint64_t until_ns)
{
	struct ns_batch_hdr h;
	struct ns_batch_iter it;
	struct chunk c;
	struct ns_rec r;
	const uint8_t *body;
	int rc = ns_batch_decode(v, len, &h, &body), it_rc;

	if (rc < 0)
		return rc;
	if (h.flags & NS_BATCH_F_STORE)
		return -EINVAL;
	/* Whoever may write the store but lacks the key cannot put records
	 * into a table: a version 1 batch signs nothing, so it is refused
	 * too. */
	if (m->batch_key_len &&
	    (h.version == NS_BATCH_V1 ||
	     ns_batch_verify(v, len, (const uint8_t *)m->batch_key,
			     m->batch_key_len) != 0))
		return -EACCES;
	if (h.sent_ns >= until_ns)
		return 0;
	ns_batch_iter_init(&it, body, h.body_len);
	c.n = 0;
	/* ns_batch_decode took every record: the iterator does not stop
	 * early. An IPv6 session is merged as it comes (its key is another,
	 * so its order against the chunk's does not matter). */
	while ((it_rc = ns_batch_iter_next_rec(&it, &r)) > 0) {
		if (ns_session_lines(&r.s) == 2) {
			if ((rc = merge_v6(m, &r)) != 0)
				return rc;
			continue;
		}
		c.s[c.n] = r.s;
		ns_key_build(c.s[c.n].proto, &c.s[c.n].orig, c.key[c.n]);
		if (!kept(m, c.key[c.n], NS_KEY_LEN))
			continue;
		c.s[c.n].reserved[0] = (uint8_t)(m->from_checkpoint != 0);
		c.hash[c.n] = key_hash(c.key[c.n]);
		if (++c.n == MERGE_CHUNK && (rc = merge_chunk(m, &c)) != 0)
			return rc;
	}
	if ((rc = merge_chunk(m, &c)) != 0)
		return rc;
	if (it_rc < 0)
		return it_rc;
	m->segments++;
	return 1;
}

int nsa_logmerge_segment(struct nsa_logmerge *m, const uint8_t *v, size_t len)
{
	int rc = nsa_logmerge_segment_until(m, v, len, UINT64_MAX);

	return rc < 0 ? rc : 0;
}

int nsa_logmerge_live(const struct ns_session *s, uint64_t now_ns)
{
	if (s->event == NS_EV_DELETE)
		return 0;
	return s->timeout_ms == 0 ||
	       s->timestamp_ns + (uint64_t)s->timeout_ms * 1000000u > now_ns;
}

/* What an emit writes: the live records, and the tombstones (from a
 * segment; from a checkpoint too unless old_too is 0) when tombstones. */
struct emit_what {
	int tombstones, old_too;
};

static uint64_t
emit(const struct nsa_logmerge *m, uint64_t now_ns, struct emit_what w,
     unsigned int (*fn)(void *arg, const struct ns_session *s, unsigned int n),
     void *arg)
{
	struct ns_session ss[EMIT_CHUNK];
	unsigned int n = 0;
	uint64_t taken = 0;
	size_t i;

	for (i = 0; i < m->used; i++) {
		const struct ns_session *s = &m->e[i].s;
		int tomb = s->event == NS_EV_DELETE && w.tombstones &&
			   (w.old_too || !s->reserved[0]);

		if (!tomb && !nsa_logmerge_live(s, now_ns))
			continue;
		ss[n] = *s;
		ss[n++].reserved[0] = 0;
		if (n == EMIT_CHUNK) {
			taken += fn(arg, ss, n);
			n = 0;
		}
	}
	if (n > 0)
		taken += fn(arg, ss, n);
	for (i = 0; i < m->used6; i++) {
		struct ns_rec r = m->e6[i].r;
		int tomb = r.s.event == NS_EV_DELETE && w.tombstones &&
			   (w.old_too || !r.s.reserved[0]);

		if (!tomb && !nsa_logmerge_live(&r.s, now_ns))
			continue;
		r.s.reserved[0] = 0;
		taken += fn(arg, &r.s, 1);
	}
	return taken;
}

uint64_t nsa_logmerge_emit(const struct nsa_logmerge *m, uint64_t now_ns,
			   unsigned int (*fn)(void *arg,
					      const struct ns_session *s,
					      unsigned int n),
			   void *arg)
{
	return emit(m, now_ns, (struct emit_what){0, 0}, fn, arg);
}

uint64_t nsa_logmerge_emit_checkpoint(
	const struct nsa_logmerge *m, uint64_t now_ns, int drop_old_tombstones,
	unsigned int (*fn)(void *arg, const struct ns_session *s,
			   unsigned int n),
	void *arg)
{
	return emit(m, now_ns, (struct emit_what){1, !drop_old_tombstones}, fn,
		    arg);
}
