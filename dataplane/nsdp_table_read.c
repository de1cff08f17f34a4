/*
 * nsdp_table_read.c - the readers' side of the session table: lookups by
 * inside tuple and by reply tuple, one at a time or a burst at once, and
 * the writer's walks over the entries (at, walk, dump: the IPv6 table's
 * sessions too) and counters.
 *
 * Invariants: lookups take no lock and never return a torn or reused
 * entry (see nsdp_table.c); a burst lookup returns what the single
 * lookups would, it only orders its memory accesses so that the misses of
 * the burst overlap.
 *
 * Not here: any write to the table.
 */
#include <errno.h>
#include <stdio.h>

#include <rte_prefetch.h>

#include "nsdp_dump.h"
#include "nsdp_table_impl.h"

/* ---- lookups ------------------------------------------------------ */

/* Probe one index (flows, or replies when by_reply) for the live session
 * of proto whose inside tuple (or reply tuple) is key, of hash h. Inlined into both
 * finds with by_reply constant, so neither pays for the other's test. */
static __rte_always_inline int32_t idx_find(const struct nsdp_table *t,
					    int by_reply, uint32_t h,
					    uint8_t proto,
					    const struct ns_tuple *key,
					    struct ns_session *out)
{
	const struct idx_bucket *index = by_reply ? t->replies : t->flows;
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
				      : ns_tuple_equal(&u.p.orig, key))) {
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
	return idx_find(t, 0, key_hash(proto, orig), proto, orig, out);
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
	return idx_find(t, 1, key_hash(proto, reply), proto, reply, out);
}

int nsdp_table_lookup_reply(const struct nsdp_table *t, uint8_t proto,
			    const struct ns_tuple *reply,
			    struct ns_session *out)
{
	return nsdp_table_find_reply(t, proto, reply, out) < 0 ? -ENOENT : 0;
}

/* Prefetch the entries the ways of bk with signature sig point to. */
static inline void entries_prefetch(const struct nsdp_table *t,
				    const struct idx_bucket *bk, uint16_t sig)
{
	uint32_t m = sig_match(bk, sig);

	while (m) {
		uint32_t w = (uint32_t)__builtin_ctz(m);
		uint32_t ref = __atomic_load_n(&bk->ref[w], __ATOMIC_RELAXED);

		m &= m - 1;
		if (ref)
			rte_prefetch0(&t->entries[ref - 1]);
	}
}

/* One pass of at most NSDP_TABLE_BULK keys, by_reply constant. */
static __rte_always_inline void find_pass(const struct nsdp_table *t,
					  int by_reply, const uint8_t *proto,
					  const struct ns_tuple *key,
					  unsigned int n, int32_t *pos,
					  struct ns_session *out)
{
	const struct idx_bucket *index = by_reply ? t->replies : t->flows;
	uint32_t h[NSDP_TABLE_BULK];
	unsigned int i;

	for (i = 0; i < n; i++) {
		h[i] = key_hash(proto[i], &key[i]);
		rte_prefetch0(&index[home_bucket(t, h[i])]);
	}
	for (i = 0; i < n; i++)
		entries_prefetch(t, &index[home_bucket(t, h[i])],
				 (uint16_t)h[i]);
	for (i = 0; i < n; i++)
		pos[i] =
			idx_find(t, by_reply, h[i], proto[i], &key[i], &out[i]);
}

void nsdp_table_find_bulk(const struct nsdp_table *t, int by_reply,
			  const uint8_t *proto, const struct ns_tuple *key,
			  unsigned int n, int32_t *pos, struct ns_session *out)
{
	unsigned int done, k;

	for (done = 0; done < n; done += k) {
		k = RTE_MIN(n - done, NSDP_TABLE_BULK);
		if (by_reply)
			find_pass(t, 1, proto + done, key + done, k, pos + done,
				  out + done);
		else
			find_pass(t, 0, proto + done, key + done, k, pos + done,
				  out + done);
	}
}

/* ---- the writer's walks and the counters -------------------------- */

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
	return n + nsdp_table6_walk(t, fn, arg);
}

static uint64_t table_walk(const void *t,
			   void (*fn)(const struct ns_session *, void *),
			   void *arg)
{
	return nsdp_table_walk(t, fn, arg);
}

int64_t nsdp_table_dump(const struct nsdp_table *t, const char *path)
{
	return nsdp_dump_write(path, table_walk, t);
}

void nsdp_table_stats(const struct nsdp_table *t, struct nsdp_table_stats *s)
{
	const struct nsdp_table *v6 = t->v6;

	s->live = NSDP_STAT_READ(t->live);
	s->tombstones = NSDP_STAT_READ(t->tombstones);
	s->applied = NSDP_STAT_READ(t->applied);
	s->stale_ignored = NSDP_STAT_READ(t->stale_ignored);
	s->full_drops = NSDP_STAT_READ(t->full_drops);
	s->memory_bytes = t->memory_bytes;
	s->live_v6 = v6 ? NSDP_STAT_READ(v6->live) : 0;
	s->capacity_v6 = v6 ? v6->capacity : 0;
	s->memory_bytes_v6 = v6 ? v6->memory_bytes : 0;
	if (!v6)
		return;
	s->live += s->live_v6;
	s->tombstones += NSDP_STAT_READ(v6->tombstones);
	s->applied += NSDP_STAT_READ(v6->applied);
	s->stale_ignored += NSDP_STAT_READ(v6->stale_ignored);
	s->full_drops += NSDP_STAT_READ(v6->full_drops);
	s->memory_bytes += v6->memory_bytes;
}
