/*
 * nsa_standby_impl.h - the subscriber's state, shared by its loop
 * (nsa_standby.c) and its resyncs (nsa_resync.c). Private to those two.
 */
#ifndef NSA_STANDBY_IMPL_H
#define NSA_STANDBY_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_dumpreq.h"
#include "nsa_lag.h"
#include "nsa_loader.h"
#include "nsa_order.h"
#include "nsa_standby.h"
#include "nsa_sub.h"
#include "nsa_topowatch.h"
#include "nsdp_ctcommit.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"

#define SB_BACKOFF_MIN_MS 100
#define SB_BACKOFF_MAX_MS 2000
#define SB_SUBSCRIBE_TIMEOUT_MS 2000
#define SB_PURGE_PERIOD_NS (1000ull * 1000 * 1000)

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
	int reset; /* the run loop must tear down and start over */

	struct nsa_topowatch watch;
	uint8_t scope[NS_SLOTS];

	struct nsa_order order;
	struct nsa_dumpreq dump;

	struct nsa_standby_stats st;
	struct nsa_lag_batch lag; /* of the batch being applied */
	/* nsa_standby_barrier: asked (by the caller), pinged for and done
	 * (by the thread). */
	uint64_t barrier_req, barrier_sent, barrier_done;
	/* [standby] commit = conntrack: what the table takes is also written
	 * into the kernel's conntrack table; NULL = commit none. */
	struct nsdp_ctcommit *ct;
};

#define SB_STAT_ADD(sb, f, v) NSDP_STAT_ADD((sb)->st.f, v)

static inline int nsa_sb_stopping(const struct nsa_standby *sb)
{
	return __atomic_load_n(&sb->stop, __ATOMIC_ACQUIRE);
}

static inline void nsa_sb_wake(void *arg)
{
	struct nsa_standby *sb = arg;
	uint64_t one = 1;

	if (write(sb->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter saturated: the thread is awake anyway */
	}
}

/* Commit s to conntrack when the apply just made took it: the table's
 * applied count moved past *seen (what it was before). Only with sb->ct. */
static inline void nsa_sb_commit(struct nsa_standby *sb,
				 const struct ns_session *s, uint64_t *seen)
{
	uint64_t applied = nsdp_table_applied(sb->table);

	if (applied == *seen)
		return; /* older than the table's: ignored there too */
	*seen = applied;
	nsdp_ctcommit_add(sb->ct, s);
}

/* Write what is queued for conntrack (end of a batch or a load chunk). */
static inline void nsa_sb_commit_flush(struct nsa_standby *sb)
{
	if (nsdp_ctcommit_pending(sb->ct))
		nsdp_ctcommit_flush(sb->ct);
}

/* nsa_resync.c */
void nsa_sb_resync_close(struct nsa_standby *sb, struct sb_node *nd);
void nsa_sb_resync_start(struct nsa_standby *sb, unsigned int node);
void nsa_sb_resync_fail(struct nsa_standby *sb, unsigned int node,
			const char *why);
void nsa_sb_resync_step(struct nsa_standby *sb, unsigned int node, int rc);
void nsa_sb_topo_adopt(struct nsa_standby *sb, const struct nsa_topology *t);

#endif
