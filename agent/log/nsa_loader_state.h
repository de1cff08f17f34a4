/*
 * nsa_loader_state.h - the state of one load (nsa_loader.h): where its
 * sessions go, what a step of it says, and struct nsa_loader, which its
 * owner embeds and reads (progress, counters, the reason it failed) and
 * only the loader's files write (nsa_loader.c, loader/).
 */
#ifndef NSA_LOADER_STATE_H
#define NSA_LOADER_STATE_H

#include <stdint.h>

#include "ns_record.h"
#include "nsa_cluster.h"
#include "nsa_conn.h"
#include "nsa_logmerge.h"

/* Where the sessions go. */
struct nsa_loader_sink {
	/* n sessions read from master node, each under its own key; returns
	 * how many were taken. An IPv6 session comes alone (n = 1), its
	 * second line (struct ns_session_v6) after it. */
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
	/* Optional: n values (log layout: segments and checkpoints) of bytes
	 * in all came from the store, as each reply of them is read. */
	void (*read)(void *arg, uint64_t n, uint64_t bytes);
	/* Optional, log layout: the sessions the load may bring at most (a
	 * whole table's load: its capacity), to size the merge up front
	 * (nsa_logmerge_expect); 0 lets it grow as it fills. */
	size_t expect;
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

/* The state of the log layout's reader (loader/nsa_loader_log.c). */
struct nsa_loader_logstate {
	/* The segments read are merged here and the live records go to the
	 * sink when every one is read. */
	struct nsa_logmerge merge;
	/* On a cluster a segment holds the records of the slots its master
	 * served when it was written, so after resharding a master's
	 * sessions may lie on any master. The load reads the master's
	 * segments, then every other master's (one after the other on the
	 * same connection), and merges only the records of its slots
	 * (keep_slots: every master's when it loads every master). */
	unsigned int next_other; /* the next master to read after node */
	uint64_t keep_slots[NS_SLOTS / 64];
	/* Compaction's mark (nsa_logmerge.h) as read before the first
	 * master's keys; read again before each other master's and once at
	 * the end. A change fails the load (RACED) unless the load took less
	 * than the marks' grace: what a newer round replaced expires that
	 * long after its mark, which the first read missed. */
	struct nsa_logmark mark;
	int marks_read; /* mark replies so far */
	int mark_changed;
	uint32_t mark_grace_ms; /* the least grace of the marks read */
	uint64_t mark_asked_ns; /* monotonic: the first mark asked for */
	int mark_final; /* the last one is asked for */
};

/* A store layout's reader (loader/nsa_loader_layout.h). */
struct nsa_loader_layout;
/* A listing's keys (loader/nsa_loader_list.c). */
struct key_batch;

struct nsa_loader {
	struct nsa_conn *conn; /* NULL: closed */
	const struct nsa_store_conf *conf;
	const struct nsa_topology *topo;
	unsigned int node;
	/* The master the connection is to: node, or (log layout) another
	 * master whose segments are read. */
	unsigned int conn_node;
	/* Log layout on a cluster: the load reads the sessions of every
	 * master, each master's keys once (nsa_loader_every_master). */
	int every_master;
	int by_slot; /* GETKEYSINSLOT per slot, else SCAN */
	int keys_done; /* every SCAN or GETKEYSINSLOT is sent */
	uint32_t next_slot; /* by_slot: the next slot to ask for */
	uint32_t slots_inflight;
	uint64_t last_rx_ns; /* monotonic: started, or last read a reply */
	uint64_t loaded; /* sessions the sink took */
	/* Values read from the store since the load began (nil ones left
	 * out), and their bytes: in the log layout, every segment or
	 * checkpoint read, each time it is read. */
	uint64_t values_read, value_bytes;
	/* Cluster: the slots the load read whole from the node that serves
	 * them (see nsa_loader_slot_read). */
	uint64_t slot_read[NS_SLOTS / 64];
	uint32_t slots_moved; /* the node said MOVED: the map is stale */
	uint32_t slots_migrating; /* MIGRATING: the rest read on the target */
	uint32_t slots_unread; /* MIGRATING, and the target could not be read */
	/* The target of a migrating slot, read blocking (ASK). */
	redisContext *importer;
	struct nsa_addr importer_addr;
	struct nsa_loader_sink sink;
	/* The reader of the [store] layout: which keys, what their values
	 * mean, what a finished listing leads to. */
	const struct nsa_loader_layout *layout;
	int values_failed; /* out of memory reading values: the load fails */
	/* MGETs sent and not answered yet; listings whose MGETs wait for
	 * room in the layout's mget_window, oldest first. */
	uint32_t mgets_inflight;
	struct key_batch *mget_wait, *mget_wait_last;
	struct nsa_loader_logstate log;
	char why[160];
};

#endif
