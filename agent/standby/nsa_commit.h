/*
 * nsa_commit.h - the standby's hand-off to the kernel's conntrack table
 * ([standby] commit = conntrack): what the session table just took is
 * queued for conntrack (nsdp_ctcommit.h), and written at the end of each
 * drain of a subscription and of each chunk a loader read.
 */
#ifndef NSA_COMMIT_H
#define NSA_COMMIT_H

#include <stdint.h>

#include "ns_record.h"
#include "nsa_config.h"
#include "nsdp_ctcommit.h"
#include "nsdp_table.h"

/* The committer of [standby] commit_netns, commit_batch_bytes and
 * commit_mark, or NULL (said in the log). */
struct nsdp_ctcommit *nsa_commit_open(const struct nsa_config *conf);

/* Queue s when the apply just made took it: the table's applied count
 * moved past *seen (what it was before). */
static inline void nsa_commit_take(struct nsdp_ctcommit *ct,
				   const struct nsdp_table *t,
				   const struct ns_session *s, uint64_t *seen)
{
	uint64_t applied = nsdp_table_applied(t);

	if (applied == *seen)
		return; /* older than the table's: ignored there too */
	*seen = applied;
	nsdp_ctcommit_add(ct, s);
}

/* Queue the end of s, a session the store no longer holds and the table
 * removes (ct: the committer; the shape of a table's removed callback). */
void nsa_commit_remove(const struct ns_session *s, void *ct);

/* Write what is queued (end of a drain or of a load chunk). */
static inline void nsa_commit_flush(struct nsdp_ctcommit *ct)
{
	if (nsdp_ctcommit_pending(ct))
		nsdp_ctcommit_flush(ct);
}

#endif
