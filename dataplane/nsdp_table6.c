/*
 * nsdp_table6.c - the session table's IPv6 sessions (NAT66 and NAT64):
 * a second table of the same kind beside the IPv4 one, made by
 * nsdp_table_add_v6(), that the IPv4 table's entry points hand every
 * session of an IPv6 family to.
 *
 * Its positions hold a session in two lines: the entry (seq, mark, gen
 * and the packed head, as in the IPv4 table) and the position's struct
 * ns_session_v6 with the IPv6 addresses, written under the entry's seq
 * together with the packed head, so a reader copies both or retries. The
 * indexes key the head with each IPv6 address folded to 32 bits (CRC32);
 * a lookup compares the addresses themselves, so two flows whose folds
 * collide are two entries. A NAT64 session keeps its IPv4 outside
 * addresses unfolded (its reply key is the IPv4 reply tuple).
 *
 * Invariants: the IPv6 table shares its IPv4 table's generation and
 * running resyncs (copied in before each write, the generation copied
 * back after), so a resync begun on the table covers both; its counters
 * are added to the IPv4 table's in nsdp_table_stats. The IPv4 table's
 * entries, indexes and lookups are untouched: an IPv4 session costs
 * nothing more than one family test.
 *
 * A fast path finds a NAT64 session by its IPv4 reply tuple (the reply
 * index holds the unfolded outside addresses), a NAT66 one by its IPv6
 * reply tuple (folded in the index, compared whole), and keeps
 * per-session state by the positions of the IPv6 table, as it does for
 * IPv4.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "nsdp_table_impl.h"

static uint32_t fold(const uint8_t a[16])
{
	/* rte_hash_crc loads 8 bytes at a time: an address read in place
	 * from a packet need not be 8-byte aligned. */
	uint64_t w[2];

	memcpy(w, a, sizeof(w));
	return rte_hash_crc(w, 16, IDX_HASH_SEED);
}

/* The head s with its IPv6 addresses folded: the key the indexes use. */
static struct ns_session folded(const struct ns_session *s)
{
	const struct ns_session_v6 *x = ns_session_v6_of(s);
	struct ns_session f = *s;

	f.orig.saddr = fold(x->orig_saddr);
	f.orig.daddr = fold(x->orig_daddr);
	if (s->family == NS_FAMILY_NAT66) {
		f.xlat.saddr = fold(x->xlat_saddr);
		f.xlat.daddr = fold(x->xlat_daddr);
	}
	return f;
}

/* The session a position of the IPv6 table holds, both lines. */
static void unpack6(const struct packed *p, const struct ns_session_v6 *x,
		    struct ns_rec *r)
{
	packed_unpack(p, &r->s);
	r->s.family = p->flags & FLAG_NAT64 ? NS_FAMILY_NAT64 : NS_FAMILY_NAT66;
	r->s.orig.saddr = r->s.orig.daddr = 0;
	if (r->s.family == NS_FAMILY_NAT66)
		r->s.xlat.saddr = r->s.xlat.daddr = 0;
	r->v6 = *x;
}

static struct nsdp_table *enter(struct nsdp_table *t)
{
	struct nsdp_table *v6 = t->v6;

	v6->gen = t->gen;
	v6->active_resyncs = t->active_resyncs;
	return v6;
}

static void leave(struct nsdp_table *t)
{
	__atomic_store_n(&t->gen, t->v6->gen, __ATOMIC_RELAXED);
}

int nsdp_table_add_v6(struct nsdp_table *t, uint32_t capacity)
{
	struct nsdp_table *v6;

	if (t->ext || t->v6)
		return -EEXIST;
	v6 = nsdp_table_create("nsdp_table_v6", capacity);
	if (!v6)
		return -errno;
	v6->ext = rte_zmalloc_socket("nsdp_table_v6_lines",
				     (size_t)capacity *
					     sizeof(struct ns_session_v6),
				     RTE_CACHE_LINE_SIZE, (int)rte_socket_id());
	if (!v6->ext) {
		nsdp_table_free(v6);
		return -ENOMEM;
	}
	v6->memory_bytes += (uint64_t)capacity * sizeof(struct ns_session_v6);
	t->v6 = v6;
	return 0;
}

void nsdp_table6_free(struct nsdp_table *t)
{
	if (!t->v6)
		return;
	rte_free(t->v6->ext);
	t->v6->ext = NULL;
	nsdp_table_free(t->v6);
	t->v6 = NULL;
}

static int apply6(struct nsdp_table *t, const struct ns_session *s,
		  int32_t *pos, int over)
{
	struct ns_session f;
	int rc;

	*pos = -1;
	if (!t->v6) {
		NSDP_STAT_INC(t->full_drops);
		return -EAFNOSUPPORT;
	}
	f = folded(s);
	rc = nsdp_table_apply_x(enter(t), &f, ns_session_v6_of(s), pos, over);
	leave(t);
	return rc;
}

int nsdp_table6_apply(struct nsdp_table *t, const struct ns_session *s,
		      int over)
{
	int32_t pos;

	return apply6(t, s, &pos, over);
}

int nsdp_table_apply_pos_v6(struct nsdp_table *t, const struct ns_session *s,
			    int32_t *pos)
{
	if (!ns_family_is_v6(s->family)) {
		*pos = -1;
		return -EAFNOSUPPORT;
	}
	return apply6(t, s, pos, 0);
}

int nsdp_table_remove_v6(struct nsdp_table *t, uint32_t pos)
{
	struct nsdp_table *v6 = t->v6;

	if (!v6 || pos >= v6->used_end ||
	    packed_state(&v6->entries[pos].u.p) == ENTRY_FREE)
		return -ENOENT;
	enter(t);
	nsdp_table_entry_remove(v6, pos);
	NSDP_STAT_INC(v6->gen);
	leave(t);
	return 0;
}

int nsdp_table6_apply_resync(struct nsdp_table *t, const struct ns_session *s,
			     uint64_t gen, uint32_t mark)
{
	struct ns_session f;
	int rc;

	if (!t->v6) {
		NSDP_STAT_INC(t->full_drops);
		return -EAFNOSUPPORT;
	}
	f = folded(s);
	rc = nsdp_table_resync_x(enter(t), &f, ns_session_v6_of(s), gen, mark);
	leave(t);
	return rc;
}

uint64_t nsdp_table6_purge_slice(struct nsdp_table *t, uint32_t slices)
{
	uint64_t n;

	if (!t->v6)
		return 0;
	n = nsdp_table_purge_slice(enter(t), slices);
	leave(t);
	return n;
}

uint64_t nsdp_table6_resync_finish(
	struct nsdp_table *t, uint64_t gen, uint32_t mark,
	const uint8_t *in_scope,
	void (*removed_fn)(const struct ns_session *s, void *arg), void *arg)
{
	struct nsdp_table *v6 = t->v6;
	uint64_t removed = 0;
	uint32_t i;

	if (!v6)
		return 0;
	enter(t);
	for (i = 0; i < v6->used_end; i++) {
		const struct entry *e = &v6->entries[i];

		if (packed_state(&e->u.p) != ENTRY_LIVE || e->mark == mark ||
		    e->gen > gen || !in_scope[e->u.p.slot])
			continue;
		if (removed_fn) {
			struct ns_rec r;

			unpack6(&e->u.p, &v6->ext[i], &r);
			removed_fn(&r.s, arg);
		}
		nsdp_table_entry_remove(v6, i);
		removed++;
	}
	leave(t);
	return removed;
}

uint64_t nsdp_table6_walk(const struct nsdp_table *t,
			  void (*fn)(const struct ns_session *, void *),
			  void *arg)
{
	const struct nsdp_table *v6 = t->v6;
	struct ns_rec r;
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; v6 && i < v6->used_end; i++) {
		if (packed_state(&v6->entries[i].u.p) != ENTRY_LIVE)
			continue;
		unpack6(&v6->entries[i].u.p, &v6->ext[i], &r);
		fn(&r.s, arg);
		n++;
	}
	return n;
}

uint32_t nsdp_table_positions_v6(const struct nsdp_table *t)
{
	return t->v6 ? t->v6->capacity : 0;
}

int nsdp_table_at_v6(const struct nsdp_table *t, uint32_t pos,
		     struct ns_rec *out)
{
	const struct nsdp_table *v6 = t->v6;

	if (!v6 || pos >= v6->used_end ||
	    packed_state(&v6->entries[pos].u.p) != ENTRY_LIVE)
		return -ENOENT;
	unpack6(&v6->entries[pos].u.p, &v6->ext[pos], out);
	return 0;
}

/* How find6() probes: the flows index by inside tuple, or the replies
 * index for a NAT64 or a NAT66 session's reply tuple. */
enum find6_by { BY_FLOW, BY_REPLY64, BY_REPLY66 };

/* Whether the session at (p, x) is the one find6() looks for by key, with
 * the whole addresses saddr and daddr (BY_FLOW, BY_REPLY66). */
static int find6_hit(enum find6_by by, const struct packed *p,
		     const struct ns_session_v6 *x, const struct ns_tuple *key,
		     const uint8_t *saddr, const uint8_t *daddr)
{
	switch (by) {
	case BY_FLOW:
		return ns_tuple_equal(&p->orig, key) &&
		       memcmp(x->orig_saddr, saddr, 16) == 0 &&
		       memcmp(x->orig_daddr, daddr, 16) == 0;
	case BY_REPLY64:
		return (p->flags & FLAG_NAT64) && reply_matches(p, key);
	default:
		return !(p->flags & FLAG_NAT64) && reply_matches(p, key) &&
		       memcmp(x->xlat_daddr, saddr, 16) == 0 &&
		       memcmp(x->xlat_saddr, daddr, 16) == 0;
	}
}

/* Probe the IPv6 table for key (IPv6 addresses folded) as by says, the
 * whole addresses being saddr and daddr (NULL for BY_REPLY64). */
static int32_t find6(const struct nsdp_table *v6, uint8_t proto,
		     enum find6_by by, const struct ns_tuple *key,
		     const uint8_t *saddr, const uint8_t *daddr,
		     struct ns_rec *out)
{
	const struct idx_bucket *index =
		by == BY_FLOW ? v6->flows : v6->replies;
	uint32_t h = key_hash(proto, key);
	uint32_t b = home_bucket(v6, h), n;

	for (n = 0; n < v6->n_buckets; n++) {
		const struct idx_bucket *bk = &index[b];
		uint32_t m = sig_match(bk, (uint16_t)h);

		while (m) {
			uint32_t w = (uint32_t)__builtin_ctz(m), ref;
			union packed_words u;
			union ext_words x;

			m &= m - 1;
			ref = __atomic_load_n(&bk->ref[w], __ATOMIC_ACQUIRE);
			if (ref == 0)
				continue;
			entry_read_ext(&v6->entries[ref - 1], &u,
				       &v6->ext[ref - 1], &x);
			if (packed_state(&u.p) != ENTRY_LIVE ||
			    u.p.proto != proto)
				continue;
			if (find6_hit(by, &u.p, &x.x, key, saddr, daddr)) {
				unpack6(&u.p, &x.x, out);
				return (int32_t)(ref - 1);
			}
		}
		if (__atomic_load_n(&bk->passed, __ATOMIC_ACQUIRE) == 0)
			break;
		b = next_bucket(v6, b);
	}
	return -ENOENT;
}

/* find6() by a tuple of whole IPv6 addresses (flow or NAT66 reply). */
static int32_t find6_whole(const struct nsdp_table *t, uint8_t proto,
			   enum find6_by by, const uint8_t saddr[16],
			   uint16_t sport, const uint8_t daddr[16],
			   uint16_t dport, struct ns_rec *out)
{
	struct ns_tuple key = {.saddr = fold(saddr),
			       .daddr = fold(daddr),
			       .sport = sport,
			       .dport = dport};

	if (!t->v6)
		return -ENOENT;
	return find6(t->v6, proto, by, &key, saddr, daddr, out);
}

int32_t nsdp_table_find_v6(const struct nsdp_table *t, uint8_t proto,
			   const uint8_t saddr[16], uint16_t sport,
			   const uint8_t daddr[16], uint16_t dport,
			   struct ns_rec *out)
{
	return find6_whole(t, proto, BY_FLOW, saddr, sport, daddr, dport, out);
}

int nsdp_table_lookup_v6(const struct nsdp_table *t, uint8_t proto,
			 const uint8_t saddr[16], uint16_t sport,
			 const uint8_t daddr[16], uint16_t dport,
			 struct ns_rec *out)
{
	return nsdp_table_find_v6(t, proto, saddr, sport, daddr, dport, out) < 0
		       ? -ENOENT
		       : 0;
}

int32_t nsdp_table_find_reply64(const struct nsdp_table *t, uint8_t proto,
				const struct ns_tuple *reply,
				struct ns_rec *out)
{
	if (!t->v6)
		return -ENOENT;
	return find6(t->v6, proto, BY_REPLY64, reply, NULL, NULL, out);
}

int32_t nsdp_table_find_reply66(const struct nsdp_table *t, uint8_t proto,
				const uint8_t saddr[16], uint16_t sport,
				const uint8_t daddr[16], uint16_t dport,
				struct ns_rec *out)
{
	return find6_whole(t, proto, BY_REPLY66, saddr, sport, daddr, dport,
			   out);
}
