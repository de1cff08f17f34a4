/*
 * nsdp_table.c - the gateway's session table (see nsdp_table.h).
 *
 * Two DPDK rte_hash tables created with RW_CONCURRENCY_LF: one keyed by
 * {proto, orig tuple} whose key position indexes a parallel array of
 * entries, and one keyed by the reply tuple {proto, remote, outside} whose
 * data is the same entry position. One thread writes (the standby
 * subscriber); any number of fast-path threads read without locks.
 *
 * Invariants
 * - Each entry is published through a sequence counter (a hand-rolled
 *   seqlock; DPDK 22.11's rte_seqlock is experimental and carries a
 *   spinlock a single writer does not need): the writer makes the counter
 *   odd, stores the session and state with relaxed atomics, and makes it
 *   even again with release order. Readers copy, then re-check the counter,
 *   so they never return a torn entry.
 * - Readers also check that the entry they copied is live and carries the
 *   key they looked up: a position removed from the hash may be reused for
 *   another flow while a reader still holds it.
 * - Removed positions go back to rte_hash only after a grace period
 *   (NSDP_TABLE_GRACE_NS) so that readers rarely meet a reused position.
 * - An entry's gen is the table generation of its last live change (or the
 *   start generation of the resync that last wrote it), so "changed since
 *   gen" is entry.gen > gen.
 * - A delete leaves a tombstone that keeps the delete's epoch and
 *   timestamp; tombstones are purged only while no resync is running.
 *
 * Not done here: expiry of idle sessions (the store's TTL and the active's
 * deletes do that), multi-writer updates.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>

#include "ns_record.h"
#include "ns_slot.h"
#include "nsdp_table.h"

/* How long a removed position stays out of the hash's free list. */
#define NSDP_TABLE_GRACE_NS (50ull * 1000 * 1000)
/* Marks a reply-hash position in the pending-free lists. */
#define PEND_REPLY 0x80000000u

enum entry_state { ENTRY_FREE = 0, ENTRY_LIVE = 1, ENTRY_TOMB = 2 };

struct flow_key {
	uint8_t proto;
	uint8_t pad[3];
	struct ns_tuple orig;
};

struct reply_key {
	uint8_t proto;
	uint8_t pad[3];
	uint32_t remote_addr;
	uint32_t outside_addr;
	uint16_t remote_port;
	uint16_t outside_port;
};

_Static_assert(sizeof(struct flow_key) == 16, "flow key is 16 bytes");
_Static_assert(sizeof(struct reply_key) == 16, "reply key is 16 bytes");

#define SESSION_WORDS (sizeof(struct ns_session) / sizeof(uint64_t))

struct entry {
	uint32_t seq; /* odd while the writer changes the entry */
	uint8_t state;
	uint8_t has_reply; /* the reply hash holds this entry's reply key */
	uint16_t slot;
	uint32_t mark;
	uint32_t pad;
	uint64_t gen;
	union {
		struct ns_session s;
		uint64_t w[SESSION_WORDS];
	} u;
};

struct pending {
	uint32_t *pos;
	uint32_t n;
	uint64_t since;
};

struct nsdp_table {
	struct rte_hash *flows;
	struct rte_hash *replies;
	struct entry *entries;
	uint32_t n_entries;
	uint32_t capacity;
	uint64_t gen;
	uint32_t active_resyncs;
	struct pending pend[2]; /* [0] aging, [1] fresh */
	uint32_t pend_cap;
	/* read by other threads with relaxed atomics */
	uint64_t live, tombstones, applied, stale_ignored, full_drops;
	uint64_t memory_bytes;
};

#define STAT_ADD(t, f, v) \
	__atomic_store_n(&(t)->f, (t)->f + (v), __ATOMIC_RELAXED)
#define STAT_SUB(t, f, v) \
	__atomic_store_n(&(t)->f, (t)->f - (v), __ATOMIC_RELAXED)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

static void flow_key_make(struct flow_key *k, uint8_t proto,
			  const struct ns_tuple *orig)
{
	memset(k, 0, sizeof(*k));
	k->proto = proto;
	k->orig = *orig;
}

static void reply_key_make(struct reply_key *k, const struct ns_session *s)
{
	memset(k, 0, sizeof(*k));
	k->proto = s->proto;
	k->remote_addr = s->xlat.daddr;
	k->remote_port = s->xlat.dport;
	k->outside_addr = s->xlat.saddr;
	k->outside_port = s->xlat.sport;
}

static void reply_key_from_tuple(struct reply_key *k, uint8_t proto,
				 const struct ns_tuple *reply)
{
	/* Return traffic comes from the remote (saddr) to the outside
	 * address (daddr). */
	memset(k, 0, sizeof(*k));
	k->proto = proto;
	k->remote_addr = reply->saddr;
	k->remote_port = reply->sport;
	k->outside_addr = reply->daddr;
	k->outside_port = reply->dport;
}

static int tuple_equal(const struct ns_tuple *a, const struct ns_tuple *b)
{
	return a->saddr == b->saddr && a->daddr == b->daddr &&
	       a->sport == b->sport && a->dport == b->dport;
}

/* Writer side of the seqlock: publish session and state of e. */
static void entry_publish(struct entry *e, const struct ns_session *s,
			  uint8_t state)
{
	uint32_t seq = e->seq;
	union {
		struct ns_session s;
		uint64_t w[SESSION_WORDS];
	} src;
	size_t i;

	src.s = *s;
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < SESSION_WORDS; i++)
		__atomic_store_n(&e->u.w[i], src.w[i], __ATOMIC_RELAXED);
	__atomic_store_n(&e->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

static void entry_set_state(struct entry *e, uint8_t state)
{
	uint32_t seq = e->seq;

	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Reader side: a consistent copy of e's session; returns its state. */
static uint8_t entry_read(const struct entry *e, struct ns_session *out)
{
	union {
		struct ns_session s;
		uint64_t w[SESSION_WORDS];
	} dst;
	uint32_t s1, s2;
	uint8_t state;
	size_t i;

	for (;;) {
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1) {
			rte_pause();
			continue;
		}
		for (i = 0; i < SESSION_WORDS; i++)
			dst.w[i] =
				__atomic_load_n(&e->u.w[i], __ATOMIC_RELAXED);
		state = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
		if (s1 == s2)
			break;
	}
	*out = dst.s;
	return state;
}

static void pending_reclaim(struct nsdp_table *t, int force)
{
	struct pending *aging = &t->pend[0], *fresh = &t->pend[1];
	uint64_t now = mono_ns();
	uint32_t i;

	if (aging->n && (force || now - aging->since >= NSDP_TABLE_GRACE_NS)) {
		for (i = 0; i < aging->n; i++) {
			uint32_t p = aging->pos[i];

			if (p & PEND_REPLY)
				rte_hash_free_key_with_position(
					t->replies, (int32_t)(p & ~PEND_REPLY));
			else
				rte_hash_free_key_with_position(t->flows,
								(int32_t)p);
		}
		aging->n = 0;
	}
	if (aging->n == 0 && fresh->n) {
		struct pending tmp = *aging;

		*aging = *fresh;
		*fresh = tmp;
		fresh->n = 0;
		if (force)
			pending_reclaim(t, 1);
	}
}

static void pending_add(struct nsdp_table *t, uint32_t p)
{
	struct pending *fresh = &t->pend[1];

	if (fresh->n == t->pend_cap)
		pending_reclaim(t, 1);
	if (fresh->n == 0)
		fresh->since = mono_ns();
	fresh->pos[fresh->n++] = p;
}

struct nsdp_table *nsdp_table_create(const char *name, uint32_t capacity)
{
	struct rte_hash_parameters hp = {
		.key_len = sizeof(struct flow_key),
		.hash_func = rte_hash_crc,
		.socket_id = (int)rte_socket_id(),
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF |
			      RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	char hname[RTE_HASH_NAMESIZE];
	struct nsdp_table *t;
	size_t before;
	int32_t max_id;

	if (!name || capacity == 0 || capacity >= PEND_REPLY / 2) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	before = heap_allocated();
	t->capacity = capacity;
	hp.entries = capacity < 8 ? 8 : capacity;

	snprintf(hname, sizeof(hname), "%.20s_o", name);
	hp.name = hname;
	t->flows = rte_hash_create(&hp);
	snprintf(hname, sizeof(hname), "%.20s_r", name);
	t->replies = t->flows ? rte_hash_create(&hp) : NULL;
	if (!t->flows || !t->replies)
		goto fail;

	max_id = rte_hash_max_key_id(t->flows);
	if (max_id < 0)
		goto fail;
	t->n_entries = (uint32_t)max_id + 1;
	t->entries =
		rte_zmalloc_socket("nsdp_table_entries",
				   (size_t)t->n_entries * sizeof(struct entry),
				   RTE_CACHE_LINE_SIZE, hp.socket_id);
	t->pend_cap = 2 * (t->n_entries + 1);
	t->pend[0].pos = rte_malloc("nsdp_table_pend",
				    t->pend_cap * sizeof(uint32_t), 0);
	t->pend[1].pos = rte_malloc("nsdp_table_pend",
				    t->pend_cap * sizeof(uint32_t), 0);
	if (!t->entries || !t->pend[0].pos || !t->pend[1].pos)
		goto fail;
	t->memory_bytes = heap_allocated() - before;
	return t;
fail:
	nsdp_table_free(t);
	errno = ENOMEM;
	return NULL;
}

void nsdp_table_free(struct nsdp_table *t)
{
	if (!t)
		return;
	rte_hash_free(t->flows);
	rte_hash_free(t->replies);
	rte_free(t->entries);
	rte_free(t->pend[0].pos);
	rte_free(t->pend[1].pos);
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

/* Remove e's reply key if the reply hash still maps it to e. */
static void reply_unlink(struct nsdp_table *t, struct entry *e, uint32_t pos)
{
	struct reply_key rk;
	void *data;
	int32_t rpos;

	if (!e->has_reply)
		return;
	e->has_reply = 0;
	reply_key_make(&rk, &e->u.s);
	if (rte_hash_lookup_data(t->replies, &rk, &data) < 0 ||
	    (uint32_t)(uintptr_t)data != pos)
		return;
	rpos = rte_hash_del_key(t->replies, &rk);
	if (rpos >= 0)
		pending_add(t, (uint32_t)rpos | PEND_REPLY);
}

static void reply_link(struct nsdp_table *t, struct entry *e, uint32_t pos)
{
	struct reply_key rk;

	reply_key_make(&rk, &e->u.s);
	if (rte_hash_add_key_data(t->replies, &rk, (void *)(uintptr_t)pos) ==
	    -ENOSPC) {
		pending_reclaim(t, 1);
		if (rte_hash_add_key_data(t->replies, &rk,
					  (void *)(uintptr_t)pos) < 0)
			return;
	}
	e->has_reply = 1;
}

static int32_t flow_add(struct nsdp_table *t, const struct flow_key *k)
{
	int32_t pos = rte_hash_add_key(t->flows, k);

	if (pos == -ENOSPC && (t->pend[0].n || t->pend[1].n)) {
		pending_reclaim(t, 1);
		pos = rte_hash_add_key(t->flows, k);
	}
	return pos;
}

static int session_older(const struct ns_session *a, const struct ns_session *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch;
	return a->timestamp_ns < b->timestamp_ns;
}

/* Store s into entry pos (new or existing) and keep the reply hash in
 * step; gen is the entry's new generation. */
static void entry_write(struct nsdp_table *t, uint32_t pos, int is_new,
			const struct ns_session *s, uint64_t gen, uint16_t slot)
{
	struct entry *e = &t->entries[pos];
	uint8_t old_state = is_new ? ENTRY_FREE : e->state;
	uint8_t state = s->event == NS_EV_DELETE ? ENTRY_TOMB : ENTRY_LIVE;
	int xlat_same = !is_new && old_state == ENTRY_LIVE &&
			state == ENTRY_LIVE &&
			tuple_equal(&e->u.s.xlat, &s->xlat);

	if (!is_new && !xlat_same)
		reply_unlink(t, e, pos);
	entry_publish(e, s, state);
	e->gen = gen;
	e->slot = slot;
	if (state == ENTRY_LIVE && !xlat_same)
		reply_link(t, e, pos);

	if (old_state == ENTRY_LIVE)
		STAT_SUB(t, live, 1);
	else if (old_state == ENTRY_TOMB)
		STAT_SUB(t, tombstones, 1);
	if (state == ENTRY_LIVE)
		STAT_ADD(t, live, 1);
	else
		STAT_ADD(t, tombstones, 1);
}

int nsdp_table_apply(struct nsdp_table *t, const struct ns_session *s)
{
	int32_t pos;

	return nsdp_table_apply_pos(t, s, &pos);
}

int nsdp_table_apply_pos(struct nsdp_table *t, const struct ns_session *s,
			 int32_t *posp)
{
	uint8_t keybuf[NS_KEY_LEN];
	struct flow_key k;
	struct entry *e;
	int32_t pos;
	int is_new = 0;

	*posp = -1;
	flow_key_make(&k, s->proto, &s->orig);
	pos = rte_hash_lookup(t->flows, &k);
	if (pos < 0) {
		pos = flow_add(t, &k);
		if (pos < 0) {
			if (s->event == NS_EV_DELETE)
				return 0; /* nothing to delete, no room to
					     remember it */
			STAT_ADD(t, full_drops, 1);
			return -ENOSPC;
		}
		is_new = 1;
	}
	e = &t->entries[pos];
	*posp = pos;
	if (!is_new && session_older(s, &e->u.s)) {
		STAT_ADD(t, stale_ignored, 1);
		return 0;
	}
	ns_key_build(s->proto, &s->orig, keybuf);
	entry_write(t, (uint32_t)pos, is_new, s, t->gen + 1,
		    ns_key_slot(keybuf, NS_KEY_LEN));
	__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELAXED);
	STAT_ADD(t, applied, 1);
	return 0;
}

int nsdp_table_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			    uint64_t gen, uint32_t mark)
{
	uint8_t keybuf[NS_KEY_LEN];
	struct flow_key k;
	struct entry *e;
	int32_t pos;
	int is_new = 0;

	flow_key_make(&k, s->proto, &s->orig);
	pos = rte_hash_lookup(t->flows, &k);
	if (pos < 0) {
		pos = flow_add(t, &k);
		if (pos < 0) {
			STAT_ADD(t, full_drops, 1);
			return -ENOSPC;
		}
		is_new = 1;
	}
	e = &t->entries[pos];
	if (!is_new) {
		if (e->gen > gen)
			return 0; /* a live record won since the resync began */
		e->mark = mark;
		if (session_older(s, &e->u.s)) {
			STAT_ADD(t, stale_ignored, 1);
			return 0;
		}
	}
	ns_key_build(s->proto, &s->orig, keybuf);
	entry_write(t, (uint32_t)pos, is_new, s, gen,
		    ns_key_slot(keybuf, NS_KEY_LEN));
	e->mark = mark;
	STAT_ADD(t, applied, 1);
	return 0;
}

static void entry_remove(struct nsdp_table *t, uint32_t pos)
{
	struct entry *e = &t->entries[pos];
	struct flow_key k;
	int32_t p;

	if (e->state == ENTRY_LIVE) {
		reply_unlink(t, e, pos);
		STAT_SUB(t, live, 1);
	} else {
		STAT_SUB(t, tombstones, 1);
	}
	entry_set_state(e, ENTRY_FREE);
	flow_key_make(&k, e->u.s.proto, &e->u.s.orig);
	p = rte_hash_del_key(t->flows, &k);
	if (p >= 0)
		pending_add(t, (uint32_t)p);
}

uint64_t nsdp_table_purge_tombstones(struct nsdp_table *t)
{
	uint64_t n = 0;
	uint32_t i;

	if (t->active_resyncs == 0 && t->tombstones) {
		for (i = 0; i < t->n_entries; i++) {
			if (t->entries[i].state == ENTRY_TOMB) {
				entry_remove(t, i);
				n++;
			}
		}
	}
	pending_reclaim(t, 0);
	return n;
}

uint64_t nsdp_table_resync_finish(struct nsdp_table *t, uint64_t gen,
				  uint32_t mark, const uint8_t *in_scope)
{
	uint64_t removed = 0;
	uint32_t i;

	for (i = 0; i < t->n_entries; i++) {
		struct entry *e = &t->entries[i];

		if (e->state != ENTRY_LIVE || !in_scope[e->slot] ||
		    e->gen > gen || e->mark == mark)
			continue;
		entry_remove(t, i);
		removed++;
	}
	nsdp_table_resync_abort(t);
	nsdp_table_purge_tombstones(t);
	return removed;
}

int32_t nsdp_table_find(const struct nsdp_table *t, uint8_t proto,
			const struct ns_tuple *orig, struct ns_session *out)
{
	struct ns_session s;
	struct flow_key k;
	int32_t pos;

	flow_key_make(&k, proto, orig);
	pos = rte_hash_lookup(t->flows, &k);
	if (pos < 0 || (uint32_t)pos >= t->n_entries)
		return -ENOENT;
	if (entry_read(&t->entries[pos], &s) != ENTRY_LIVE ||
	    s.proto != proto || !tuple_equal(&s.orig, orig))
		return -ENOENT;
	*out = s;
	return pos;
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
	struct reply_key rk, check;
	struct ns_session s;
	void *data;
	uint32_t pos;

	reply_key_from_tuple(&rk, proto, reply);
	if (rte_hash_lookup_data(t->replies, &rk, &data) < 0)
		return -ENOENT;
	pos = (uint32_t)(uintptr_t)data;
	if (pos >= t->n_entries ||
	    entry_read(&t->entries[pos], &s) != ENTRY_LIVE)
		return -ENOENT;
	reply_key_make(&check, &s);
	if (memcmp(&check, &rk, sizeof(rk)) != 0)
		return -ENOENT;
	*out = s;
	return (int32_t)pos;
}

int nsdp_table_lookup_reply(const struct nsdp_table *t, uint8_t proto,
			    const struct ns_tuple *reply,
			    struct ns_session *out)
{
	return nsdp_table_find_reply(t, proto, reply, out) < 0 ? -ENOENT : 0;
}

uint32_t nsdp_table_positions(const struct nsdp_table *t)
{
	return t->n_entries;
}

int nsdp_table_at(const struct nsdp_table *t, uint32_t pos,
		  struct ns_session *out)
{
	if (pos >= t->n_entries || t->entries[pos].state != ENTRY_LIVE)
		return -ENOENT;
	*out = t->entries[pos].u.s;
	return 0;
}

int nsdp_table_remove(struct nsdp_table *t, uint8_t proto,
		      const struct ns_tuple *orig)
{
	struct flow_key k;
	int32_t pos;

	flow_key_make(&k, proto, orig);
	pos = rte_hash_lookup(t->flows, &k);
	if (pos < 0 || (uint32_t)pos >= t->n_entries ||
	    t->entries[pos].state == ENTRY_FREE)
		return -ENOENT;
	entry_remove(t, (uint32_t)pos);
	__atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELAXED);
	pending_reclaim(t, 0);
	return 0;
}

uint64_t nsdp_table_walk(const struct nsdp_table *t,
			 void (*fn)(const struct ns_session *, void *),
			 void *arg)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < t->n_entries; i++) {
		if (t->entries[i].state != ENTRY_LIVE)
			continue;
		fn(&t->entries[i].u.s, arg);
		n++;
	}
	return n;
}

int64_t nsdp_table_dump(const struct nsdp_table *t, const char *path)
{
	uint8_t rec[NS_RECORD_MAX_LEN];
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
	for (i = 0; i < t->n_entries && !err; i++) {
		int len;

		if (t->entries[i].state != ENTRY_LIVE)
			continue;
		len = ns_record_encode(&t->entries[i].u.s, rec, sizeof(rec));
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
