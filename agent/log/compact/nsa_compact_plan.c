/*
 * nsa_compact_plan.c - what a compaction round merges and what its mark
 * covers (schema/FORMAT.md, Compaction), decided from the keys' names,
 * the mark in force and an earlier listing: no clock of any host.
 *
 * A family is one publisher's segments on one channel, numbered 1, 2, 3…
 * as the writer signs them. A listing that found seq H of a family proves
 * every seq up to H signed before it ended; a grace period later each is
 * in the store or never will be (never written: a batch published only,
 * a resend under a new seq, a store that refused it; or expired). So a
 * round listing at least a grace period after an earlier one (its
 * sighting) merges, per family, what it finds up to the sighting's H and
 * covers every seq up to H, found or not.
 *
 * Invariants:
 * - A family whose slot moved or migrated while the round listed may
 *   have a segment no listing found: the round neither merges nor covers
 *   more of it (held), whatever its sighting says.
 * - A cover never falls: a family keeps at least mk's cover, and leaves
 *   the mark only once the round (its slot settled) lists none of its
 *   segments.
 * - Covers are in (tag, publisher) order, each family once.
 *
 * Not here: reading and writing (nsa_compact_segments.c,
 * nsa_compact_checkpoint.c), the listings themselves (nsa_compact.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_slot.h"
#include "nsa_compact_plan.h"

void nsa_compact_sighting_free(struct nsa_compact_sighting *s)
{
	free(s->hi);
	memset(s, 0, sizeof(*s));
}

static int cover_order(const void *a, const void *b)
{
	const struct nsa_logmark_cover *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	if (x->publisher != y->publisher)
		return x->publisher < y->publisher ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

int nsa_compact_sighting_of(const struct nsa_compact_keys *l, unsigned int n,
			    struct nsa_compact_sighting *s)
{
	size_t total = 0, k = 0, out = 0;
	struct nsa_logmark_cover *all;

	for (unsigned int i = 0; i < n; i++)
		total += l[i].n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (all == NULL)
		return -ENOMEM;
	for (unsigned int i = 0; i < n; i++)
		for (size_t j = 0; j < l[i].n; j++) {
			struct nsa_logmark_cover *c = &all[k];

			k += nsa_logkey_segment(l[i].k[j], l[i].len[j], &c->tag,
						&c->publisher, &c->seq) == 0;
		}
	qsort(all, k, sizeof(*all), cover_order);
	/* The last of each family is its highest. */
	for (size_t j = 0; j < k; j++) {
		if (out > 0 && all[out - 1].tag == all[j].tag &&
		    all[out - 1].publisher == all[j].publisher)
			out--;
		all[out++] = all[j];
	}
	free(s->hi);
	s->hi = all;
	s->n = s->cap = out;
	return 0;
}

uint64_t nsa_compact_sighting_hi(const struct nsa_compact_sighting *s,
				 uint32_t tag, uint32_t publisher)
{
	size_t lo = 0, hi = s ? s->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct nsa_logmark_cover *c = &s->hi[mid];

		if (c->tag == tag && c->publisher == publisher)
			return c->seq;
		if (c->tag < tag || (c->tag == tag && c->publisher < publisher))
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

uint16_t nsa_compact_tag_slot(uint32_t tag)
{
	char k[16];
	int len = snprintf(k, sizeof(k), "{%u}", tag);

	return ns_key_slot(k, (size_t)len);
}

/* Every family of mk, seen and listed, each once, in order: at most
 * their sum, into f (each with seq 0). The number. */
static size_t families(const struct nsa_logmark *mk,
		       const struct nsa_compact_sighting *seen,
		       const struct nsa_compact_sighting *listed,
		       struct nsa_logmark_cover *f)
{
	size_t n = 0, out = 0;

	for (uint32_t i = 0; mk->set && i < mk->n_covers; i++)
		f[n++] = mk->cover[i];
	for (size_t i = 0; seen && i < seen->n; i++)
		f[n++] = seen->hi[i];
	for (size_t i = 0; i < listed->n; i++)
		f[n++] = listed->hi[i];
	for (size_t i = 0; i < n; i++)
		f[i].seq = 0;
	qsort(f, n, sizeof(*f), cover_order);
	for (size_t i = 0; i < n; i++)
		if (out == 0 || f[out - 1].tag != f[i].tag ||
		    f[out - 1].publisher != f[i].publisher)
			f[out++] = f[i];
	return out;
}

static int slot_set(const uint64_t *bits, uint16_t slot)
{
	return (bits[slot / 64] >> (slot % 64)) & 1;
}

/* The round's covers: see nsa_compact_plan. */
static int plan_covers(const struct nsa_logmark *mk,
		       const struct nsa_compact_sighting *seen,
		       const struct nsa_compact_sighting *listed,
		       const uint64_t *unsettled, struct nsa_logmark *done,
		       unsigned int *held)
{
	size_t cap =
		(mk->set ? mk->n_covers : 0) + (seen ? seen->n : 0) + listed->n;
	struct nsa_logmark_cover *f = malloc((cap ? cap : 1) * sizeof(*f));
	size_t n;
	int rc = 0;

	if (f == NULL)
		return -ENOMEM;
	n = families(mk, seen, listed, f);
	done->n_covers = 0;
	*held = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const uint32_t tag = f[i].tag, pub = f[i].publisher;
		const int settled =
			!slot_set(unsettled, nsa_compact_tag_slot(tag));
		const uint64_t was = nsa_logmark_covered(mk, tag, pub);
		const uint64_t hi =
			nsa_compact_sighting_hi(seen ? seen : listed, tag, pub);
		uint64_t now = was;

		if (settled && hi > was)
			now = hi;
		else if (!settled && hi > was)
			(*held)++;
		/* Gone from the store (every segment expired or never
		 * written) and no listing may have missed one: left out. */
		if (now == 0 ||
		    (settled && nsa_compact_sighting_hi(listed, tag, pub) == 0))
			continue;
		if (done->n_covers == NSA_LOGMARK_COVERS) {
			rc = -E2BIG;
			break;
		}
		done->cover[done->n_covers++] =
			(struct nsa_logmark_cover){tag, pub, now};
	}
	free(f);
	return rc;
}

/* What the round does with listed key k (of length len). */
static uint8_t key_plan(const char *k, size_t len, const struct nsa_logmark *mk,
			const struct nsa_logmark *done)
{
	uint32_t tag, pub, id;
	uint64_t seq, gen;

	switch (nsa_logkey_kind(k, len)) {
	case NSA_LOGKEY_SEGMENT:
		if (nsa_logkey_segment(k, len, &tag, &pub, &seq) != 0)
			return NSA_PLAN_NONE; /* not a writer's: left alone */
		if (seq <= nsa_logmark_covered(mk, tag, pub))
			return NSA_PLAN_EXPIRE;
		if (seq <= nsa_logmark_covered(done, tag, pub))
			return NSA_PLAN_MERGE;
		return NSA_PLAN_NONE;
	case NSA_LOGKEY_CHECKPOINT:
		if (nsa_logkey_checkpoint(k, len, &id, &gen) != 0)
			return NSA_PLAN_NONE;
		if (nsa_logmark_takes(mk, k, len, NULL, 0))
			return NSA_PLAN_MERGE_CP;
		return gen < done->gen ? NSA_PLAN_EXPIRE_CP : NSA_PLAN_NONE;
	default:
		return NSA_PLAN_NONE;
	}
}

int nsa_compact_plan(struct nsa_compact_keys *l, unsigned int n,
		     const struct nsa_logmark *mk,
		     const struct nsa_compact_sighting *seen,
		     const struct nsa_compact_sighting *listed,
		     const uint64_t *unsettled, struct nsa_logmark *done,
		     unsigned int *held)
{
	int rc = plan_covers(mk, seen, listed, unsettled, done, held);

	if (rc != 0)
		return rc;
	for (unsigned int i = 0; i < n; i++)
		for (size_t j = 0; j < l[i].n; j++)
			l[i].plan[j] =
				key_plan(l[i].k[j], l[i].len[j], mk, done);
	return 0;
}
