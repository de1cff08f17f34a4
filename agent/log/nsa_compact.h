/*
 * nsa_compact.h - compaction of the log layout (schema/FORMAT.md,
 * Compaction): the segments are read, merged, and their live records
 * written back as checkpoint segments under a commit mark that covers
 * what was merged; what it replaced then expires after a grace period,
 * so that a load that listed it still reads it.
 */
#ifndef NSA_COMPACT_H
#define NSA_COMPACT_H

#include <stddef.h>

#include "nsa_cluster.h"
#include "nsa_compact_round.h"

/* The store's compaction lease: a round holds it (its value names the
 * round) from before it reads the marks until its expiries are given, so
 * that the rounds of every gateway pair's actives over the one log
 * follow one another; a round that finds it held ends with -EBUSY. */
#define NSA_COMPACT_LEASE_KEY "natsync:compact-lease"

/* Compact every master of topo in one round, blocking: the newest valid
 * mark of every master's is in force; every master's keys are listed and
 * what the round merges (per family of segments, up to the highest seq
 * rd->seen found; see nsa_compact_round) is read into one merge, a range
 * of slots at a time within rd->budget_bytes, and each live record goes
 * to the checkpoint of the master that now serves its session key's slot
 * (in a slot of that master's that is not moving). A family whose slot
 * moved or migrated while the round listed is left as it was (counted in
 * res->families_held) and the rest completes. The checkpoints, then the
 * marks, are acknowledged by a replica where masters have some. res sums
 * the masters. 0, or a negative errno with the reason in err (nothing
 * expired then; -ESTALE: fenced, nothing written; -EAGAIN: a segment of
 * the caller's own not answered yet, see rd->settled; -EBUSY: another round
 * holds the lease, or took it over, nothing marked). */
int nsa_compact_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd,
		    struct nsa_compact_result *res, char *err, size_t errlen);

/* nsa_compact_all over master node of topo alone (for tests and tools):
 * its mark, its keys, every record into its checkpoint. Correct only
 * while no slot moved between masters since the live records were
 * written. */
int nsa_compact_node(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     const struct nsa_compact_round *rd,
		     struct nsa_compact_result *res, char *err, size_t errlen);

/* List every master of topo, as a round does, into out: the sighting a
 * round a grace period later merges up to (out->listed_ns is when the
 * listing ended). 0, or a negative errno with the reason in err. */
int nsa_compact_sight(const struct nsa_store_conf *conf,
		      const struct nsa_topology *topo,
		      struct nsa_compact_sighting *out, char *err,
		      size_t errlen);

#endif
