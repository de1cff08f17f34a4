/*
 * nsa_compact_segments.h - what a compaction round reads on one master
 * (nsa_compact_segments.c): its keys under "ns:l:", the record counts of
 * those it merges, and their values merged.
 */
#ifndef NSA_COMPACT_SEGMENTS_H
#define NSA_COMPACT_SEGMENTS_H

#include "nsa_compact_parts.h"

/* Add every key under "ns:l:" on the master of c to l (SCAN, blocking)
 * and give each a plan (NSA_PLAN_NONE): 0, -ENOMEM, or -EIO with the
 * reason in err. */
int nsa_compact_list(redisContext *c, struct nsa_compact_keys *l, char *err,
		     size_t errlen);

void nsa_compact_keys_free(struct nsa_compact_keys *l);

/* Add to *records the record counts (batch headers, GETRANGE) of the keys
 * l merges (a key whose slot moved counts none): 0, or -EIO with the
 * reason in err. */
int nsa_compact_count(redisContext *c, const struct nsa_compact_keys *l,
		      uint64_t *records, char *err, size_t errlen);

/* Merge into m the keys l merges, read slot by slot in MGETs of a bounded
 * size (key by key where a slot moves, following MOVED and ASK); the
 * records of a checkpoint part are flagged as such. With count,
 * res counts the segments and bytes read. *reply_bytes is raised to the
 * largest reply's values. 0, -ENOMEM, -ENOBUFS (m would outgrow its
 * max_bytes: the merge is partial), or -EIO with the reason in err. */
int nsa_compact_read(const struct nsa_store_conf *conf, redisContext *c,
		     const struct nsa_compact_keys *l,
		     struct nsa_logmerge *m, int count,
		     struct nsa_compact_result *res, size_t *reply_bytes,
		     char *err, size_t errlen);

#endif
