/*
 * nsa_compact_plan.h - what a compaction round merges and covers
 * (nsa_compact_plan.c): the families of segments a listing found, and
 * the round's mark and plan for every listed key.
 */
#ifndef NSA_COMPACT_PLAN_H
#define NSA_COMPACT_PLAN_H

#include "nsa_compact_parts.h"

/* The families of the segments listed on n masters (l[0..n)), each with
 * its highest seq, into s (its listed_ns and exact are the caller's):
 * 0 or -ENOMEM. */
int nsa_compact_sighting_of(const struct nsa_compact_keys *l, unsigned int n,
			    struct nsa_compact_sighting *s);

/* The highest seq s saw of family (tag, publisher): 0 when none. */
uint64_t nsa_compact_sighting_hi(const struct nsa_compact_sighting *s,
				 uint32_t tag, uint32_t publisher);

/* The slot of the segments of family tag ("{tag}"). */
uint16_t nsa_compact_tag_slot(uint32_t tag);

/* The round's covers into done (its other fields are the caller's) and
 * the plan of every key listed on n masters: per family, up to the
 * highest seq seen (the round's own listing when seen is NULL), except a
 * family whose slot is set in unsettled (it moved or migrated while the
 * round listed: held as mk has it, counted in *held). Segments between
 * mk's cover and the new one are merged, those mk covers expired again;
 * the marked checkpoint's parts are merged, every other checkpoint below
 * done->gen expired (every one merged when mk is not set). 0, or -E2BIG
 * (more families than a mark holds). */
int nsa_compact_plan(struct nsa_compact_keys *l, unsigned int n,
		     const struct nsa_logmark *mk,
		     const struct nsa_compact_sighting *seen,
		     const struct nsa_compact_sighting *listed,
		     const uint64_t *unsettled, struct nsa_logmark *done,
		     unsigned int *held);

#endif
