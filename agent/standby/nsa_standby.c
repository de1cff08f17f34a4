/*
 * nsa_standby.c - the standby role: one subscriber thread that rebuilds the
 * active's session table from the store and its notifications.
 *
 * The thread fetches the topology, subscribes to every master's channel
 * (SSUBSCRIBE, or SUBSCRIBE on servers without sharded pub/sub), then
 * resyncs every master with a loader (nsa_loader.c) on a second connection
 * per master, in the same poll() loop as the subscriptions. The table
 * therefore has exactly one writer, and live batches keep being applied
 * while a load runs; the table's generations make live records win over
 * what a load read.
 *
 * Invariants:
 * - Only the subscriber thread touches the table, the connections and the
 *   sequence state. It holds the table (nsdp_table_take) from
 *   nsa_standby_start to nsa_standby_stop: a table another writer holds
 *   (a gateway's fast path not yet confirmed standby) is refused. Other
 *   threads read stats (relaxed atomics) and ask for dumps through a
 *   mutex/condvar handshake.
 * - A master's resync is either running (loader connected, table resync
 *   begun) or not; restarting one aborts the running one first. The cold
 *   load in the log layout on a cluster is one load of every master, on
 *   master 0's loader (each segment read once); a restart asked for any
 *   master restarts it.
 * - Any subscription trouble (lost connection, sunsubscribe, MOVED, error,
 *   a master change seen by the watcher, nsa_topowatch.c) resets
 *   everything: topology refetched, every master resubscribed and resynced.
 * - A resync removes only sessions of slots its loader read whole from
 *   whoever held them (nsa_loader_slot_read). Slots that moved between
 *   the same masters (seen by the watcher, or by a loader told MOVED)
 *   change the slot map in place: the masters that gave or took slots are
 *   resynced with the new map, the subscriptions stay. A resync that met
 *   a slot it could not read is repeated later.
 * - A subscription can die without a sound (a firewall that forgets the
 *   connection): one silent for [standby] ping_ms gets a PING; unanswered
 *   for twice that, it is declared dead and everything resets. A resync
 *   waiting three times ping_ms for a reply is abandoned and retried.
 * - A batch is applied only when it passes every check of nsa_live.c;
 *   otherwise it is counted and dropped.
 * - With [standby] commit = conntrack, what the table takes (live batches,
 *   loads, resyncs) and what a resync removes is also written into the
 *   kernel's conntrack table (nsdp_ctcommit.h), on this thread, flushed
 *   after each drain of a subscription and each chunk a loader read: a
 *   barrier's batches are in conntrack when it is done.
 *
 * Not here: what a live batch does to the table (nsa_live.c), how a
 * resync runs (nsa_resync.c), the conntrack commit (nsa_commit.c),
 * replicas as load sources.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_commit.h"
#include "nsa_live.h"
#include "nsa_conn.h"
#include "nsa_dumpreq.h"
#include "nsa_loader.h"
#include "nsa_log.h"
#include "nsa_order.h"
#include "nsa_resync.h"
#include "nsa_standby.h"
#include "nsa_standby_state.h"
#include "nsa_sub.h"
#include "nsa_topowatch.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

#define SB_SUBSCRIBE_TIMEOUT_MS 2000
/* Tombstones go in slices, the whole table a second: a slice at most
 * every millisecond, as much of the table as the time since the last one
 * is of a second. Purged at once, 250 000 positions held the subscriber
 * (a realtime thread) for 6-9 ms every second: most of the lag's p99
 * misses at 400 000 records/s. */
#define SB_PURGE_PERIOD_NS (1000ull * 1000 * 1000)
#define SB_PURGE_SLICE_NS (1000ull * 1000)

static inline int sb_stopping(const struct nsa_standby *sb)
{
	return __atomic_load_n(&sb->stop, __ATOMIC_ACQUIRE);
}

static void sb_wake(void *arg)
{
	struct nsa_standby *sb = arg;
	uint64_t one = 1;

	if (write(sb->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter saturated: the thread is awake anyway */
	}
}

/* ---- setup and the loop --------------------------------------------- */

static void sb_teardown(struct nsa_standby *sb)
{
	unsigned int i;

	__atomic_store_n(&sb->st.live, 0, __ATOMIC_RELAXED);
	for (i = 0; i < sb->n_nodes; i++) {
		nsa_sb_resync_close(sb, &sb->nodes[i]);
		sb->nodes[i].retry_at = 0;
		nsa_sub_close(&sb->nodes[i].sub);
	}
	sb->load_all = 0;
	sb->n_nodes = 0;
	nsa_order_rebase(&sb->order);
	nsa_topowatch_pause(&sb->watch);
}

/* A subscription silent for ping_ms gets a PING; one whose PING stays
 * unanswered is dead. Called after the round's reads: 0 or -1. */
static int sub_check_alive(struct nsa_standby *sb, unsigned int node,
			   uint64_t now)
{
	struct sb_node *nd = &sb->nodes[node];
	int rc = nsa_sub_check_alive(
		&nd->sub, (uint64_t)sb->conf.ping_ms * 1000000ull, now);

	if (rc == NSA_SUB_DEAD) {
		NSA_WARN("standby: no word from %s:%u for %" PRIu64
			 " ms, PING unanswered; resubscribing",
			 nd->addr.host, nd->addr.port,
			 (now - nd->sub.quiet_since_ns) / 1000000);
		SB_STAT_ADD(sb, dead_subscriptions, 1);
	}
	return rc < 0 ? -1 : 0;
}

/* The same for a resync: one waiting for replies that do not come for
 * three times ping_ms is abandoned and retried. */
static void resync_check_alive(struct nsa_standby *sb, unsigned int node,
			       uint64_t now)
{
	const struct nsa_loader *ld = &sb->nodes[node].ld;
	uint64_t ping_ns = (uint64_t)sb->conf.ping_ms * 1000000ull;

	if (ping_ns && nsa_loader_waiting(ld) &&
	    now - ld->last_rx_ns >= 3 * ping_ns)
		nsa_sb_resync_fail(sb, node, "no reply");
}

/* Fetch the topology and subscribe everywhere, with backoff, until done
 * or stopped. Returns 0 when subscribed. */
static int sb_setup(struct nsa_standby *sb)
{
	char err[256], last_err[256] = "";
	int backoff = SB_BACKOFF_MIN_MS;
	unsigned int i;

	while (!sb_stopping(sb)) {
		int rc;

		err[0] = 0;
		rc = nsa_topology_fetch(&sb->store_quick, &sb->topo, err,
					sizeof(err));
		if (rc == 0 && sb->topo.n_nodes == 0) {
			snprintf(err, sizeof(err), "no master in the topology");
			rc = -ENOENT;
		}
		if (rc == 0) {
			sb->n_nodes = sb->topo.n_nodes;
			for (i = 0; i < sb->n_nodes && rc == 0; i++) {
				struct sb_node *nd = &sb->nodes[i];

				nd->addr = sb->topo.nodes[i].addr;
				nd->loaded_once = 0;
				nd->scan_only = 0;
				nsa_topology_channel(&sb->topo, i, nd->channel);
				nd->not_before_ns =
					nsdp_realtime_ns() -
					(uint64_t)sb->conf.clock_slack_ms *
						1000000ull;
				rc = nsa_sub_open(&nd->sub, &sb->conf.store,
						  &nd->addr, nd->channel,
						  sb->topo.sharded_pubsub,
						  SB_SUBSCRIBE_TIMEOUT_MS, err,
						  sizeof(err));
			}
			if (rc == 0) {
				nsa_topowatch_follow(&sb->watch, &sb->topo);
				NSA_INFO("standby: subscribed to %u master(s) "
					 "(%s)",
					 sb->n_nodes,
					 sb->topo.sharded_pubsub ? "sharded"
								 : "classic");
				return 0;
			}
			sb_teardown(sb);
		}
		if (strcmp(err, last_err) != 0) {
			NSA_WARN("standby: store not ready: %s", err);
			snprintf(last_err, sizeof(last_err), "%s", err);
		}
		/* A dump asked for (SIGUSR1) while the store is away: the
		 * table as it stands, not the asker's timeout. */
		nsa_dumpreq_serve(&sb->dump, sb->table);
		nsdp_sleep_ms_unless(&sb->stop, (unsigned int)backoff);
		backoff = backoff * 2 > SB_BACKOFF_MAX_MS ? SB_BACKOFF_MAX_MS
							  : backoff * 2;
	}
	return -ECANCELED;
}

/* Ask for the barrier's PINGs once per request, and say it is done once
 * every subscription answered them (its batches before were applied). */
static void barrier_serve(struct nsa_standby *sb)
{
	uint64_t req = __atomic_load_n(&sb->barrier_req, __ATOMIC_ACQUIRE);
	unsigned int i;

	if (req != sb->barrier_sent) {
		for (i = 0; i < sb->n_nodes; i++) {
			struct sb_node *nd = &sb->nodes[i];

			if (nsa_sub_ping(&nd->sub) != 0 ||
			    nsa_conn_send(nd->sub.conn) < 0) {
				sb->reset = 1;
				return;
			}
			nd->barrier_pings = nd->sub.pings;
		}
		sb->barrier_sent = req;
	}
	if (sb->barrier_sent ==
	    __atomic_load_n(&sb->barrier_done, __ATOMIC_RELAXED))
		return;
	for (i = 0; i < sb->n_nodes; i++)
		if (sb->nodes[i].sub.pongs < sb->nodes[i].barrier_pings)
			return;
	__atomic_store_n(&sb->barrier_done, sb->barrier_sent, __ATOMIC_RELEASE);
}

/* Resync every master once per request, and say it is done once none is
 * running, asked for again, waiting for its retry or never loaded. */
static void resync_serve(struct nsa_standby *sb)
{
	uint64_t req = __atomic_load_n(&sb->resync_req, __ATOMIC_ACQUIRE);
	unsigned int i;

	if (req != sb->resync_sent) {
		for (i = 0; i < sb->n_nodes; i++)
			nsa_sb_resync_after(sb, i);
		sb->resync_sent = req;
	}
	if (sb->resync_sent ==
	    __atomic_load_n(&sb->resync_done, __ATOMIC_RELAXED))
		return;
	for (i = 0; i < sb->n_nodes; i++) {
		const struct sb_node *nd = &sb->nodes[i];

		if (!nd->loaded_once || nd->resync_again || nd->retry_at ||
		    nsa_sb_resync_running(sb, i))
			return;
	}
	__atomic_store_n(&sb->resync_done, sb->resync_sent, __ATOMIC_RELEASE);
}

/* The masters changed under working subscriptions (reset), or slots
 * moved between the same masters (the map adopted). */
static void sb_follow_topology(struct nsa_standby *sb)
{
	if (nsa_topowatch_changed(&sb->watch)) {
		NSA_WARN("standby: the store's masters changed under "
			 "working subscriptions; resubscribing and "
			 "resyncing");
		SB_STAT_ADD(sb, topology_changes, 1);
		sb->reset = 1;
		return;
	}
	if (nsa_topowatch_slots_moved(&sb->watch, &sb->fresh))
		nsa_sb_topo_adopt(sb, &sb->fresh);
}

/* One round's poll set: the wake fd, every subscription and every running
 * loader. who[k] names what pfd[k] is: -1 the wake fd, 2 * node a
 * subscription, 2 * node + 1 its loader. */
struct sb_pollset {
	struct pollfd pfd[1 + 2 * NSA_MAX_NODES];
	int who[1 + 2 * NSA_MAX_NODES];
	int n;
	int timeout_ms;
};

/* Build the round's poll set; resyncs whose retry is due start, and each
 * running loader sends what it queued, first. */
static void sb_pollset_build(struct nsa_standby *sb, struct sb_pollset *ps,
			     uint64_t now)
{
	unsigned int i;

	ps->n = 0;
	ps->timeout_ms = 100;
	ps->pfd[ps->n] = (struct pollfd){.fd = sb->wake_fd, .events = POLLIN};
	ps->who[ps->n++] = -1;
	for (i = 0; i < sb->n_nodes; i++) {
		struct sb_node *nd = &sb->nodes[i];
		struct nsa_loader *ld = &nd->ld;

		ps->pfd[ps->n] = (struct pollfd){.fd = nd->sub.conn->fd,
						 .events = POLLIN};
		ps->who[ps->n++] = (int)(2 * i);
		if (!ld->conn && nd->retry_at && now >= nd->retry_at)
			nsa_sb_resync_start(sb, i);
		if (ld->conn && nsa_loader_flush(ld) < 0)
			nsa_sb_resync_fail(sb, i, ld->why);
		if (ld->conn) {
			short out = nsa_conn_want_write(ld->conn) ? POLLOUT : 0;

			ps->pfd[ps->n] = (struct pollfd){
				.fd = ld->conn->fd,
				.events = (short)(POLLIN | out)};
			ps->who[ps->n++] = (int)(2 * i + 1);
		} else if (nd->retry_at) {
			ps->timeout_ms = 20;
		}
	}
}

/* Read what poll found: the wake fd drained, a loader stepped, a
 * subscription's batches applied; a lost subscription resets. */
static void sb_dispatch(struct nsa_standby *sb, const struct sb_pollset *ps)
{
	uint64_t v;
	int k;

	for (k = 0; k < ps->n && !sb->reset; k++) {
		unsigned int node;
		struct sb_node *nd;

		if (!ps->pfd[k].revents)
			continue;
		if (ps->who[k] < 0) {
			if (read(sb->wake_fd, &v, sizeof(v)) < 0) {
				/* already drained */
			}
			continue;
		}
		node = (unsigned int)ps->who[k] / 2;
		nd = &sb->nodes[node];
		if (ps->who[k] & 1) {
			if (nd->ld.conn)
				nsa_sb_resync_step(
					sb, node,
					nsa_loader_on_readable(&nd->ld));
			continue;
		}
		if (nsa_sub_recv(&nd->sub, nsdp_mono_ns()) < 0) {
			NSA_WARN("standby: lost subscription to %s:%u: %s",
				 nd->addr.host, nd->addr.port,
				 nd->sub.conn->err);
			sb->reset = 1;
			break;
		}
		nsa_sb_live_drain(sb, node);
	}
}

/* The subscriber's priority now, for the stats. */
static void sb_priority_stats(struct nsa_standby *sb)
{
	__atomic_store_n(&sb->st.subscriber_nice, sb->prio.nice,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&sb->st.subscriber_rtprio, sb->prio.rtprio,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&sb->st.subscriber_lowered, sb->prio.lowered,
			 __ATOMIC_RELAXED);
}

static void sb_run(struct nsa_standby *sb)
{
	struct sb_pollset ps;
	uint64_t purged_at = nsdp_mono_ns();
	unsigned int i;

	nsa_sb_resync_start_all(sb);
	for (i = 0; i < sb->n_nodes; i++)
		nsa_sb_live_drain(
			sb, i); /* replies read along with the confirmation */
	sb->barrier_sent = 0; /* new subscriptions: ping again if asked */
	/* The load just begun covers every resync asked for so far. */
	sb->resync_sent = __atomic_load_n(&sb->resync_req, __ATOMIC_ACQUIRE);

	while (!sb_stopping(sb) && !sb->reset) {
		uint64_t now = nsdp_mono_ns();

		sb_follow_topology(sb);
		if (sb->reset)
			break;
		if (now - purged_at >= SB_PURGE_SLICE_NS) {
			uint64_t slices =
				SB_PURGE_PERIOD_NS / (now - purged_at);

			nsdp_table_purge_slice(sb->table,
					       slices ? (uint32_t)slices : 1);
			purged_at = now;
		}
		sb_pollset_build(sb, &ps, now);
		if (poll(ps.pfd, (nfds_t)ps.n, ps.timeout_ms) < 0) {
			if (errno == EINTR)
				continue;
			NSA_ERR("standby: poll: %s", strerror(errno));
			sb->reset = 1;
			break;
		}
		sb_dispatch(sb, &ps);
		now = nsdp_mono_ns();
		if (nsa_prio_govern(&sb->prio, now, sb->st.lag_parts_count,
				    sb->st.lag_send_sum_us))
			sb_priority_stats(sb);
		for (i = 0; i < sb->n_nodes && !sb->reset; i++) {
			if (sub_check_alive(sb, i, now) < 0)
				sb->reset = 1;
			resync_check_alive(sb, i, now);
		}
		nsa_dumpreq_serve(&sb->dump, sb->table);
		if (!sb->reset)
			barrier_serve(sb);
		if (!sb->reset)
			resync_serve(sb);
	}
}

static void *sb_main(void *arg)
{
	struct nsa_standby *sb = arg;

	nsa_prio_init(&sb->prio, sb->conf.priority, nsdp_mono_ns());
	sb_priority_stats(sb);
	while (!sb_stopping(sb)) {
		/* A setup loads: at the process's priority. */
		nsa_prio_lower(&sb->prio);
		sb_priority_stats(sb);
		if (sb_setup(sb) < 0)
			break;
		sb->reset = 0;
		sb_run(sb);
		sb_teardown(sb);
		if (sb->reset && !sb_stopping(sb)) {
			SB_STAT_ADD(sb, resubscribes, 1);
			nsdp_sleep_ms_unless(&sb->stop, SB_BACKOFF_MIN_MS);
		}
	}
	sb_teardown(sb);
	nsa_dumpreq_serve(&sb->dump, sb->table);
	return NULL;
}

/* ---- public interface ----------------------------------------------- */

struct nsa_standby *nsa_standby_create_on(const struct nsa_config *conf,
					  struct nsdp_table *table)
{
	struct nsa_standby *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->conf = *conf;
	sb->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sb->table = table;
	sb->own_table = table == NULL;
	if (!sb->table) {
		sb->table = nsdp_table_create("nsa_sb", conf->table_capacity);
		/* [standby] table_capacity_v6: its IPv6 table */
		if (sb->table && conf->table_capacity_v6 > 0 &&
		    nsdp_table_add_v6(sb->table, conf->table_capacity_v6) !=
			    0) {
			NSA_ERR("standby: cannot create the IPv6 table of %u "
				"sessions",
				conf->table_capacity_v6);
			nsdp_table_free(sb->table);
			sb->table = NULL;
		}
	}
	if (sb->wake_fd < 0 || !sb->table) {
		NSA_ERR("standby: cannot create the table of %u sessions",
			conf->table_capacity);
		if (sb->wake_fd >= 0)
			close(sb->wake_fd);
		if (sb->own_table)
			nsdp_table_free(sb->table);
		free(sb);
		return NULL;
	}
	/* The committer's socket is opened in [standby] commit_netns. */
	if (conf->commit == NSA_COMMIT_CONNTRACK &&
	    !(sb->ct = nsa_commit_open(&sb->conf))) {
		close(sb->wake_fd);
		if (sb->own_table)
			nsdp_table_free(sb->table);
		free(sb);
		return NULL;
	}
	nsa_dumpreq_init(&sb->dump);
	sb->store_quick = sb->conf.store;
	if (sb->conf.ping_ms > 0 &&
	    (sb->store_quick.io_timeout_ms == 0 ||
	     sb->store_quick.io_timeout_ms > 2 * (int)sb->conf.ping_ms))
		sb->store_quick.io_timeout_ms = 2 * (int)sb->conf.ping_ms;
	/* And a topology read over every seed as long in all, so that the
	 * watch of a hung store does not hold a stop (a handover) seeds
	 * times over. */
	if (sb->conf.ping_ms > 0)
		sb->store_quick.fetch_budget_ms = 2 * (int)sb->conf.ping_ms;
	nsa_topowatch_init(&sb->watch, &sb->store_quick,
			   sb->conf.topology_check_ms, &sb->stop, sb_wake, sb);
	nsa_lag_batch_init(&sb->lag);
	return sb;
}

int nsa_standby_start(struct nsa_standby *sb)
{
	int rc;

	if (sb->running)
		return -EALREADY;
	/* The watcher of the last run, which a stop did not wait for. */
	nsa_topowatch_join(&sb->watch);
	if (nsdp_table_take(sb->table, NSDP_TABLE_SUBSCRIBER) != 0) {
		NSA_ERR("standby: the table has another writer; the "
			"subscriber does not start");
		return -EBUSY;
	}
	__atomic_store_n(&sb->stop, 0, __ATOMIC_RELEASE);
	rc = pthread_create(&sb->thread, NULL, sb_main, sb);
	if (rc != 0) {
		nsdp_table_give_back(sb->table, NSDP_TABLE_SUBSCRIBER);
		return -rc;
	}
	sb->running = 1;
	if (sb->conf.topology_check_ms > 0) {
		rc = nsa_topowatch_start(&sb->watch);
		if (rc != 0)
			NSA_WARN("standby: no topology watcher (%s): a master "
				 "cut off from its cluster goes unnoticed",
				 strerror(rc));
	}
	return 0;
}

void nsa_standby_stop(struct nsa_standby *sb)
{
	if (!sb || !sb->running)
		return;
	__atomic_store_n(&sb->stop, 1, __ATOMIC_RELEASE);
	sb_wake(sb);
	pthread_join(sb->thread, NULL);
	/* The topology watcher never touches the table: it is not waited
	 * for here (a fetch from a store that hangs takes up to its timeouts,
	 * and a promotion must not), but at the next start or the free. */
	nsdp_table_give_back(sb->table, NSDP_TABLE_SUBSCRIBER);
	sb->running = 0;
}

/* Ask the subscriber thread for one more of what *req counts: the
 * ticket to wait for, 0 when it does not run. */
static uint64_t sb_ask_only(struct nsa_standby *sb, uint64_t *req)
{
	uint64_t want;

	if (!sb || !sb->running)
		return 0;
	want = __atomic_add_fetch(req, 1, __ATOMIC_ACQ_REL);
	sb_wake(sb);
	return want;
}

/* Wait until *done reaches want, at most timeout_ms. */
static int sb_wait(const struct nsa_standby *sb, uint64_t want,
		   const uint64_t *done, int timeout_ms)
{
	uint64_t deadline = nsdp_mono_ns() + (uint64_t)timeout_ms * 1000000ull;

	if (!sb || !sb->running || want == 0)
		return -ENOTCONN;
	while (__atomic_load_n(done, __ATOMIC_ACQUIRE) < want) {
		if (nsdp_mono_ns() >= deadline)
			return -ETIMEDOUT;
		nsdp_sleep_ms(1);
	}
	return 0;
}

/* Ask the subscriber thread for one more of what *req counts, and wait
 * until *done reaches it, at most timeout_ms. */
static int sb_ask(struct nsa_standby *sb, uint64_t *req, const uint64_t *done,
		  int timeout_ms)
{
	return sb_wait(sb, sb_ask_only(sb, req), done, timeout_ms);
}

int nsa_standby_barrier(struct nsa_standby *sb, int timeout_ms)
{
	return sb ? sb_ask(sb, &sb->barrier_req, &sb->barrier_done, timeout_ms)
		  : -ENOTCONN;
}

uint64_t nsa_standby_barrier_ask(struct nsa_standby *sb)
{
	return sb ? sb_ask_only(sb, &sb->barrier_req) : 0;
}

int nsa_standby_barrier_wait(struct nsa_standby *sb, uint64_t ticket,
			     int timeout_ms)
{
	return sb ? sb_wait(sb, ticket, &sb->barrier_done, timeout_ms)
		  : -ENOTCONN;
}

int nsa_standby_resync_all(struct nsa_standby *sb, int timeout_ms)
{
	return sb ? sb_ask(sb, &sb->resync_req, &sb->resync_done, timeout_ms)
		  : -ENOTCONN;
}

void nsa_standby_free(struct nsa_standby *sb)
{
	if (!sb)
		return;
	nsa_standby_stop(sb);
	nsa_topowatch_join(&sb->watch);
	if (sb->own_table)
		nsdp_table_free(sb->table);
	close(sb->wake_fd);
	nsdp_ctcommit_close(sb->ct);
	nsa_dumpreq_fini(&sb->dump);
	nsa_topowatch_fini(&sb->watch);
	free(sb);
}

struct nsa_standby *nsa_standby_create(const struct nsa_config *conf)
{
	return nsa_standby_create_on(conf, NULL);
}

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb)
{
	return sb->table;
}

static void max_epoch_cb(const struct ns_session *s, void *arg)
{
	uint32_t *max = arg;

	if (s->epoch > *max)
		*max = s->epoch;
}

uint32_t nsa_standby_epoch_known(struct nsa_standby *sb)
{
	uint64_t seen = __atomic_load_n(&sb->st.epoch_seen, __ATOMIC_RELAXED);
	uint32_t max = 0;

	nsdp_table_walk(sb->table, max_epoch_cb, &max);
	return seen > max && seen <= UINT32_MAX ? (uint32_t)seen : max;
}

void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s)
{
	nsa_standby_stats_copy(s, &sb->st);
}

int nsa_standby_commit_stats(const struct nsa_standby *sb,
			     struct nsdp_ctcommit_stats *s)
{
	if (!sb->ct)
		return -ENOENT;
	nsdp_ctcommit_stats(sb->ct, s);
	return 0;
}

int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms)
{
	if (!sb->running)
		return strlen(path) >= sizeof(sb->dump.path)
			       ? -ENAMETOOLONG
			       : nsdp_table_dump(sb->table, path);
	return nsa_dumpreq_ask(&sb->dump, path, timeout_ms, sb_wake, sb);
}
