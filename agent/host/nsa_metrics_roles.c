/*
 * nsa_metrics_roles.c - the active's and the standby's metrics and
 * readiness, as natsync-agent and natsync-gateway serve them
 * (nsa_metrics.h; the names are documented in docs/operations.md).
 *
 * Everything here runs on the program's main loop, reading the counters
 * the REPORT line reads (relaxed atomics summed per writer, the
 * subscriber's stats, the table's counters): no lock, nothing a writer,
 * the subscriber or the fast path waits for.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nsa_active.h"
#include "nsa_metrics_roles.h"
#include "nsa_standby.h"

void nsa_metrics_common(struct nsa_mx *m, uint32_t epoch, int ready)
{
	nsa_mx_family(m, "natsync_build_info", "gauge",
		      "Always 1; the version in a label.");
	nsa_mx_sample(m, "natsync_build_info", 1, "version", NATSYNC_VERSION,
		      NULL);
	nsa_mx_gauge(m, "natsync_ready", ready,
		     "1 when /readyz answers 200 (ready), 0 otherwise.");
	nsa_mx_gauge(m, "natsync_epoch", epoch,
		     "The program's epoch ([agent] epoch or the one it took).");
}

void nsa_metrics_active(struct nsa_mx *m, const struct nsa_active *a)
{
	struct nsa_active_stats st;
	struct nsa_writer_health h;
	unsigned int i, k;
	char idx[16];

	nsa_active_stats(a, &st);
	nsa_mx_counter(m, "natsync_records_drained_total", st.records,
		       "Records the writers took from the lanes.");
	nsa_mx_counter(m, "natsync_records_acked_total", st.acked,
		       "Records whose commands the store acknowledged.");
	nsa_mx_counter(m, "natsync_records_resent_total", st.resent,
		       "Records sent again after an error.");
	nsa_mx_counter(m, "natsync_records_replayed_total", st.replayed,
		       "Acknowledged records sent again after a master was "
		       "lost (the replay window).");
	nsa_mx_family(m, "natsync_records_dropped_total", "counter",
		      "Records dropped, by reason: lane_full (a lane refused "
		      "them), fenced (below the store's epoch), store_refused "
		      "(given up by the agent).");
	nsa_mx_sample(m, "natsync_records_dropped_total", (double)st.lane_drops,
		      "reason", "lane_full", NULL);
	nsa_mx_sample(m, "natsync_records_dropped_total", (double)st.fenced,
		      "reason", "fenced", NULL);
	nsa_mx_sample(m, "natsync_records_dropped_total",
		      (double)(st.dropped - st.fenced), "reason",
		      "store_refused", NULL);
	nsa_mx_counter(m, "natsync_batches_total", st.batches,
		       "Batch notifications the store acknowledged.");
	nsa_mx_gauge(m, "natsync_records_in_flight", (double)st.inflight,
		     "Records sent, not yet acknowledged.");
	nsa_mx_family(m, "natsync_store_commands_total", "counter",
		      "Commands acknowledged, by command.");
	nsa_mx_sample(m, "natsync_store_commands_total", (double)st.sets,
		      "command", "set", NULL);
	nsa_mx_sample(m, "natsync_store_commands_total", (double)st.dels,
		      "command", "del", NULL);
	nsa_mx_counter(m, "natsync_store_reconnects_total", st.reconnects,
		       "Writer connections opened again after a loss.");
	nsa_mx_family(m, "natsync_store_refusals_total", "counter",
		      "Error replies from the store, by kind.");
	nsa_mx_sample(m, "natsync_store_refusals_total", (double)st.moved,
		      "kind", "moved", NULL);
	nsa_mx_sample(m, "natsync_store_refusals_total", (double)st.ask, "kind",
		      "ask", NULL);
	nsa_mx_sample(m, "natsync_store_refusals_total", (double)st.tryagain,
		      "kind", "tryagain", NULL);
	nsa_mx_sample(m, "natsync_store_refusals_total", (double)st.clusterdown,
		      "kind", "clusterdown", NULL);
	nsa_mx_sample(m, "natsync_store_refusals_total",
		      (double)st.other_errors, "kind", "other", NULL);
	nsa_mx_counter(m, "natsync_store_topology_refreshes_total",
		       st.topology_refreshes,
		       "Cluster topologies fetched by the writers.");
	nsa_mx_counter(m, "natsync_store_corrections_total",
		       st.store_corrections,
		       "Records published with what the store holds after it "
		       "refused a write for good.");
	nsa_mx_gauge(m, "natsync_fence_epoch", a ? nsa_active_fence(a) : 0,
		     "The store's epoch counter as the writers last read it; "
		     "above natsync_epoch, this active is fenced.");

	nsa_mx_family(m, "natsync_writer_connected", "gauge",
		      "1 when the writer is connected to its masters and not "
		      "retrying, per master.");
	for (i = 0; i < nsa_active_writers(a); i++) {
		nsa_active_writer_health(a, i, &h);
		snprintf(idx, sizeof(idx), "%u", i);
		if (h.n_masters == 0)
			nsa_mx_sample(m, "natsync_writer_connected",
				      h.connected, "writer", idx, "master", "",
				      NULL);
		for (k = 0; k < h.n_masters; k++)
			nsa_mx_sample(m, "natsync_writer_connected",
				      h.connected, "writer", idx, "master",
				      h.masters[k], NULL);
	}
	nsa_mx_family(m, "natsync_writer_retrying_seconds", "gauge",
		      "How long the writer has been retrying its connections "
		      "(0 when connected).");
	for (i = 0; i < nsa_active_writers(a); i++) {
		nsa_active_writer_health(a, i, &h);
		snprintf(idx, sizeof(idx), "%u", i);
		nsa_mx_sample(m, "natsync_writer_retrying_seconds",
			      (double)h.retry_ms / 1000.0, "writer", idx, NULL);
	}
	nsa_mx_family(m, "natsync_writer_records_acked_total", "counter",
		      "Records acknowledged, per writer.");
	for (i = 0; i < nsa_active_writers(a); i++) {
		nsa_active_writer_health(a, i, &h);
		snprintf(idx, sizeof(idx), "%u", i);
		nsa_mx_sample(m, "natsync_writer_records_acked_total",
			      (double)h.acked, "writer", idx, NULL);
	}
}

/* The lag histogram's bounds, us. The standby's buckets are finer
 * (nsa_standby.h); each bound counts the buckets that end at or below
 * it, so a bound counts the lags below the bucket edge just under it
 * (at most 3.1 % under the bound). */
static const uint64_t lag_bounds_us[] = {
	50,	 100,	  250,	    500,      1000,	2500,	5000,
	10000,	 25000,	  50000,    100000,   250000,	500000, 1000000,
	2500000, 5000000, 10000000, 30000000, 60000000,
};
#define N_LAG_BOUNDS (sizeof(lag_bounds_us) / sizeof(lag_bounds_us[0]))

/* One past the largest lag bucket b holds (us). */
static uint64_t lag_bucket_end(unsigned int b)
{
	unsigned int e, sub;

	if (b < NSA_STANDBY_LAG_SUB)
		return b + 1;
	e = NSA_STANDBY_LAG_SUB_EXP +
	    (b - NSA_STANDBY_LAG_SUB) / NSA_STANDBY_LAG_SUB;
	sub = (b - NSA_STANDBY_LAG_SUB) % NSA_STANDBY_LAG_SUB;
	return (uint64_t)(NSA_STANDBY_LAG_SUB + sub + 1)
	       << (e - NSA_STANDBY_LAG_SUB_EXP);
}

static void lag_histogram(struct nsa_mx *m, const struct nsa_standby_stats *st)
{
	uint64_t counts[N_LAG_BOUNDS] = {0}, above = 0;
	double le[N_LAG_BOUNDS];
	unsigned int b, k = 0;

	for (k = 0; k < N_LAG_BOUNDS; k++)
		le[k] = (double)lag_bounds_us[k] / 1e6;
	k = 0;
	for (b = 0; b < NSA_STANDBY_LAG_BUCKETS; b++) {
		int last = b == NSA_STANDBY_LAG_BUCKETS - 1;

		while (k < N_LAG_BOUNDS &&
		       (last || lag_bucket_end(b) > lag_bounds_us[k]))
			k++;
		if (k < N_LAG_BOUNDS)
			counts[k] += st->lag_hist[b];
		else
			above += st->lag_hist[b];
	}
	nsa_mx_histogram(m, "natsync_replication_lag_seconds",
			 "From a record's timestamp (the active's clock) to "
			 "when the standby had it in its table.",
			 le, counts, N_LAG_BOUNDS, above,
			 (double)st->lag_sum_us / 1e6);
}

static void conntrack_counters(struct nsa_mx *m, const struct nsa_standby *sb)
{
	struct nsdp_ctcommit_stats cs;

	if (nsa_standby_commit_stats(sb, &cs) != 0)
		return;
	nsa_mx_counter(m, "natsync_conntrack_committed_total", cs.committed,
		       "Conntrack entries the commit created.");
	nsa_mx_counter(m, "natsync_conntrack_updated_total", cs.updated,
		       "Conntrack entries the commit refreshed.");
	nsa_mx_counter(m, "natsync_conntrack_deleted_total", cs.deleted,
		       "Conntrack entries the commit removed.");
	nsa_mx_counter(m, "natsync_conntrack_errors_total", cs.errors,
		       "Records the commit gave up on.");
	nsa_mx_counter(m, "natsync_conntrack_retried_total", cs.retried,
		       "Ctnetlink messages sent again after a failure.");
	nsa_mx_counter(m, "natsync_conntrack_refused_total", cs.refused,
		       "Records the commit refused as bad input.");
	nsa_mx_counter(m, "natsync_conntrack_evicted_total", cs.evicted,
		       "Entries of other flows deleted for a newer record's "
		       "translated address and port.");
	nsa_mx_counter(m, "natsync_conntrack_messages_total", cs.messages,
		       "Ctnetlink messages sent.");
}

void nsa_metrics_standby(struct nsa_mx *m, struct nsa_standby *sb,
			 uint64_t table_capacity)
{
	/* ~6 KB: static, the main loop is the only caller. */
	static struct nsa_standby_stats st;
	struct nsdp_table_stats ts;

	nsa_standby_stats(sb, &st);
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	nsa_mx_gauge(m, "natsync_standby_sessions", (double)ts.live,
		     "Sessions in the standby's table.");
	nsa_mx_gauge(m, "natsync_standby_table_capacity",
		     (double)table_capacity, "Sessions the table holds.");
	nsa_mx_counter(m, "natsync_standby_table_full_drops_total",
		       ts.full_drops, "Sessions the full table refused.");
	nsa_mx_counter(m, "natsync_standby_batches_total", st.batches,
		       "Batches applied.");
	nsa_mx_counter(m, "natsync_standby_records_applied_total", st.records,
		       "Records applied from batches.");
	nsa_mx_counter(m, "natsync_standby_records_loaded_total", st.loaded,
		       "Records applied from the store by loads and resyncs.");
	nsa_mx_family(m, "natsync_standby_batches_dropped_total", "counter",
		      "Batches dropped, by reason: bad (malformed or "
		      "foreign), stale (old or replayed), unauthenticated "
		      "(HMAC missing or wrong), fenced (older epoch).");
	nsa_mx_sample(m, "natsync_standby_batches_dropped_total",
		      (double)st.bad_messages, "reason", "bad", NULL);
	nsa_mx_sample(m, "natsync_standby_batches_dropped_total",
		      (double)st.stale, "reason", "stale", NULL);
	nsa_mx_sample(m, "natsync_standby_batches_dropped_total",
		      (double)st.unauthenticated, "reason", "unauthenticated",
		      NULL);
	nsa_mx_sample(m, "natsync_standby_batches_dropped_total",
		      (double)st.fenced, "reason", "fenced", NULL);
	nsa_mx_counter(m, "natsync_standby_bad_values_total", st.bad_values,
		       "Store values that did not match their key.");
	nsa_mx_counter(m, "natsync_standby_gaps_total", st.gaps,
		       "Sequence gaps seen.");
	nsa_mx_counter(m, "natsync_standby_resyncs_total", st.resyncs,
		       "Resyncs done (the cold load counts).");
	nsa_mx_counter(m, "natsync_standby_resubscribes_total", st.resubscribes,
		       "Resubscriptions to every master.");
	nsa_mx_counter(m, "natsync_standby_topology_changes_total",
		       st.topology_changes,
		       "Resubscriptions because the masters changed under "
		       "working subscriptions.");
	nsa_mx_counter(m, "natsync_standby_dead_subscriptions_total",
		       st.dead_subscriptions,
		       "Subscriptions given up: PING unanswered.");
	nsa_mx_gauge(m, "natsync_standby_synced", st.synced,
		     "1 once the cold load finished.");
	lag_histogram(m, &st);
	conntrack_counters(m, sb);
}

int nsa_metrics_active_ready(const struct nsa_active *a, unsigned int retry_ms,
			     char *why, size_t whylen)
{
	struct nsa_writer_health h;
	unsigned int i;

	if (a == NULL) {
		snprintf(why, whylen, "no writers");
		return 0;
	}
	for (i = 0; i < nsa_active_writers(a); i++) {
		nsa_active_writer_health(a, i, &h);
		if (!h.connected && h.retry_ms > retry_ms) {
			snprintf(why, whylen,
				 "writer %u has been retrying its store "
				 "connections for %" PRIu64 " ms",
				 i, h.retry_ms);
			return 0;
		}
		if (!h.connected && h.n_masters == 0) {
			snprintf(why, whylen,
				 "writer %u is not connected to the store yet",
				 i);
			return 0;
		}
	}
	return 1;
}

int nsa_metrics_standby_ready(const struct nsa_standby *sb, char *why,
			      size_t whylen)
{
	static struct nsa_standby_stats st;

	nsa_standby_stats(sb, &st);
	if (!st.synced) {
		snprintf(why, whylen, "the cold load has not finished");
		return 0;
	}
	if (!st.live) {
		snprintf(why, whylen,
			 "not subscribed to every master with its sessions "
			 "loaded (store unreachable or resubscribing)");
		return 0;
	}
	return 1;
}
