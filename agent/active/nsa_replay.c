/*
 * nsa_replay.c - the replay window and the resend queue of one writer.
 *
 * A master acknowledges a write before its replica has it, so a master that
 * dies may take acknowledged records with it when its replica is promoted.
 * The window keeps the records acknowledged in the last replay_ms (at most
 * replay_records, oldest leaving first); after a lost master the writer
 * merges them with its unacknowledged records in opening order (wseq), so
 * every flow's records go out again oldest first and its newest is last.
 *
 * Invariants:
 * - The window is a suffix in wseq order: once a record of a batch left,
 *   floor passes that batch and no record of it or an earlier one is
 *   replayed.
 * - A resend goes ahead of what an earlier resend still had queued.
 *
 * Not here: when to trim (the writer decides the cutoff from the masters'
 * liveness, and freezes the window while it retries) and the counters.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "nsa_replay.h"

int nsa_replay_init(struct nsa_replay *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	if (cap == 0)
		return 0;
	/* Pages are touched only as the window fills. */
	r->rp = malloc(cap * sizeof(*r->rp));
	r->v6 = malloc(cap * sizeof(*r->v6));
	if (r->rp == NULL || r->v6 == NULL) {
		free(r->rp);
		free(r->v6);
		r->rp = NULL;
		r->v6 = NULL;
		return -ENOMEM;
	}
	r->cap = cap;
	return 0;
}

void nsa_replay_fini(struct nsa_replay *r)
{
	free(r->rp);
	free(r->v6);
	memset(r, 0, sizeof(*r));
}

/* Returns 1 when the record that left was acknowledged at or after cutoff. */
static int replay_evict(struct nsa_replay *r, uint64_t cutoff)
{
	const struct nsa_replay_rec *old = &r->rp[r->head];
	int early = old->acked_ns >= cutoff;

	if (old->wseq + 1 > r->floor)
		r->floor = old->wseq + 1;
	if (++r->head == r->cap)
		r->head = 0;
	r->count--;
	return early;
}

void nsa_replay_trim(struct nsa_replay *r, uint64_t cutoff)
{
	while (r->count > 0 && r->rp[r->head].acked_ns < cutoff)
		replay_evict(r, cutoff);
}

/* The window is megabytes written once and read back only after a lost
 * master (and its oldest record's time as it leaves): streaming stores
 * skip reading each line in before it is written, and keep the window
 * from evicting the writer's own working set. The writer's thread alone
 * reads the window, which sees its own stores in order. */
static void rec_write(struct nsa_replay_rec *rec, const struct ns_session *s,
		      uint64_t wseq, uint64_t acked_ns)
{
#ifdef __SSE2__
	_Static_assert(sizeof(*rec) == 80 && sizeof(*s) == 64 &&
			       offsetof(struct nsa_replay_rec, wseq) == 64 &&
			       offsetof(struct nsa_replay_rec, acked_ns) == 72,
		       "a replay record is five 16-byte stores");
	if (((uintptr_t)rec & 15) == 0) {
		__m128i *d = (__m128i *)rec;
		const __m128i *v = (const __m128i *)s;

		_mm_stream_si128(d, _mm_loadu_si128(v));
		_mm_stream_si128(d + 1, _mm_loadu_si128(v + 1));
		_mm_stream_si128(d + 2, _mm_loadu_si128(v + 2));
		_mm_stream_si128(d + 3, _mm_loadu_si128(v + 3));
		_mm_stream_si128(d + 4, _mm_set_epi64x((long long)acked_ns,
						       (long long)wseq));
		return;
	}
#endif
	rec->s = *s;
	rec->wseq = wseq;
	rec->acked_ns = acked_ns;
}

int nsa_replay_keep(struct nsa_replay *r, const struct ns_session *s,
		    uint64_t wseq, uint64_t acked_ns, uint64_t cutoff)
{
	struct nsa_replay_rec *rec;
	int early = 0;
	size_t pos;

	if (r->count == r->cap)
		early = replay_evict(r, cutoff);
	pos = r->head + r->count;
	if (pos >= r->cap)
		pos -= r->cap;
	rec = &r->rp[pos];
	rec_write(rec, s, wseq, acked_ns);
	if (ns_session_lines(s) == 2)
		r->v6[pos] = *ns_session_v6_of(s);
	r->count++;
	return early;
}

size_t nsa_replay_items(const struct nsa_replay *r,
			struct nsa_resend_item *items, uint8_t flags)
{
	size_t i, n = 0;

	for (i = 0; i < r->count; i++) {
		size_t pos = r->head + i;
		const struct nsa_replay_rec *rec;

		if (pos >= r->cap)
			pos -= r->cap;
		rec = &r->rp[pos];
		if (rec->wseq < r->floor)
			continue;
		items[n++] = (struct nsa_resend_item){
			rec->wseq, i, &rec->s,
			ns_session_lines(&rec->s) == 2 ? &r->v6[pos] : NULL,
			flags};
	}
	return n;
}

static int cmp_item(const void *x, const void *y)
{
	const struct nsa_resend_item *a = x, *b = y;

	if (a->wseq != b->wseq)
		return a->wseq < b->wseq ? -1 : 1;
	return a->ord < b->ord ? -1 : a->ord > b->ord;
}

int nsa_resend_queue(struct nsa_resend *rs, struct nsa_resend_item *items,
		     size_t n)
{
	size_t keep = rs->len - rs->pos, i, lines = n, at = 0;
	struct ns_session *q;
	uint8_t *qf;

	for (i = 0; i < n; i++)
		if (items[i].v6 != NULL)
			lines++;
	q = malloc((lines + keep ? lines + keep : 1) * sizeof(*q));
	qf = malloc(lines + keep ? lines + keep : 1);

	if (q == NULL || qf == NULL) {
		free(q);
		free(qf);
		return -ENOMEM;
	}
	qsort(items, n, sizeof(*items), cmp_item);
	for (i = 0; i < n; i++) {
		q[at] = *items[i].s;
		qf[at++] = items[i].flags;
		if (items[i].v6 != NULL) {
			memcpy(&q[at], items[i].v6, sizeof(*items[i].v6));
			qf[at++] = NSA_RESEND_LINE2;
		}
	}
	if (keep) {
		memcpy(q + lines, rs->q + rs->pos, keep * sizeof(*q));
		memcpy(qf + lines, rs->flags + rs->pos, keep);
	}
	free(rs->q);
	free(rs->flags);
	rs->q = q;
	rs->flags = qf;
	rs->len = lines + keep;
	rs->pos = 0;
	return 0;
}

void nsa_resend_fini(struct nsa_resend *rs)
{
	free(rs->q);
	free(rs->flags);
	memset(rs, 0, sizeof(*rs));
}
