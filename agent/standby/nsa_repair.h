/*
 * nsa_repair.h - the standby's targeted repair of a sequence gap in the
 * log layout (nsa_repair.c), as its live batches (nsa_live.c) ask for it.
 * Private to the standby; on the subscriber thread.
 */
#ifndef NSA_REPAIR_H
#define NSA_REPAIR_H

#include <stdint.h>

#include "ns_batch.h"
#include "nsa_standby_state.h"

/* The batch gap, admitted on node's channel, showed that its publisher's
 * batches from .. gap->seq - 1 there did not come: read their segments
 * back and apply them in order (call before applying gap). 0 when
 * repaired; -1 when the master must be resynced instead (the keys layout,
 * a gap longer than [standby] repair_max_segments, a segment missing or
 * not verified, a store error; logged). */
int nsa_sb_repair(struct nsa_standby *sb, unsigned int node,
		  const struct ns_batch_hdr *gap, uint64_t from);

/* h, admitted on node's channel in its turn, announces a segment the store
 * refused for good, written again under h's seq (NS_BATCH_F_REWRITE): read
 * that segment back and apply it, instead of h's records. 0 when done; -1
 * when the master must be resynced instead (the keys layout, [standby]
 * repair_max_segments 0, the segment not in the store or not verified, a
 * store error; logged). */
int nsa_sb_repair_rewrite(struct nsa_standby *sb, unsigned int node,
			  const struct ns_batch_hdr *h);

#endif
