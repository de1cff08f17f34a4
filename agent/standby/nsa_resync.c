/*
 * nsa_resync.c - the subscriber's resyncs: a master's sessions read again
 * from the store with a loader (nsa_loader.c) while live batches keep
 * being applied, and the slot map adopted when slots move between the same
 * masters.
 *
 * Invariants: a resync removes only sessions of slots its loader read
 * whole from their current owner (nsa_loader_slot_read); a resync that met
 * a slot it could not read is repeated later and does not count towards
 * synced. Runs on the subscriber thread only.
 *
 * Not here: subscriptions and live batches (nsa_standby.c); the conntrack
 * commit itself (nsa_commit.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "nsa_commit.h"
#include "nsa_fence.h"
#include "nsa_log.h"
#include "nsa_resync.h"
#include "nsdp_time.h"

static unsigned int resync_apply(void *arg, unsigned int node,
				 const struct ns_session *s, unsigned int n)
{
	struct nsa_standby *sb = arg;
	const struct sb_node *nd = &sb->nodes[node];
	unsigned int i, loaded = 0;
	uint64_t seen = 0;

	NSDP_TABLE_ASSERT_WRITER(sb->table, NSDP_TABLE_SUBSCRIBER);
	for (i = 0; i < n; i++)
		nsdp_table_prefetch(sb->table, &s[i]);
	if (sb->ct)
		seen = nsdp_table_applied(sb->table);
	for (i = 0; i < n; i++) {
		/* Another gateway pair's session (nsa_live.c). */
		if (s[i].gateway_id >> 8 != sb->conf.store.pair)
			continue;
		if (nsdp_table_apply_resync(sb->table, &s[i], nd->gen,
					    nd->mark) == 0)
			loaded++;
		if (sb->ct)
			nsa_commit_take(sb->ct, sb->table, &s[i], &seen);
	}
	if (sb->ct)
		nsa_commit_flush(sb->ct);
	SB_STAT_ADD(sb, loaded, loaded);
	return loaded;
}

static void resync_bad(void *arg, uint64_t n)
{
	struct nsa_standby *sb = arg;

	SB_STAT_ADD(sb, bad_values, n);
}

static void resync_unauthenticated(void *arg, uint64_t n)
{
	struct nsa_standby *sb = arg;

	SB_STAT_ADD(sb, unauthenticated, n);
}

static void resync_read(void *arg, uint64_t n, uint64_t bytes)
{
	struct nsa_standby *sb = arg;

	SB_STAT_ADD(sb, load_values, n);
	SB_STAT_ADD(sb, load_bytes, bytes);
}

void nsa_sb_resync_close(struct nsa_standby *sb, struct sb_node *nd)
{
	nsa_loader_close(&nd->ld);
	if (nd->resyncing)
		nsdp_table_resync_abort(sb->table);
	nd->resyncing = 0;
}

/* The slots where a resync of node may remove what it did not read: the
 * node's by the map, and read whole by its loader. */
static void node_scope(const struct nsa_standby *sb, unsigned int node,
		       uint8_t *scope)
{
	unsigned int s;

	for (s = 0; s < NS_SLOTS; s++)
		scope[s] = sb->topo.slot_covered[s] &&
			   sb->topo.slot_node[s] == node &&
			   nsa_loader_slot_read(&sb->nodes[node].ld, s);
}

/* The pair's epoch counter as the store holds it now, into epoch_seen:
 * an active's provisional epoch made known before this standby started
 * is in no record it loaded. Bounded (the store just answered the load);
 * a failure leaves epoch_seen as it was. */
static void epoch_counter_read(struct nsa_standby *sb)
{
	struct nsa_store_conf q =
		nsa_store_conf_quick(&sb->conf.store, SB_EPOCH_READ_MS);
	uint64_t e;
	char err[256];

	if (nsa_fence_read(&q, &sb->topo, &e, err, sizeof(err)) == 0)
		nsa_standby_epoch_seen(sb, e);
	else
		NSA_DEBUG("standby: the epoch counter not read (%s)", err);
}

/* Every master loaded: synced (once), and live when the store serves
 * every slot. A store that serves part of them (a cluster being formed,
 * slots left unassigned) holds sessions nobody can read: not live until
 * the topology check sees the rest served and resyncs (said once per
 * count). */
static void sync_check(struct nsa_standby *sb)
{
	unsigned int i, served = nsa_topology_slots_served(&sb->topo);

	for (i = 0; i < sb->n_nodes; i++)
		if (!sb->nodes[i].loaded_once)
			return;
	if (served < NS_SLOTS && served != sb->st.slots_served)
		NSA_WARN("standby: the store serves %u of %u slots (a cluster "
			 "being formed, or slots unassigned): not ready until "
			 "it serves every slot",
			 served, NS_SLOTS);
	__atomic_store_n(&sb->st.slots_served, served, __ATOMIC_RELAXED);
	__atomic_store_n(&sb->st.live, served == NS_SLOTS, __ATOMIC_RELAXED);
	if (sb->st.synced)
		return;
	epoch_counter_read(sb);
	__atomic_store_n(&sb->st.synced, 1, __ATOMIC_RELAXED);
	NSA_INFO("standby: synced, %" PRIu64 " sessions in the table",
		 __atomic_load_n(&sb->st.loaded, __ATOMIC_RELAXED));
}

static void topo_refresh(struct nsa_standby *sb);
static void resync_finish_one(struct nsa_standby *sb, unsigned int node);
static void load_all_finish(struct nsa_standby *sb);

/* A resync done; another at once when one was asked for meanwhile
 * (NS_BATCH_F_RESYNC). */
static void resync_finish(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];

	if (sb->load_all) {
		load_all_finish(sb);
		return;
	}
	resync_finish_one(sb, node);
	if (nd->resync_again && !nd->ld.conn) {
		nd->resync_again = 0;
		nsa_sb_resync_start(sb, node);
	}
}

/* End the table's resync of nd's loader (done) over the slots in
 * sb->scope, and close the loader. */
static void resync_end(struct nsa_standby *sb, struct sb_node *nd)
{
	uint64_t removed;

	/* A session the store no longer holds leaves conntrack with the
	 * table. */
	removed = nsdp_table_resync_finish_each(
		sb->table, nd->gen, nd->mark, sb->scope,
		sb->ct ? nsa_commit_remove : NULL, sb->ct);
	if (sb->ct)
		nsa_commit_flush(sb->ct);
	nd->resyncing = 0; /* resync_finish ended the table's resync */
	NSA_DEBUG("standby: %s of %s:%u done, %" PRIu64 " read, %" PRIu64
		  " removed, %" PRIu32 " slots migrating, %" PRIu64
		  " values (%" PRIu64 " B) read",
		  sb->load_all ? "load of every master" : "resync",
		  nd->addr.host, nd->addr.port, nd->ld.loaded, removed,
		  nd->ld.slots_migrating, nd->ld.values_read,
		  nd->ld.value_bytes);
	nsa_sb_resync_close(sb, nd);
}

/* Whether the load that finished on nd's loader read every slot from
 * whoever held it (moved and unread: the slots it did not). If not,
 * nd's resync is retried later, and at once with a fresh map when a
 * master no longer serves some of them. */
static int resync_complete(struct nsa_standby *sb, struct sb_node *nd,
			   uint32_t moved, uint32_t unread)
{
	if (moved == 0 && unread == 0) {
		nd->unread_warned = 0;
		return 1;
	}
	/* Slots left as they were: read again later. */
	if (nd->unread_warned != ((uint64_t)moved << 32 | unread))
		NSA_WARN(
			"standby: %s:%u%s: %" PRIu32
			" slot(s) of the map no longer served and %" PRIu32
			" migrating slot(s) could not be read on their target; "
			"their sessions were kept",
			nd->addr.host, nd->addr.port,
			sb->load_all ? " (the load of every master)" : "",
			moved, unread);
	nd->unread_warned = (uint64_t)moved << 32 | unread;
	nd->retry_at = nsdp_mono_ns() + SB_BACKOFF_MAX_MS * 1000000ull / 2;
	if (moved)
		topo_refresh(sb);
	return 0;
}

static void resync_finish_one(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[node];
	uint32_t moved = nd->ld.slots_moved, unread = nd->ld.slots_unread;

	node_scope(sb, node, sb->scope);
	/* Counted before the table's resync ends: whoever sees its result
	 * sees it counted. */
	SB_STAT_ADD(sb, resyncs, 1);
	resync_end(sb, nd);
	if (resync_complete(sb, nd, moved, unread)) {
		nd->loaded_once = 1;
		sync_check(sb);
	}
}

/* The load of every master done (master 0's loader): the table's resync
 * ends over every slot it read, each master counts as resynced. When a
 * slot went unread the whole load is retried; else the masters whose
 * resync was asked for meanwhile are resynced. */
static void load_all_finish(struct nsa_standby *sb)
{
	struct sb_node *lead = &sb->nodes[0];
	uint32_t moved = lead->ld.slots_moved, unread = lead->ld.slots_unread;
	unsigned int s, i;

	for (s = 0; s < NS_SLOTS; s++)
		sb->scope[s] = sb->topo.slot_covered[s] &&
			       nsa_loader_slot_read(&lead->ld, s);
	SB_STAT_ADD(sb, resyncs, sb->n_nodes); /* before, as above */
	resync_end(sb, lead);
	if (!resync_complete(sb, lead, moved, unread))
		return;
	sb->load_all = 0;
	for (i = 0; i < sb->n_nodes; i++)
		sb->nodes[i].loaded_once = 1;
	sync_check(sb);
	for (i = 0; i < sb->n_nodes; i++)
		if (sb->nodes[i].resync_again) {
			sb->nodes[i].resync_again = 0;
			nsa_sb_resync_start(sb, i);
		}
}

void nsa_sb_resync_fail(struct nsa_standby *sb, unsigned int node,
			const char *why)
{
	struct sb_node *nd = &sb->nodes[node];

	NSA_WARN("standby: resync of %s:%u failed (%s), retrying",
		 nd->addr.host, nd->addr.port, why);
	nsa_sb_resync_close(sb, nd);
	nd->retry_at = nsdp_mono_ns() + SB_BACKOFF_MAX_MS * 1000000ull / 2;
}

void nsa_sb_topo_adopt(struct nsa_standby *sb, const struct nsa_topology *t)
{
	uint8_t touched[NSA_MAX_NODES] = {0};
	unsigned int s, i, n = 0;

	if (!nsa_topowatch_same_masters(t, &sb->topo)) {
		NSA_WARN("standby: the store's masters changed; resubscribing "
			 "and resyncing");
		SB_STAT_ADD(sb, topology_changes, 1);
		sb->reset = 1;
		return;
	}
	for (s = 0; s < NS_SLOTS; s++) {
		int was = sb->topo.slot_covered[s] ? sb->topo.slot_node[s] : -1;
		int now = t->slot_covered[s] ? t->slot_node[s] : -1;

		if (was == now)
			continue;
		if (was >= 0)
			touched[was] = 1;
		if (now >= 0)
			touched[now] = 1;
		n++;
	}
	memcpy(sb->topo.slot_node, t->slot_node, sizeof(t->slot_node));
	memcpy(sb->topo.slot_covered, t->slot_covered, sizeof(t->slot_covered));
	nsa_topowatch_follow(&sb->watch, &sb->topo);
	if (n)
		NSA_INFO("standby: %u slot(s) moved between masters; "
			 "resyncing the masters concerned",
			 n);
	for (i = 0; i < sb->n_nodes; i++)
		if (touched[i])
			nsa_sb_resync_start(sb, i);
}

/* Fetch the topology now (blocking: only when a master said the map is
 * out of date) and adopt it. */
static void topo_refresh(struct nsa_standby *sb)
{
	char err[256] = "";

	if (nsa_topology_fetch(&sb->conf.store, &sb->fresh, err, sizeof(err)) <
		    0 ||
	    sb->fresh.n_nodes == 0) {
		NSA_WARN("standby: cannot refresh the slot map: %s",
			 err[0] ? err : "no master");
		return;
	}
	nsa_sb_topo_adopt(sb, &sb->fresh);
}

void nsa_sb_resync_start_all(struct nsa_standby *sb)
{
	unsigned int i;

	for (i = 0; i < sb->n_nodes; i++) {
		nsa_sb_resync_close(sb, &sb->nodes[i]);
		sb->nodes[i].retry_at = 0;
	}
	sb->load_all = sb->conf.store.layout == NSA_LAYOUT_LOG &&
		       sb->topo.cluster && sb->n_nodes > 1;
	if (sb->load_all)
		nsa_sb_resync_start(sb, 0);
	else
		for (i = 0; i < sb->n_nodes; i++)
			nsa_sb_resync_start(sb, i);
}

int nsa_sb_resync_running(const struct nsa_standby *sb, unsigned int node)
{
	return sb->nodes[sb->load_all ? 0 : node].ld.conn != NULL;
}

void nsa_sb_resync_after(struct nsa_standby *sb, unsigned int node)
{
	if (nsa_sb_resync_running(sb, node))
		sb->nodes[node].resync_again = 1;
	else
		nsa_sb_resync_start(sb, node);
}

void nsa_sb_resync_start(struct nsa_standby *sb, unsigned int node)
{
	struct sb_node *nd = &sb->nodes[sb->load_all ? 0 : node];
	const struct nsa_loader_sink sink = {
		.apply = resync_apply,
		.bad = resync_bad,
		.arg = sb,
		.batch_key = sb->conf.batch_key,
		.batch_key_len = sb->conf.batch_key_len,
		.unauthenticated = resync_unauthenticated,
		.read = resync_read,
		/* A load of the whole store may fill the table. */
		.expect = sb->load_all || sb->n_nodes == 1
				  ? sb->conf.table_capacity
				  : 0};
	char err[256] = "";
	unsigned int i;

	if (sb->load_all) {
		node = 0;
		for (i = 0; i < sb->n_nodes; i++)
			sb->nodes[i].resync_again = 0;
	}
	nsa_sb_resync_close(sb, nd);
	nd->retry_at = 0;
	nd->resync_again = 0; /* this one begins after what asked for it */
	if (nsa_loader_open(&nd->ld, &sb->conf.store, &sb->topo, node, &sink,
			    err, sizeof(err)) < 0 ||
	    (sb->load_all && nsa_loader_every_master(&nd->ld) < 0)) {
		nsa_sb_resync_fail(sb, node, err[0] ? err : "connect");
		return;
	}
	nd->gen = nsdp_table_resync_begin(sb->table);
	nd->mark = ++sb->resync_counter;
	nd->resyncing = 1;
	nsa_sb_resync_step(
		sb, node,
		nsa_loader_begin(&nd->ld, sb->topo.cluster && !nd->scan_only));
}

void nsa_sb_resync_step(struct nsa_standby *sb, unsigned int node, int rc)
{
	struct sb_node *nd = &sb->nodes[node];

	if (rc == NSA_LOADER_DONE) {
		resync_finish(sb, node);
	} else if (rc == NSA_LOADER_SLOTS_REFUSED) {
		NSA_WARN("standby: %s:%u refuses CLUSTER GETKEYSINSLOT (%s): "
			 "loading with SCAN",
			 nd->addr.host, nd->addr.port, nd->ld.why);
		nd->scan_only = 1;
		nsa_sb_resync_start(sb, node);
	} else if (rc == NSA_LOADER_RACED) {
		/* Nothing applied yet (the log's records go to the table at
		 * the end): read the log again under the new mark. */
		NSA_INFO("standby: %s:%u: %s: loading again", nd->addr.host,
			 nd->addr.port, nd->ld.why);
		nsa_sb_resync_start(sb, node);
	} else if (rc < 0) {
		nsa_sb_resync_fail(sb, node, nd->ld.why);
	}
}
