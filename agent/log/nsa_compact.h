/*
 * nsa_compact.h - compaction of the log layout (schema/FORMAT.md,
 * Compaction): a master's segments are read, merged, and their live
 * records written back as checkpoint segments; the segments read then
 * expire after a grace period, so that a load that listed them still reads
 * them.
 */
#ifndef NSA_COMPACT_H
#define NSA_COMPACT_H

#include <stddef.h>

#include "nsa_cluster.h"
#include "nsa_compact_round.h"

/* Compact master node of topo, blocking: the segments sent at or before
 * rd->until_ns (header sent_ns) and the checkpoints are merged; the
 * checkpoint goes under "ns:l:{N}:k:<id>:<gen>:<i>" in the master's channel
 * slot, each with the longest remaining timeout of its records as PX; the
 * checkpoints it replaced get a PX of grace_ms and the segments read twice
 * that, unless they expire sooner. 0, or a
 * negative errno with the reason in err (nothing expired then; -ESTALE:
 * fenced, nothing written). */
int nsa_compact_node(const struct nsa_store_conf *conf,
		     const struct nsa_topology *topo, unsigned int node,
		     const struct nsa_compact_round *rd,
		     struct nsa_compact_result *res, char *err, size_t errlen);

/* Compact every master of topo in one round, blocking: every master's
 * segments are listed and read into one merge, and each live record goes
 * to the checkpoint of the master that now serves its session key's slot
 * (in that master's channel slot): after resharding a session's older
 * records may lie on its former master, its delete on the new one, and a
 * tombstone may only be left out once every older record is covered. On
 * a cluster, nothing expires when the slot map changed or a slot was
 * being migrated while the round listed (-EAGAIN: a segment key may have
 * moved past both listings). Segments sent after rd->until_ns wait for a
 * later round; fenced as nsa_compact_node. res sums the masters. 0, or a
 * negative errno with the reason in err. */
int nsa_compact_all(const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo,
		    const struct nsa_compact_round *rd,
		    struct nsa_compact_result *res, char *err, size_t errlen);

#endif
