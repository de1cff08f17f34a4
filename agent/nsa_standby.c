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
 *   sequence state. Other threads read stats (relaxed atomics) and ask for
 *   dumps through a mutex/condvar handshake.
 * - A master's resync is either running (loader connected, table resync
 *   begun) or not; restarting one aborts the running one first.
 * - Any subscription trouble (lost connection, sunsubscribe, MOVED, error,
 *   a master change seen by the watcher, nsa_topowatch.c) resets
 *   everything: topology refetched, every master resubscribed and resynced.
 * - A subscription can die without a sound (a firewall that forgets the
 *   connection): one silent for [standby] ping_ms gets a PING; unanswered
 *   for twice that, it is declared dead and everything resets. A resync
 *   waiting three times ping_ms for a reply is abandoned and retried.
 * - A batch is applied only when it decodes, carries a valid HMAC when
 *   [store] batch_key_file is set, is not fenced by a newer epoch of its
 *   gateway and is not stale in its sequence; otherwise it is counted and
 *   dropped.
 *
 * Not here: replicas as load sources.
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

#include <rte_cycles.h>

#include "ns_batch.h"
#include "ns_record.h"
#include "ns_slot.h"
#include "nsa_cluster.h"
#include "nsa_conn.h"
#include "nsa_loader.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsa_topowatch.h"
#include "nsdp_stat.h"
#include "nsdp_time.h"

#define SB_BACKOFF_MIN_MS 100
#define SB_BACKOFF_MAX_MS 2000
#define SB_SUBSCRIBE_TIMEOUT_MS 2000
#define SB_PURGE_PERIOD_NS (1000ull * 1000 * 1000)
#define SB_MAX_PUBS 1024
#define SB_MAX_GATEWAYS 64

struct sb_node {
	struct nsa_addr addr;
	char channel[NS_CHANNEL_MAX];
	struct nsa_conn *sub;
	/* Liveness of the subscription: when it last delivered anything, and
	 * when the PING that asks for a sign of life went (0: none due). */
	uint64_t quiet_since_ns;
	uint64_t ping_sent_ns;
	int loaded_once; /* a resync of this master finished */
	int scan_only; /* GETKEYSINSLOT was refused: load with SCAN */
	struct nsa_loader ld;
	int resyncing; /* the table's resync for this master is begun */
	uint64_t gen;
	uint32_t mark;
	uint64_t retry_at; /* monotonic ns; 0 = no retry pending */
};

/* The last batch seen from one publisher on one channel (named by its
 * slot). Kept across resubscriptions: a publisher's seq on a channel only
 * grows for its whole life, whichever master serves the channel, so a
 * batch at or below last is an old one delivered late. */
struct pub_seq {
	uint32_t publisher_id;
	uint16_t channel_slot;
	uint8_t rebase; /* resubscribed since: the next batch is no gap */
	uint64_t last;
};

struct gw_epoch {
	uint32_t gateway_id;
	uint32_t epoch;
};

struct nsa_standby {
	struct nsa_config conf;
	struct nsdp_table *table;
	pthread_t thread;
	int running;
	int stop;
	int wake_fd;

	struct nsa_topology topo;
	struct sb_node nodes[NSA_MAX_NODES];
	unsigned int n_nodes;
	uint32_t resync_counter;
	int reset; /* the run loop must tear down and start over */

	struct nsa_topowatch watch;
	uint8_t scope[NS_SLOTS];

	struct pub_seq pubs[SB_MAX_PUBS];
	unsigned int n_pubs;
	struct gw_epoch gws[SB_MAX_GATEWAYS];
	unsigned int n_gws;

	pthread_mutex_t dump_lock;
	pthread_cond_t dump_cond;
	int dump_requested;
	char dump_path[4096];
	int64_t dump_result;
	uint64_t dump_serial;

	struct nsa_standby_stats st;
	/* Lag of the batch being applied: each record's timestamp and the TSC
	 * when it was in the table. */
	uint64_t lag_ts[NS_BATCH_MAX_RECORDS];
	uint64_t lag_tsc[NS_BATCH_MAX_RECORDS];
	double ns_per_tsc; /* 0: count every record at the batch's end */
};

#define SB_STAT_ADD(sb, f, v) NSDP_STAT_ADD((sb)->st.f, v)

static int stopping(const struct nsa_standby *sb)
{
	return __atomic_load_n(&sb->stop, __ATOMIC_ACQUIRE);
}

static void wake(void *arg)
{
	struct nsa_standby *sb = arg;
	uint64_t one = 1;

	if (write(sb->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter saturated: the thread is awake anyway */
	}
}

/* ---- resyncs ------------------------------------------------------ */

static unsigned int resync_apply(void *arg, unsigned int node,
				 const struct ns_session *s, unsigned int n)
{
	struct nsa_standby *sb = arg;
	const struct sb_node *nd = &sb->nodes[node];
	unsigned int i, loaded = 0;

	for (i = 0; i < n; i++)
		nsdp_table_prefetch(sb->table, &s[i]);
	for (i = 0; i < n; i++)
		if (nsdp_table_apply_resync(sb->table, &s[i], nd->gen,
					    nd->mark) == 0)
			loaded++;
	SB_STAT_ADD(sb, loaded, loaded);
	return loaded;
}

static void resync_bad(void *arg, uint64_t n)
{
	struct nsa_standby *sb = arg;

	SB_STAT_ADD(sb, bad_values, n);
}

static void resync_close(struct nsa_standby *sb, struct sb_node *nd)
{
	nsa_loader_close(&nd->ld);
	if (nd->resyncing)
		nsdp_table_resync_abort(sb->table);
	nd->resyncing = 0;
}

static void node_scope(const struct nsa_standby *sb, unsigned int node,
		       uint8_t *scope)
{
	unsigned int s;

	for (s = 0; s < NS_SLOTS; s++)
		scope[s] = sb->topo.slot_covered[s] &&
			   sb->topo.slot_node[s] == node;
}

static void sync_check(struct nsa_standby *sb)
{
	unsigned int i;

	if (sb->st.synced)
		return;
	for (i = 0; i < sb->n_nodes; i++)
		if (!sb->nodes[i].loaded_once)
			return;
	__atomic_store_n(&sb->st.synced, 1, __ATOMIC_RELAXED);
	NSA_INFO("standby: synced, %" PRIu64 " sessions in the table",
		 __atomic_load_n(&sb->st.loaded, __ATOMIC_RELAXED));
}

static void resync_finish(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];
	uint64_t removed;

	node_scope(sb, node, sb->scope);
	removed = nsdp_table_resync_finish(sb->table, nd->gen, nd->mark,
					   sb->scope);
	nd->resyncing = 0; /* resync_finish ended the table's resync */
	resync_close(sb, nd);
	nd->loaded_once = 1;
	SB_STAT_ADD(sb, resyncs, 1);
	NSA_DEBUG("standby: resync of %s:%u done, %" PRIu64 " read, %" PRIu64
		  " removed",
		  nd->addr.host, nd->addr.port, nd->ld.loaded, removed);
	sync_check(sb);
}

static void resync_fail(struct nsa_standby *sb, unsigned int node,
			const char *why)
{
	struct sb_node *nd = &sb->nodes[node];

	NSA_WARN("standby: resync of %s:%u failed (%s), retrying",
		 nd->addr.host, nd->addr.port, why);
	resync_close(sb, nd);
	nd->retry_at = nsdp_mono_ns() + SB_BACKOFF_MAX_MS * 1000000ull / 2;
}

/* What a loader call returned: finish, fail, or fall back to SCAN. */
static void resync_step(struct nsa_standby *sb, unsigned int node, int rc);

/* Start (or restart) the resync of one master. */
static void resync_start(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];
	const struct nsa_loader_sink sink = {resync_apply, resync_bad, sb};
	char err[256] = "";

	resync_close(sb, nd);
	nd->retry_at = 0;
	if (nsa_loader_open(&nd->ld, &sb->conf.store, &sb->topo, node, &sink,
			    err, sizeof(err)) < 0) {
		resync_fail(sb, node, err[0] ? err : "connect");
		return;
	}
	nd->gen = nsdp_table_resync_begin(sb->table);
	nd->mark = ++sb->resync_counter;
	nd->resyncing = 1;
	resync_step(sb, node,
		    nsa_loader_begin(&nd->ld,
				     sb->topo.cluster && !nd->scan_only));
}

static void resync_step(struct nsa_standby *sb, unsigned int node, int rc)
{
	struct sb_node *nd = &sb->nodes[node];

	if (rc == NSA_LOADER_DONE) {
		resync_finish(sb, node);
	} else if (rc == NSA_LOADER_SLOTS_REFUSED) {
		NSA_WARN("standby: %s:%u refuses CLUSTER GETKEYSINSLOT (%s): "
			 "loading with SCAN",
			 nd->addr.host, nd->addr.port, nd->ld.why);
		nd->scan_only = 1;
		resync_start(sb, node);
	} else if (rc < 0) {
		resync_fail(sb, node, nd->ld.why);
	}
}

/* ---- live batches ------------------------------------------------- */

/* Returns 0 to apply, -1 to drop a batch from an older epoch. */
static int epoch_check(struct nsa_standby *sb, const struct ns_batch_hdr *h)
{
	unsigned int i;

	for (i = 0; i < sb->n_gws; i++) {
		if (sb->gws[i].gateway_id != h->gateway_id)
			continue;
		if (h->epoch < sb->gws[i].epoch)
			return -1;
		sb->gws[i].epoch = h->epoch;
		return 0;
	}
	if (sb->n_gws == SB_MAX_GATEWAYS)
		sb->n_gws = 0; /* forget everything rather than fence wrongly */
	sb->gws[sb->n_gws++] = (struct gw_epoch){.gateway_id = h->gateway_id,
						 .epoch = h->epoch};
	return 0;
}

enum seq_verdict { SEQ_NEXT, SEQ_GAP, SEQ_STALE };

/* Where a batch stands in its (publisher, channel) sequence. */
static enum seq_verdict seq_check(struct nsa_standby *sb, unsigned int node,
				  const struct ns_batch_hdr *h)
{
	uint16_t slot = sb->topo.nodes[node].channel_slot;
	struct pub_seq *p = NULL;
	enum seq_verdict v;
	unsigned int i;

	for (i = 0; i < sb->n_pubs; i++) {
		if (sb->pubs[i].publisher_id == h->publisher_id &&
		    sb->pubs[i].channel_slot == slot) {
			p = &sb->pubs[i];
			break;
		}
	}
	if (!p) {
		if (sb->n_pubs == SB_MAX_PUBS)
			sb->n_pubs = 0;
		p = &sb->pubs[sb->n_pubs++];
		*p = (struct pub_seq){.publisher_id = h->publisher_id,
				      .channel_slot = slot,
				      .last = h->seq};
		/* Not a gap, whatever its seq: the subscription was in place
		 * before this master's load began, so what the publisher sent
		 * earlier reached us (and it would be known) or was in the
		 * store when the load read it. */
		return SEQ_NEXT;
	}
	/* Already seen, or older than what was: a master cut off from its
	 * cluster hands its channel's messages over the cluster bus to the
	 * master that replaced it once the two meet again, long after the
	 * writers replayed those records and moved on. */
	if (h->seq <= p->last)
		return SEQ_STALE;
	/* The first batch after a resubscription is no gap either: a load
	 * follows every subscription. */
	v = !p->rebase && h->seq > p->last + 1 ? SEQ_GAP : SEQ_NEXT;
	p->rebase = 0;
	p->last = h->seq;
	return v;
}

static void on_batch(struct nsa_standby *sb, unsigned int node,
		     const uint8_t *buf, size_t len)
{
	struct ns_batch_iter it;
	struct ns_batch_hdr h;
	const uint8_t *body;
	struct ns_session s;
	enum seq_verdict seq;
	uint64_t now, tsc_now, n = 0;
	uint32_t i, k = 0;
	int rc;

	if (ns_batch_decode(buf, len, &h, &body) < 0) {
		SB_STAT_ADD(sb, bad_messages, 1);
		return;
	}
	/* With a batch key, only batches signed with it count: a writer
	 * without the key (or a forger on the channel) changes nothing. */
	if (sb->conf.batch_key_len &&
	    ns_batch_verify(buf, len, (const uint8_t *)sb->conf.batch_key,
			    sb->conf.batch_key_len) != 0) {
		SB_STAT_ADD(sb, unauthenticated, 1);
		return;
	}
	if (epoch_check(sb, &h) < 0) {
		SB_STAT_ADD(sb, fenced, 1);
		return;
	}
	seq = seq_check(sb, node, &h);
	if (seq == SEQ_STALE) {
		SB_STAT_ADD(sb, stale, 1);
		return;
	}
	ns_batch_iter_init(&it, body, h.body_len);
	while ((rc = ns_batch_iter_next(&it, &s)) == 1) {
		if (nsdp_table_apply(sb->table, &s) == 0)
			n++;
		if (k < NS_BATCH_MAX_RECORDS) {
			sb->lag_ts[k] = s.timestamp_ns;
			sb->lag_tsc[k++] = rte_rdtsc();
		}
	}
	/* A record's lag ends when it is in the table: the wall clock is read
	 * once per batch, and each record's time is that minus the TSC
	 * cycles between its apply and now. */
	now = nsdp_realtime_ns();
	tsc_now = rte_rdtsc();
	for (i = 0; i < k; i++) {
		uint64_t at =
			now - (uint64_t)((double)(tsc_now - sb->lag_tsc[i]) *
					 sb->ns_per_tsc);

		nsa_standby_lag_record(
			&sb->st,
			at > sb->lag_ts[i] ? (at - sb->lag_ts[i]) / 1000 : 0);
	}
	SB_STAT_ADD(sb, batches, 1);
	SB_STAT_ADD(sb, records, n);
	if (seq == SEQ_GAP) {
		SB_STAT_ADD(sb, gaps, 1);
		NSA_WARN("standby: gap on %s from publisher %u (seq %" PRIu64
			 "), resyncing %s:%u",
			 sb->nodes[node].channel, h.publisher_id, h.seq,
			 sb->nodes[node].addr.host, sb->nodes[node].addr.port);
		resync_start(sb, node);
	}
}

static int is_str(const redisReply *r, const char *s)
{
	return r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

static void on_push(struct nsa_standby *sb, unsigned int node, redisReply *r)
{
	if (r->type == REDIS_REPLY_ERROR) {
		NSA_WARN("standby: %s:%u: %s", sb->nodes[node].addr.host,
			 sb->nodes[node].addr.port, r->str);
		sb->reset = 1;
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
		return;
	if ((is_str(r->element[0], "smessage") ||
	     is_str(r->element[0], "message")) &&
	    r->element[2]->type == REDIS_REPLY_STRING)
		on_batch(sb, node, (const uint8_t *)r->element[2]->str,
			 r->element[2]->len);
	else if (is_str(r->element[0], "sunsubscribe") ||
		 is_str(r->element[0], "unsubscribe"))
		sb->reset = 1;
}

static void sub_drain(struct nsa_standby *sb, unsigned int node)
{
	struct nsa_conn *c = sb->nodes[node].sub;
	redisReply *r;
	int rc;

	while (!sb->reset) {
		rc = nsa_conn_reply(c, &r);
		if (rc < 0) {
			sb->reset = 1;
			return;
		}
		if (rc == 0)
			return;
		on_push(sb, node, r);
		freeReplyObject(r);
	}
}

/* ---- dump requests -------------------------------------------------- */

static void dump_serve(struct nsa_standby *sb)
{
	char path[sizeof(sb->dump_path)];
	int64_t rc;

	if (!__atomic_load_n(&sb->dump_requested, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&sb->dump_lock);
	if (!sb->dump_requested) { /* withdrawn meanwhile */
		pthread_mutex_unlock(&sb->dump_lock);
		return;
	}
	memcpy(path, sb->dump_path, sizeof(path));
	sb->dump_requested = 0;
	pthread_mutex_unlock(&sb->dump_lock);

	/* The caller may time out meanwhile; it does not wait for the lock. */
	rc = nsdp_table_dump(sb->table, path);

	pthread_mutex_lock(&sb->dump_lock);
	sb->dump_result = rc;
	sb->dump_serial++;
	pthread_cond_broadcast(&sb->dump_cond);
	pthread_mutex_unlock(&sb->dump_lock);
}

/* ---- setup and the loop --------------------------------------------- */

static void sb_teardown(struct nsa_standby *sb)
{
	unsigned int i;

	for (i = 0; i < sb->n_nodes; i++) {
		resync_close(sb, &sb->nodes[i]);
		sb->nodes[i].retry_at = 0;
		nsa_conn_free(sb->nodes[i].sub);
		sb->nodes[i].sub = NULL;
	}
	sb->n_nodes = 0;
	for (i = 0; i < sb->n_pubs; i++)
		sb->pubs[i].rebase = 1;
	nsa_topowatch_pause(&sb->watch);
}

static int sb_subscribe(struct nsa_standby *sb, unsigned int i, char *err,
			size_t errlen)
{
	struct sb_node *nd = &sb->nodes[i];
	redisReply *r = NULL;
	int ok;

	nd->sub = nsa_conn_new(&nd->addr);
	if (!nd->sub) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (nsa_conn_open(nd->sub, &sb->conf.store, err, errlen) < 0)
		return -ECONNREFUSED;
	nsa_conn_cmd(nd->sub, 2);
	nsa_conn_arg_str(nd->sub,
			 sb->topo.sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE");
	nsa_conn_arg_str(nd->sub, nd->channel);
	if (nsa_conn_cmd_end(nd->sub, NULL) == 0)
		nsa_conn_call(nd->sub, SB_SUBSCRIBE_TIMEOUT_MS, &r);
	ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	     (is_str(r->element[0], "ssubscribe") ||
	      is_str(r->element[0], "subscribe"));
	if (!ok)
		snprintf(err, errlen, "subscribe to %s on %s:%u: %s",
			 nd->channel, nd->addr.host, nd->addr.port,
			 !r				? nd->sub->err
			 : r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
	if (r)
		freeReplyObject(r);
	if (!ok)
		return -EPROTO;
	nd->quiet_since_ns = nsdp_mono_ns();
	nd->ping_sent_ns = 0;
	return 0;
}

/* Ask a quiet subscription for a sign of life, and give up on one whose
 * PING stays unanswered for twice ping_ms (so a standby that was itself
 * paused gets its answer before it judges): 0, or -1 when node's
 * subscription is dead. Called after the round's reads. */
static int sub_check_alive(struct nsa_standby *sb, unsigned int node,
			   uint64_t now)
{
	struct sb_node *nd = &sb->nodes[node];
	uint64_t ping_ns = (uint64_t)sb->conf.ping_ms * 1000000ull;

	if (ping_ns == 0)
		return 0;
	if (nd->ping_sent_ns && now - nd->ping_sent_ns >= 2 * ping_ns) {
		NSA_WARN("standby: no word from %s:%u for %" PRIu64
			 " ms, PING unanswered; resubscribing",
			 nd->addr.host, nd->addr.port,
			 (now - nd->quiet_since_ns) / 1000000);
		SB_STAT_ADD(sb, dead_subscriptions, 1);
		return -1;
	}
	if (now - nd->quiet_since_ns >= ping_ns && nd->ping_sent_ns == 0) {
		nsa_conn_cmd(nd->sub, 1);
		nsa_conn_arg_str(nd->sub, "PING");
		if (nsa_conn_cmd_end(nd->sub, NULL) != 0)
			return -1;
		nd->ping_sent_ns = now;
	}
	/* A few bytes: written at once, or on a later round. */
	if (nsa_conn_want_write(nd->sub) && nsa_conn_send(nd->sub) < 0)
		return -1;
	return 0;
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
		resync_fail(sb, node, "no reply");
}

/* Fetch the topology and subscribe everywhere, with backoff, until done
 * or stopped. Returns 0 when subscribed. */
static int sb_setup(struct nsa_standby *sb)
{
	char err[256], last_err[256] = "";
	int backoff = SB_BACKOFF_MIN_MS;
	unsigned int i;

	while (!stopping(sb)) {
		int rc;

		err[0] = 0;
		rc = nsa_topology_fetch(&sb->conf.store, &sb->topo, err,
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
				rc = sb_subscribe(sb, i, err, sizeof(err));
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
		nsdp_sleep_ms_unless(&sb->stop, (unsigned int)backoff);
		backoff = backoff * 2 > SB_BACKOFF_MAX_MS ? SB_BACKOFF_MAX_MS
							  : backoff * 2;
	}
	return -ECANCELED;
}

static void sb_run(struct nsa_standby *sb)
{
	struct pollfd pfd[1 + 2 * NSA_MAX_NODES];
	int who[1 + 2 * NSA_MAX_NODES]; /* node*2 (+1 for the loader) */
	uint64_t next_purge = nsdp_mono_ns() + SB_PURGE_PERIOD_NS;
	unsigned int i;

	for (i = 0; i < sb->n_nodes; i++)
		resync_start(sb, i);
	for (i = 0; i < sb->n_nodes; i++)
		sub_drain(sb, i); /* replies read along with the confirmation */

	while (!stopping(sb) && !sb->reset) {
		uint64_t now = nsdp_mono_ns();
		int n = 0, k, timeout = 100;
		uint64_t v;

		if (nsa_topowatch_changed(&sb->watch)) {
			NSA_WARN("standby: the store's masters changed under "
				 "working subscriptions; resubscribing and "
				 "resyncing");
			SB_STAT_ADD(sb, topology_changes, 1);
			sb->reset = 1;
			break;
		}

		if (now >= next_purge) {
			nsdp_table_purge_tombstones(sb->table);
			next_purge = now + SB_PURGE_PERIOD_NS;
		}
		pfd[n] = (struct pollfd){.fd = sb->wake_fd, .events = POLLIN};
		who[n++] = -1;
		for (i = 0; i < sb->n_nodes; i++) {
			struct sb_node *nd = &sb->nodes[i];
			struct nsa_loader *ld = &nd->ld;

			pfd[n] = (struct pollfd){.fd = nd->sub->fd,
						 .events = POLLIN};
			who[n++] = (int)(2 * i);
			if (!ld->conn && nd->retry_at && now >= nd->retry_at)
				resync_start(sb, i);
			if (ld->conn && nsa_loader_flush(ld) < 0)
				resync_fail(sb, i, ld->why);
			if (ld->conn) {
				pfd[n] = (struct pollfd){
					.fd = ld->conn->fd,
					.events = (short)(POLLIN |
							  (nsa_conn_want_write(
								   ld->conn)
								   ? POLLOUT
								   : 0))};
				who[n++] = (int)(2 * i + 1);
			} else if (nd->retry_at) {
				timeout = 20;
			}
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			NSA_ERR("standby: poll: %s", strerror(errno));
			sb->reset = 1;
			break;
		}
		for (k = 0; k < n && !sb->reset; k++) {
			unsigned int node;

			if (!pfd[k].revents)
				continue;
			if (who[k] < 0) {
				if (read(sb->wake_fd, &v, sizeof(v)) < 0) {
					/* already drained */
				}
				continue;
			}
			node = (unsigned int)who[k] / 2;
			if (who[k] & 1) {
				if (sb->nodes[node].ld.conn)
					resync_step(sb, node,
						    nsa_loader_on_readable(
							    &sb->nodes[node].ld));
				continue;
			}
			if (nsa_conn_recv(sb->nodes[node].sub) < 0) {
				NSA_WARN("standby: lost subscription to "
					 "%s:%u: %s",
					 sb->nodes[node].addr.host,
					 sb->nodes[node].addr.port,
					 sb->nodes[node].sub->err);
				sb->reset = 1;
				break;
			}
			sb->nodes[node].quiet_since_ns =
				nsdp_mono_ns();
			sb->nodes[node].ping_sent_ns = 0;
			sub_drain(sb, node);
		}
		now = nsdp_mono_ns();
		for (i = 0; i < sb->n_nodes && !sb->reset; i++) {
			if (sub_check_alive(sb, i, now) < 0)
				sb->reset = 1;
			resync_check_alive(sb, i, now);
		}
		dump_serve(sb);
	}
}

static void *sb_main(void *arg)
{
	struct nsa_standby *sb = arg;

	while (!stopping(sb)) {
		if (sb_setup(sb) < 0)
			break;
		sb->reset = 0;
		sb_run(sb);
		sb_teardown(sb);
		if (sb->reset && !stopping(sb)) {
			SB_STAT_ADD(sb, resubscribes, 1);
			nsdp_sleep_ms_unless(&sb->stop, SB_BACKOFF_MIN_MS);
		}
	}
	sb_teardown(sb);
	dump_serve(sb);
	return NULL;
}

/* ---- public interface ----------------------------------------------- */

struct nsa_standby *nsa_standby_create(const struct nsa_config *conf)
{
	struct nsa_standby *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->conf = *conf;
	sb->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sb->table = nsdp_table_create("nsa_sb", conf->table_capacity);
	if (sb->wake_fd < 0 || !sb->table) {
		NSA_ERR("standby: cannot create the table of %u sessions",
			conf->table_capacity);
		if (sb->wake_fd >= 0)
			close(sb->wake_fd);
		nsdp_table_free(sb->table);
		free(sb);
		return NULL;
	}
	pthread_mutex_init(&sb->dump_lock, NULL);
	pthread_cond_init(&sb->dump_cond, NULL);
	nsa_topowatch_init(&sb->watch, &sb->conf.store,
			   sb->conf.topology_check_ms, &sb->stop, wake, sb);
	if (rte_get_tsc_hz())
		sb->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	return sb;
}

int nsa_standby_start(struct nsa_standby *sb)
{
	int rc;

	if (sb->running)
		return -EALREADY;
	__atomic_store_n(&sb->stop, 0, __ATOMIC_RELEASE);
	rc = pthread_create(&sb->thread, NULL, sb_main, sb);
	if (rc != 0)
		return -rc;
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
	wake(sb);
	pthread_join(sb->thread, NULL);
	nsa_topowatch_join(&sb->watch);
	sb->running = 0;
}

void nsa_standby_free(struct nsa_standby *sb)
{
	if (!sb)
		return;
	nsa_standby_stop(sb);
	nsdp_table_free(sb->table);
	close(sb->wake_fd);
	pthread_mutex_destroy(&sb->dump_lock);
	pthread_cond_destroy(&sb->dump_cond);
	nsa_topowatch_fini(&sb->watch);
	free(sb);
}

struct nsdp_table *nsa_standby_table(struct nsa_standby *sb)
{
	return sb->table;
}

void nsa_standby_stats(const struct nsa_standby *sb,
		       struct nsa_standby_stats *s)
{
	const struct nsa_standby_stats *st = &sb->st;
	unsigned int i;

#define LOAD(f) s->f = __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	LOAD(batches);
	LOAD(records);
	LOAD(loaded);
	LOAD(gaps);
	LOAD(resyncs);
	LOAD(bad_messages);
	LOAD(resubscribes);
	LOAD(topology_changes);
	LOAD(stale);
	LOAD(dead_subscriptions);
	LOAD(synced);
	LOAD(lag_count);
	LOAD(lag_sum_us);
	LOAD(lag_max_us);
	LOAD(fenced);
	LOAD(unauthenticated);
	LOAD(bad_values);
	for (i = 0; i < NSA_STANDBY_LAG_BUCKETS; i++)
		LOAD(lag_hist[i]);
#undef LOAD
}


int64_t nsa_standby_dump(struct nsa_standby *sb, const char *path,
			 int timeout_ms)
{
	struct timespec deadline;
	uint64_t serial;
	int64_t rc;

	if (strlen(path) >= sizeof(sb->dump_path))
		return -ENAMETOOLONG;
	if (!sb->running)
		return nsdp_table_dump(sb->table, path);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&sb->dump_lock);
	while (sb->dump_requested) /* another caller's dump */
		if (pthread_cond_timedwait(&sb->dump_cond, &sb->dump_lock,
					   &deadline) == ETIMEDOUT) {
			pthread_mutex_unlock(&sb->dump_lock);
			return -ETIMEDOUT;
		}
	snprintf(sb->dump_path, sizeof(sb->dump_path), "%s", path);
	__atomic_store_n(&sb->dump_requested, 1, __ATOMIC_RELEASE);
	serial = sb->dump_serial;
	wake(sb);
	while (sb->dump_serial == serial) {
		if (pthread_cond_timedwait(&sb->dump_cond, &sb->dump_lock,
					   &deadline) == ETIMEDOUT &&
		    sb->dump_serial == serial) {
			sb->dump_requested = 0; /* not taken yet: withdraw */
			pthread_mutex_unlock(&sb->dump_lock);
			return -ETIMEDOUT;
		}
	}
	rc = sb->dump_result;
	pthread_mutex_unlock(&sb->dump_lock);
	return rc;
}
