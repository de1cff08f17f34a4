/*
 * nsa_metrics_roles.c - the active's and the standby's metrics and
 * readiness, as natsync-agent and natsync-gateway serve them
 * (nsa_metrics.h; the names are documented in docs/operations.md).
 *
 * Everything here runs on the program's main loop, reading the counters
 * the REPORT line reads (relaxed atomics summed per writer, the
 * subscriber's stats, the table's counters): no lock, nothing a writer,
 * the subscriber or the fast path waits for.
 *
 * Each role's families are a table of rows (nsa_metrics.h) over a view of
 * its stats, walked by nsa_mx_table(); only what is not one value per
 * row (per-writer series, the lag histogram) is written out here.
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

/* What the active's families read: its stats and what follows from them. */
struct active_view {
	struct nsa_active_stats st;
	uint64_t store_refused; /* dropped, less the fenced */
	uint64_t fence_epoch;
};

/* Samples labelled with their fields' names. */
#define BY_NAME(f) NSA_MX_SAMPLE(st.f, #f)

/* clang-format off */
#define NSA_MX_STRUCT struct active_view
static const struct nsa_mx_row active_rows[] = {
	NSA_MX_COUNTER(st.records, "natsync_records_drained_total", "Records the writers took from the lanes."),
	NSA_MX_COUNTER(st.acked, "natsync_records_acked_total", "Records whose commands the store acknowledged."),
	NSA_MX_COUNTER(st.resent, "natsync_records_resent_total", "Records sent again after an error."),
	NSA_MX_COUNTER(st.replayed, "natsync_records_replayed_total", "Acknowledged records sent again after a master was lost (the replay window)."),
	NSA_MX_FAMILY("natsync_records_dropped_total", "counter", "reason", "Records dropped, by reason: lane_full (a lane refused them), fenced (below the store's epoch), store_refused (given up by the agent)."),
	NSA_MX_SAMPLE(st.lane_drops, "lane_full"),
	BY_NAME(fenced),
	NSA_MX_SAMPLE(store_refused, "store_refused"),
	NSA_MX_COUNTER(st.batches, "natsync_batches_total", "Batch notifications the store acknowledged."),
	NSA_MX_GAUGE(st.inflight, "natsync_records_in_flight", "Records sent, not yet acknowledged."),
	NSA_MX_FAMILY("natsync_store_commands_total", "counter", "command", "Commands acknowledged, by command."),
	NSA_MX_SAMPLE(st.sets, "set"),
	NSA_MX_SAMPLE(st.dels, "del"),
	NSA_MX_COUNTER(st.reconnects, "natsync_store_reconnects_total", "Writer connections opened again after a loss."),
	NSA_MX_FAMILY("natsync_store_refusals_total", "counter", "kind", "Error replies from the store, by kind."),
	BY_NAME(moved),
	BY_NAME(ask),
	BY_NAME(tryagain),
	BY_NAME(clusterdown),
	NSA_MX_SAMPLE(st.other_errors, "other"),
	NSA_MX_COUNTER(st.topology_refreshes, "natsync_store_topology_refreshes_total", "Cluster topologies fetched by the writers."),
	NSA_MX_COUNTER(st.store_corrections, "natsync_store_corrections_total", "Records published with what the store holds after it refused a write for good."),
	NSA_MX_COUNTER(st.compactions, "natsync_compaction_rounds_total", "Compaction rounds completed (layout log)."),
	NSA_MX_COUNTER(st.compact_lease_skipped, "natsync_compaction_rounds_skipped_total", "Compaction rounds skipped because another round (another gateway pair's active) held the store's compaction lease."),
	NSA_MX_COUNTER(st.log_rewrites, "natsync_log_segments_rewritten_total", "Log layout: segments the store refused for good, written again under a new seq and acknowledged."),
	NSA_MX_GAUGE(fence_epoch, "natsync_fence_epoch", "The store's epoch counter as the writers last read it; above natsync_epoch, this active is fenced."),
};
#undef NSA_MX_STRUCT
/* clang-format on */

static double writer_retrying_s(const struct nsa_writer_health *h)
{
	return (double)h->retry_ms / 1000.0;
}

static double writer_acked(const struct nsa_writer_health *h)
{
	return (double)h->acked;
}

/* A family of one sample per writer, labelled with its index. */
static void writer_family(struct nsa_mx *m, const struct nsa_active *a,
			  const char *name, const char *type, const char *help,
			  double (*value)(const struct nsa_writer_health *))
{
	struct nsa_writer_health h;
	unsigned int i;
	char idx[16];

	nsa_mx_family(m, name, type, help);
	for (i = 0; i < nsa_active_writers(a); i++) {
		nsa_active_writer_health(a, i, &h);
		snprintf(idx, sizeof(idx), "%u", i);
		nsa_mx_sample(m, name, value(&h), "writer", idx, NULL);
	}
}

void nsa_metrics_active(struct nsa_mx *m, const struct nsa_active *a)
{
	struct active_view v;
	struct nsa_writer_health h;
	unsigned int i, k;
	char idx[16];

	nsa_active_stats(a, &v.st);
	v.store_refused = v.st.dropped - v.st.fenced;
	v.fence_epoch = a ? nsa_active_fence(a) : 0;
	nsa_mx_table(m, active_rows,
		     sizeof(active_rows) / sizeof(active_rows[0]), &v);

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
	writer_family(m, a, "natsync_writer_retrying_seconds", "gauge",
		      "How long the writer has been retrying its connections "
		      "(0 when connected).",
		      writer_retrying_s);
	writer_family(m, a, "natsync_writer_records_acked_total", "counter",
		      "Records acknowledged, per writer.", writer_acked);
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

/* The conntrack commit's counters are named after their fields. */
#define NSA_MX_STRUCT struct nsdp_ctcommit_stats
#define CT(f, help) NSA_MX_COUNTER(f, "natsync_conntrack_" #f "_total", help)
/* clang-format off */
static const struct nsa_mx_row conntrack_rows[] = {
	CT(committed, "Conntrack entries the commit created."),
	CT(updated, "Conntrack entries the commit refreshed."),
	CT(deleted, "Conntrack entries the commit removed."),
	CT(errors, "Records the commit gave up on."),
	CT(retried, "Ctnetlink messages sent again after a failure."),
	CT(refused, "Records the commit refused as bad input."),
	CT(evicted, "Entries of other flows deleted for a newer record's translated address and port."),
	CT(messages, "Ctnetlink messages sent."),
};
/* clang-format on */
#undef CT
#undef NSA_MX_STRUCT

/* What the standby's families read: the subscriber's stats (~6 KB), the
 * table's, and what is not a uint64_t there. */
struct standby_view {
	struct nsa_standby_stats st;
	struct nsdp_table_stats ts;
	uint64_t capacity;
	uint64_t synced;
};

/* Most of the subscriber's counters are named after their fields. */
#define SB(f, help) NSA_MX_COUNTER(st.f, "natsync_standby_" #f "_total", help)
/* clang-format off */
#define NSA_MX_STRUCT struct standby_view
static const struct nsa_mx_row standby_rows[] = {
	NSA_MX_GAUGE(ts.live, "natsync_standby_sessions", "Sessions in the standby's table."),
	NSA_MX_GAUGE(capacity, "natsync_standby_table_capacity", "Sessions the table holds."),
	NSA_MX_COUNTER(ts.full_drops, "natsync_standby_table_full_drops_total", "Sessions the full table refused."),
	SB(batches, "Batches applied."),
	NSA_MX_COUNTER(st.records, "natsync_standby_records_applied_total", "Records applied from batches."),
	NSA_MX_COUNTER(st.loaded, "natsync_standby_records_loaded_total", "Records applied from the store by loads and resyncs."),
	SB(load_values, "Values the loads and resyncs read from the store (log layout: segments and checkpoints, each time one is read)."),
	SB(load_bytes, "Bytes of the values the loads and resyncs read from the store."),
	NSA_MX_FAMILY("natsync_standby_batches_dropped_total", "counter", "reason", "Batches dropped, by reason: bad (malformed or foreign), stale (old or replayed), unauthenticated (HMAC missing or wrong), fenced (older epoch)."),
	NSA_MX_SAMPLE(st.bad_messages, "bad"),
	BY_NAME(stale),
	BY_NAME(unauthenticated),
	BY_NAME(fenced),
	SB(other_pair, "Batches of other gateway pairs sharing the store, passed over (a standby applies only its own pair's sessions)."),
	SB(epoch_regressions, "Times a gateway pair's batches came with an epoch below the one seen while the store's counter was below it too (the store lost it): the standby took the lower epoch and resynced every master."),
	SB(epoch_resyncs, "Resyncs of a master begun because its gateway pair's epoch rose (every master, once per epoch): the new active fenced the old one, which may have written a batch without publishing it."),
	SB(bad_values, "Store values that did not match their key."),
	SB(gaps, "Sequence gaps seen."),
	SB(resyncs, "Resyncs done (the cold load counts)."),
	SB(repairs, "Log layout: sequence gaps mended by reading back the segments missed, without a resync."),
	SB(repair_values, "Log layout: segments the repairs read from the store (those of repairs that fell back to a resync included)."),
	SB(repair_bytes, "Log layout: bytes of the segments the repairs read."),
	SB(refused_segments, "Log layout: segments a repair read and refused for good (not decoding, not signed with the batch key, or not matching their key): their sessions left out, as every reader leaves them, without a resync."),
	SB(resubscribes, "Resubscriptions to every master."),
	SB(topology_changes, "Resubscriptions because the masters changed under working subscriptions."),
	SB(dead_subscriptions, "Subscriptions given up: PING unanswered."),
	NSA_MX_GAUGE(synced, "natsync_standby_synced", "1 once the cold load finished."),
};
#undef NSA_MX_STRUCT
/* clang-format on */
#undef SB
#undef BY_NAME

void nsa_metrics_standby(struct nsa_mx *m, struct nsa_standby *sb,
			 uint64_t table_capacity)
{
	/* Static: the main loop is the only caller. */
	static struct standby_view v;
	struct nsdp_ctcommit_stats cs;

	nsa_standby_stats(sb, &v.st);
	nsdp_table_stats(nsa_standby_table(sb), &v.ts);
	v.capacity = table_capacity;
	v.synced = (uint64_t)v.st.synced;
	nsa_mx_table(m, standby_rows,
		     sizeof(standby_rows) / sizeof(standby_rows[0]), &v);
	nsa_mx_gauge(m, "natsync_standby_subscriber_nice",
		     (double)v.st.subscriber_nice,
		     "The nice value the subscriber thread runs at ([standby] "
		     "priority = high; the process's otherwise, while lowered "
		     "or when raising it was refused).");
	nsa_mx_gauge(m, "natsync_standby_subscriber_rtprio",
		     (double)v.st.subscriber_rtprio,
		     "The SCHED_FIFO priority the subscriber thread runs at "
		     "([standby] priority = realtime), 0 when not real-time.");
	nsa_mx_counter(m, "natsync_standby_subscriber_lowered_total",
		       v.st.subscriber_lowered,
		       "Times the subscriber thread was lowered to the "
		       "process's priority: a 100 ms window over half a "
		       "core, or whose records waited 20 ms on the active.");
	lag_histogram(m, &v.st);
	if (nsa_standby_commit_stats(sb, &cs) == 0)
		nsa_mx_table(m, conntrack_rows,
			     sizeof(conntrack_rows) / sizeof(conntrack_rows[0]),
			     &cs);
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
	if (!st.live && st.slots_served < NS_SLOTS) {
		snprintf(why, whylen,
			 "the store serves %u of %u slots (a cluster being "
			 "formed, or slots unassigned)",
			 st.slots_served, NS_SLOTS);
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

/* Defer of a kernel source: how each queued first packet went, and the
 * hold times, as the DPDK gateway's natsync_gateway_defer_* say it. */
void nsa_metrics_kernel_defer(struct nsa_mx *m,
			      const struct nsdp_ksrc_defer_stats *st)
{
	const struct nsdp_ksrc_defer_stats d = *st;
	const struct {
		const char *outcome;
		uint64_t v;
	} rows[] = {{"queued", d.queued},	{"held", d.held},
		    {"settled", d.settled},	{"timeout", d.timeouts},
		    {"overflow", d.overflow},	{"skipped", d.skipped},
		    {"unmatched", d.unmatched}, {"missed", d.missed}};

	nsa_mx_family(
		m, "natsync_kernel_defer_packets_total", "counter",
		"Kernel defer: first packets of new NAT'd connections the "
		"queue handed over (queued), held until their record was "
		"acknowledged (held), and how each left: settled, timeout "
		"(after defer_max_us); overflow and skipped (not NAT'd, "
		"filtered) went at once, unheld; missed passed unheld "
		"while the queue's socket was full.");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		nsa_mx_sample(m, "natsync_kernel_defer_packets_total",
			      (double)rows[i].v, "outcome", rows[i].outcome,
			      NULL);
	nsa_mx_family(m, "natsync_kernel_defer_hold_microseconds", "gauge",
		      "Kernel defer: the hold time under which this quantile "
		      "of the held packets left, µs (10 µs buckets).");
	nsa_mx_sample(m, "natsync_kernel_defer_hold_microseconds",
		      (double)d.p50_us, "quantile", "0.5", NULL);
	nsa_mx_sample(m, "natsync_kernel_defer_hold_microseconds",
		      (double)d.p99_us, "quantile", "0.99", NULL);
	nsa_mx_sample(m, "natsync_kernel_defer_hold_microseconds",
		      (double)d.p999_us, "quantile", "0.999", NULL);
}
