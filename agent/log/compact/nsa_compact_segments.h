/*
 * nsa_compact_segments.h - what a compaction round reads on one master
 * (nsa_compact_segments.c): its segment keys, and the segments and
 * checkpoint it merges.
 */
#ifndef NSA_COMPACT_SEGMENTS_H
#define NSA_COMPACT_SEGMENTS_H

#include "nsa_compact_parts.h"

/* Add every key under "ns:l:" on the master of c to l (SCAN, blocking):
 * 0, -ENOMEM, or -EIO with the reason in err. */
int nsa_compact_list(redisContext *c, struct nsa_compact_keys *l, char *err,
		     size_t errlen);

void nsa_compact_keys_free(struct nsa_compact_keys *l);

/* Merge into m what listed keys l the round under mark mk reads (the
 * marked round's checkpoint, the segments sent after mk's until_ns and
 * before until_ns), read slot by slot in MGETs of a bounded size.
 * merged[i] is set for the keys merged, stale[i] for checkpoints of no
 * marked round begun before mk's (expired with this round's segments).
 * res counts what was read. 0, -ENOMEM, or -EIO with the reason in err. */
int nsa_compact_read(redisContext *c, const struct nsa_compact_keys *l,
		     const struct nsa_logmark *mk, uint64_t until_ns,
		     uint8_t *merged, uint8_t *stale, struct nsa_logmerge *m,
		     struct nsa_compact_result *res, char *err, size_t errlen);

#endif
