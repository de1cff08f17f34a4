/*
 * nsa_loader.h - reading the sessions one master holds, in either store
 * layout: the key listing (CLUSTER GETKEYSINSLOT per slot, or SCAN) and
 * MGET of the values, on one non-blocking pipelined connection (opened
 * blocking, as nsa_conn_open does; the half of a slot being migrated is
 * read on its target blocking, loader/nsa_loader_ask.c). The standby's
 * cold load and resyncs run it inside their poll() loop; natsync-verify
 * runs it to its end.
 */
#ifndef NSA_LOADER_H
#define NSA_LOADER_H

#include <stddef.h>

#include "nsa_loader_state.h"

/* Connect to master node of topo (which must outlive the load). 0, or a
 * negative errno with the reason in err. */
int nsa_loader_open(struct nsa_loader *ld, const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo, unsigned int node,
		    const struct nsa_loader_sink *sink, char *err,
		    size_t errlen);

/* Log layout on a cluster, between open and begin: the load reads the
 * sessions of every master, not node's alone, in one pass over every
 * master's keys (each segment read once); each session goes to the sink
 * under node, and nsa_loader_slot_read covers every master's slots.
 * -EINVAL in the keys layout, whose masters each hold their own keys: a
 * load a master reads each key once already. */
int nsa_loader_every_master(struct nsa_loader *ld);

/* Queue the first key listings. NSA_LOADER_DONE when there is nothing to
 * read (a master without slots), NSA_LOADER_MORE, or NSA_LOADER_FAILED. */
int nsa_loader_begin(struct nsa_loader *ld, int by_slot);

/* Handle what the connection brought (call when its fd is readable). */
int nsa_loader_on_readable(struct nsa_loader *ld);

/* Send what is queued: 0, or NSA_LOADER_FAILED. */
int nsa_loader_flush(struct nsa_loader *ld);

/* Replies are due (the load is not done). */
static inline int nsa_loader_waiting(const struct nsa_loader *ld)
{
	return ld->conn != NULL && ld->conn->exp_count > 0;
}

/* Whether the load read every key of slot from whoever holds it: on a
 * cluster, the node answered for the slot after listing it (it still
 * served it, or it was migrating it and the target's keys were read too).
 * Only such slots may lose what the load did not find. Always 1 on a
 * plain server. */
static inline int nsa_loader_slot_read(const struct nsa_loader *ld,
				       unsigned int slot)
{
	return !ld->topo->cluster ||
	       (ld->slot_read[slot / 64] >> (slot % 64)) & 1;
}

/* Blocking: open, begin and run the load of node to its end (for
 * programs, not the agent). A reply that takes more than timeout_ms fails
 * it. NSA_LOADER_DONE, NSA_LOADER_FAILED or NSA_LOADER_SLOTS_REFUSED, with
 * the reason in err. */
int nsa_loader_run(const struct nsa_store_conf *conf,
		   const struct nsa_topology *topo, unsigned int node,
		   int by_slot, const struct nsa_loader_sink *sink,
		   int timeout_ms, char *err, size_t errlen);

/* nsa_loader_run of every master's sessions in one load (log layout on
 * a cluster, nsa_loader_every_master), begun on master 0. */
int nsa_loader_run_every(const struct nsa_store_conf *conf,
			 const struct nsa_topology *topo, int by_slot,
			 const struct nsa_loader_sink *sink, int timeout_ms,
			 char *err, size_t errlen);

/* Blocking: the store's topology read, then every master's sessions
 * into sink as a standby loads them (log layout on a cluster: one load of
 * every master, each segment read once; otherwise master by master), a
 * load that a compaction round overtook (NSA_LOADER_RACED) read again up
 * to tries times. NSA_LOADER_DONE when every master was read whole,
 * otherwise what the failing load returned (NSA_LOADER_FAILED too when
 * the topology could not be read, or there is no memory), with the
 * reason in err. */
int nsa_loader_run_all(const struct nsa_store_conf *conf,
		       const struct nsa_loader_sink *sink, int timeout_ms,
		       int tries, char *err, size_t errlen);

void nsa_loader_close(struct nsa_loader *ld);

#endif
