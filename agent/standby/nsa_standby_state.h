/*
 * nsa_standby_state.h - the subscriber's state, shared by its loop
 * (nsa_standby.c), its live batches (nsa_live.c) and its resyncs
 * (nsa_resync.c). Private to the standby; state only: each file's
 * functions are in its own header.
 */
#ifndef NSA_STANDBY_STATE_H
#define NSA_STANDBY_STATE_H

#include <pthread.h>
#include <stdint.h>

#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_config.h"
#include "nsa_dumpreq.h"
#include "nsa_lag.h"
#include "nsa_loader.h"
#include "nsa_order.h"
#include "nsa_prio.h"
#include "nsa_standby_stats.h"
#include "nsa_sub.h"
#include "nsa_topowatch.h"
#include "nsdp_ctcommit.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"

/* The store's backoff while setting up; a failed resync is retried after
 * half the longest. */
#define SB_BACKOFF_MIN_MS 100
#define SB_BACKOFF_MAX_MS 2000

struct sb_node {
	struct nsa_addr addr;
	char channel[NS_CHANNEL_MAX];
	struct nsa_sub sub;
	int loaded_once; /* a resync of this master finished */
	int scan_only; /* GETKEYSINSLOT was refused: load with SCAN */
	struct nsa_loader ld;
	int resyncing; /* the table's resync for this master is begun */
	uint64_t gen;
	uint32_t mark;
	uint64_t retry_at; /* monotonic ns; 0 = no retry pending */
	/* Realtime when the subscription began, less the clock slack: a
	 * batch sent before it is old (nsa_order_seq). */
	uint64_t not_before_ns;
	uint64_t unread_warned; /* moved << 32 | unread, last logged */
	uint64_t barrier_pings; /* sub.pings when the barrier was asked */
	/* NS_BATCH_F_RESYNC came while a resync ran (begun before the
	 * batch the store lost was applied): another one follows it. */
	int resync_again;
	int resync_asked_logged;
};

struct nsa_standby {
	struct nsa_config conf;
	/* The store as the topology is fetched (the setup and the watcher):
	 * each reply within twice [standby] ping_ms (what makes a
	 * subscription dead), so that a hung store (masters stopped, not
	 * refusing) holds neither, nor a stop, for 5 s a seed. */
	struct nsa_store_conf store_quick;
	struct nsdp_table *table;
	int own_table; /* created here, freed with the standby */
	pthread_t thread;
	int running;
	int stop;
	int wake_fd;

	struct nsa_topology topo;
	struct nsa_topology fresh; /* a newer map, being adopted */
	struct sb_node nodes[NSA_MAX_NODES];
	unsigned int n_nodes;
	uint32_t resync_counter;
	uint32_t epoch_rose_told; /* the last risen epoch logged (nsa_live) */
	/* The cold load of every master is one load, on master 0's loader
	 * (log layout on a cluster: each segment read once), running or
	 * waiting for its retry; the other masters run none of their own
	 * meanwhile. */
	int load_all;
	int reset; /* the run loop must tear down and start over */

	struct nsa_topowatch watch;
	uint8_t scope[NS_SLOTS];

	struct nsa_order order;
	struct nsa_dumpreq dump;

	struct nsa_standby_stats st;
	struct nsa_lag_batch lag; /* of the batch being applied */
	struct nsa_prio prio; /* the subscriber thread's, [standby] priority */
	/* nsa_standby_barrier: asked (by the caller), pinged for and done
	 * (by the thread). */
	uint64_t barrier_req, barrier_sent, barrier_done;
	/* nsa_standby_resync_all: asked (by the caller), begun and done (by
	 * the thread). */
	uint64_t resync_req, resync_sent, resync_done;
	/* [standby] commit = conntrack: what the table takes is also written
	 * into the kernel's conntrack table; NULL = commit none. */
	struct nsdp_ctcommit *ct;
};

#define SB_STAT_ADD(sb, f, v) NSDP_STAT_ADD((sb)->st.f, v)

/* Reading the pair's epoch counter when synced: its bound, ms. */
#define SB_EPOCH_READ_MS 200

/* epoch_seen raised to epoch when below (the subscriber thread alone
 * writes it). */
static inline void nsa_standby_epoch_seen(struct nsa_standby *sb,
					  uint64_t epoch)
{
	if (epoch > __atomic_load_n(&sb->st.epoch_seen, __ATOMIC_RELAXED))
		__atomic_store_n(&sb->st.epoch_seen, epoch, __ATOMIC_RELAXED);
}

#endif
