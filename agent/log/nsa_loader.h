/*
 * nsa_loader.h - reading the sessions one master holds: the key listing
 * (CLUSTER GETKEYSINSLOT per slot, or SCAN) and MGET of the values, on one
 * non-blocking pipelined connection. The standby's cold load and resyncs
 * run it inside their poll() loop; natsync-verify runs it to its end.
 */
#ifndef NSA_LOADER_H
#define NSA_LOADER_H

#include <stdint.h>

#include "ns_record.h"
#include "nsa_cluster.h"
#include "nsa_conn.h"
#include "nsa_logmerge.h"

/* Where the sessions go. */
struct nsa_loader_sink {
	/* n sessions read from master node, each under its own key; returns
	 * how many were taken. */
	unsigned int (*apply)(void *arg, unsigned int node,
			      const struct ns_session *s, unsigned int n);
	/* n keys or values under natsync's prefix that are not valid. */
	void (*bad)(void *arg, uint64_t n);
	void *arg;
	/* Log layout: with batch_key_len > 0 only segments signed with
	 * batch_key count; n refused ones go to unauthenticated (to bad when
	 * it is NULL). The keys layout's values carry no signature. */
	const char *batch_key;
	size_t batch_key_len;
	void (*unauthenticated)(void *arg, uint64_t n);
};

/* nsa_loader_on_readable() and nsa_loader_run(): */
#define NSA_LOADER_DONE 1 /* every key listed and read */
#define NSA_LOADER_MORE 0
#define NSA_LOADER_FAILED (-1) /* the reason in why */
/* GETKEYSINSLOT refused for good (ACL, an older or stripped server), not a
 * passing state such as LOADING: load with SCAN. */
#define NSA_LOADER_SLOTS_REFUSED (-2)
/* Log layout: a compaction round replaced the checkpoint the load read
 * while it read (the mark changed): what it read may have expired in
 * part, so nothing went to the sink; load again. */
#define NSA_LOADER_RACED (-3)

struct nsa_loader {
	struct nsa_conn *conn; /* NULL: closed */
	const struct nsa_store_conf *conf;
	const struct nsa_topology *topo;
	unsigned int node;
	int by_slot; /* GETKEYSINSLOT per slot, else SCAN */
	int keys_done; /* every SCAN or GETKEYSINSLOT is sent */
	uint32_t next_slot; /* by_slot: the next slot to ask for */
	uint32_t slots_inflight;
	uint64_t last_rx_ns; /* monotonic: started, or last read a reply */
	uint64_t loaded; /* sessions the sink took */
	/* Cluster: the slots the load read whole from the node that serves
	 * them (see nsa_loader_slot_read). */
	uint64_t slot_read[NS_SLOTS / 64];
	uint32_t slots_moved; /* the node said MOVED: the map is stale */
	uint32_t slots_migrating; /* MIGRATING: the rest read on the target */
	uint32_t slots_unread; /* MIGRATING, and the target could not be read */
	redisContext *importer; /* the target of a migrating slot */
	struct nsa_addr importer_addr;
	struct nsa_loader_sink sink;
	/* [store] layout = log: the segments read are merged here and the
	 * live records go to the sink when every one is read. */
	int log;
	int merge_failed; /* out of memory: the load fails */
	struct nsa_logmerge merge;
	/* Log layout on a cluster: a segment holds the records of the slots
	 * its master served when it was written, so after resharding a
	 * node's sessions may lie on any master. The load reads node's
	 * segments, then every other master's (SCAN, one after the other on
	 * the same connection), and merges only the records of node's slots
	 * (keep_slots). conn_node is the master the connection is to. */
	unsigned int conn_node;
	unsigned int next_other; /* the next master to read after node */
	uint64_t keep_slots[NS_SLOTS / 64];
	/* Log layout: compaction's mark (nsa_logmerge.h) as read before the
	 * first master's keys; read again before each other master's and
	 * once at the end. A change fails the load (RACED) unless the load
	 * took less than the marks' grace: what a newer round replaced
	 * expires that long after its mark, which the first read missed. */
	struct nsa_logmark mark;
	int marks_read; /* mark replies so far */
	int mark_changed;
	uint32_t mark_grace_ms; /* the least grace of the marks read */
	uint64_t mark_asked_ns; /* monotonic: the first mark asked for */
	int mark_final; /* the last one is asked for */
	char why[160];
};

/* Connect to master node of topo (which must outlive the load). 0, or a
 * negative errno with the reason in err. */
int nsa_loader_open(struct nsa_loader *ld, const struct nsa_store_conf *conf,
		    const struct nsa_topology *topo, unsigned int node,
		    const struct nsa_loader_sink *sink, char *err,
		    size_t errlen);

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

void nsa_loader_close(struct nsa_loader *ld);

#endif
