/*
 * natsync_agent.c - the natsync-agent program: one binary, two roles.
 *
 * Active: creates the lanes (or, with [rings] attach = yes, finds the
 * gateway's lanes by name as a DPDK secondary process), optionally runs the
 * synthetic session source on EAL worker lcores, and replicates every
 * record with the writer threads until stopped or, with a synthetic source,
 * until every event is produced and acknowledged by the store.
 * Attached to a gateway, it checks once a second that the gateway (the
 * primary process) is alive; when it is gone, it replicates what is left in
 * the lanes, which stay mapped, and exits with status 1, so that a
 * supervisor restarts it against the next gateway. Stopped by a signal, it
 * first waits (at most ATTACHED_STOP_DRAIN_MS) for the lanes to empty and
 * the store to acknowledge; whatever stays in the lanes is left there for
 * the next agent.
 * With the kernel source it captures a Linux kernel gateway's NAT'd
 * conntrack entries until stopped, then writes the kernel's table to
 * [source] dump (and on SIGUSR1).
 * Standby: rebuilds the table from the store and the notifications until
 * stopped; SIGUSR1 dumps the table to [standby] dump, SIGUSR2 hands it
 * over to the node's active (an epoch, the fence, every master read
 * again, then the stop).
 *
 * Both print a progress line every [agent] progress_ms and end with one
 * machine-readable REPORT line on stdout. Exit status: 0 done, 1 runtime
 * failure (no gateway to attach to included), 2 bad configuration or
 * options.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include "nag_epoch.h"
#include "ngw_config.h"
#include "nsa_active.h"
#include "nsa_cli.h"
#include "nsa_config.h"
#include "nsa_fence.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_metrics_roles.h"
#include "nsa_sdnotify.h"
#include "nsa_standby.h"
#include "nsdp_lane.h"
#include "nsdp_synth.h"
#include "nsdp_time.h"

/* Attached to a gateway: how long to replicate what is left when asked to
 * stop, and when the gateway is gone. */
#define ATTACHED_STOP_DRAIN_MS 2000
#define GATEWAY_GONE_DRAIN_MS 5000
/* A source stopped (the kernel one, or the synthetic one before its last
 * event): how long the writers get for the rest. */
#define SOURCE_STOP_DRAIN_MS 10000

/* The gateway we attached to died: its shared EAL state is no longer ours
 * to tidy (a new gateway may be rewriting it; rte_eal_cleanup() then
 * crashes in the shared heap), so the process exits without it. */
static int gateway_gone;

/* ---- [metrics]: served from the main loop (nsa_metrics.h) ---------------- */

struct agent_metrics {
	const struct nsa_config *conf;
	struct nsa_active *active; /* the role's, NULL for the other */
	struct nsa_standby *standby;
	const struct nsdp_ksrc *ksrc; /* the active's kernel source, or NULL */
};

static int agent_ready(void *arg, char *why, size_t whylen)
{
	const struct agent_metrics *am = arg;

	if (am->active)
		return nsa_metrics_active_ready(
			am->active, am->conf->metrics_ready_retry_ms, why,
			whylen);
	return nsa_metrics_standby_ready(am->standby, why, whylen);
}

static void agent_render(void *arg, struct nsa_mx *m)
{
	struct agent_metrics *am = arg;
	char why[256];

	nsa_metrics_common(m, am->conf->epoch,
			   agent_ready(am, why, sizeof(why)));
	if (am->active)
		nsa_metrics_active(m, am->active);
	if (am->active && am->ksrc && am->conf->ksrc_conf.defer_max_us) {
		struct nsdp_ksrc_defer_stats d;

		nsdp_ksrc_defer_stats(am->ksrc, &d);
		nsa_metrics_kernel_defer(m, &d);
	}
	if (!am->active)
		nsa_metrics_standby(m, am->standby, am->conf->table_capacity);
}

/* NULL when [metrics] listen is empty or on failure (*failed set, said). */
static struct nsa_metrics *agent_metrics_start(struct agent_metrics *am,
					       int *failed)
{
	struct nsa_metrics_hooks hooks = {
		.render = agent_render,
		.ready = agent_ready,
		.arg = am,
		.role = am->active ? "active" : "standby",
		.gateway_id = am->conf->gateway_id,
	};
	struct nsa_metrics *m;
	char err[256];

	*failed = 0;
	if (!am->conf->metrics_listen[0])
		return NULL;
	m = nsa_metrics_start(am->conf->metrics_listen, &hooks, err,
			      sizeof(err));
	if (m == NULL) {
		NSA_ERR("%s", err);
		*failed = 1;
	} else {
		NSA_INFO("metrics: serving /metrics, /healthz and /readyz on "
			 "%s",
			 am->conf->metrics_listen);
	}
	return m;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: natsync-agent -c FILE [options] [-- EAL-ARGS...]\n"
		"\n"
		"Replicates a NAT gateway's session table through Redis.\n"
		"\n"
		"  -c, --config FILE     configuration file (INI; see\n"
		"                        docs/configuration.md)\n"
		"  -r, --role ROLE       active or standby (overrides [agent] "
		"role)\n"
		"  -s, --set S.KEY=VAL   override one configuration key, e.g.\n"
		"                        --set active.batch_size=512 "
		"(repeatable)\n"
		"  -t, --duration SECS   stop after SECS seconds (default: an "
		"active\n"
		"                        with a synthetic source stops when it "
		"is\n"
		"                        done, with -t it stays idle until SECS\n"
		"                        passed; otherwise run until "
		"SIGINT/SIGTERM)\n"
		"  -p, --print-config    print the effective configuration and "
		"exit\n"
		"      --config-reference  print every configuration key in "
		"Markdown\n"
		"  -h, --help            this text\n"
		"  -V, --version         the version\n"
		"\n"
		"EAL arguments come from [agent] eal_args, then from after "
		"'--'.\n"
		"With [rings] attach = yes the agent drains a running "
		"gateway's lanes\n"
		"as a DPDK secondary process: eal_args must hold\n"
		"--proc-type=secondary and the gateway's --file-prefix, "
		"without\n"
		"--no-huge/--no-shconf (deploy/agent-secondary.sh does this). "
		"It exits\n"
		"with status 1 when the gateway is not running or goes "
		"away.\n"
		"With [source] type = kernel (root) it loads a BPF program "
		"that captures\n"
		"the NAT'd conntrack entries of [source] netns and replicates "
		"them until\n"
		"stopped; exit status 2 when kernel BTF, privileges or the "
		"namespace\n"
		"are missing (see docs/kernel-gateways.md). SIGUSR1 writes "
		"the kernel's\n"
		"NAT'd table to [source] dump.\n"
		"Signals: SIGINT/SIGTERM stop (an active first replicates what "
		"its source\n"
		"made, 10 s at most, 2 s for a gateway's lanes, and REPORTs "
		"drained=yes\n"
		"when all of it was acknowledged;\n"
		"a standby dumps its table first when [standby] dump is set); "
		"SIGUSR1\n"
		"makes a standby dump its table; SIGUSR2 makes it take an "
		"epoch, fence,\n"
		"read every master again and stop (REPORT handover_epoch=).\n"
		"With [standby] commit = conntrack a standby also writes "
		"every session\n"
		"into the kernel's conntrack table (root; [standby] "
		"commit_netns).\n"
		"Exit status: 0 done, 1 failure, 2 bad configuration or "
		"options.\n");
}

static void kernel_table_dump(const struct nsa_source *src,
			      const struct nsa_config *conf)
{
	int64_t n;

	if (!conf->source_dump[0]) {
		NSA_WARN("source: no [source] dump path; nothing dumped");
		return;
	}
	n = nsdp_ksrc_dump_table(src->ksrc, conf->source_dump);
	if (n < 0)
		NSA_ERR("source: dump to %s: %s", conf->source_dump,
			strerror((int)-n));
	else
		NSA_INFO("source: %" PRId64 " NAT'd conntrack entries written "
			 "to %s",
			 n, conf->source_dump);
}

/* The kernel source stops producing, the writers take what it left in the
 * lane, and the kernel's table is written to [source] dump as it stands
 * then. 1 when everything was acknowledged. */
static int stop_kernel_source(struct nsa_source *src, struct nsa_active *a,
			      const struct nsa_config *conf,
			      struct nsdp_ksrc_stats *ks)
{
	int drained;

	nsa_source_stop(src);
	drained = nsa_active_drain(a, SOURCE_STOP_DRAIN_MS) == 0;
	if (!drained)
		NSA_ERR("active: the kernel source's records were not all "
			"acknowledged within %d ms",
			SOURCE_STOP_DRAIN_MS);
	nsdp_ksrc_stats(src->ksrc, ks);
	kernel_table_dump(src, conf);
	return drained;
}

/* nsa_active_drain, answering scrapes meanwhile (a stop signal waits,
 * as it does for nsa_active_drain). */
static int drain_serving(struct nsa_active *a, struct nsa_metrics *mx,
			 int timeout_ms)
{
	double end = nsdp_now_s() + timeout_ms / 1000.0;

	while (nsa_active_drain(a, 20) != 0) {
		if (nsdp_now_s() >= end)
			return -ETIMEDOUT;
		nsa_metrics_wait(mx, 0, -1);
	}
	return 0;
}

/* An active run: its session source, its writers, and what its progress
 * and REPORT lines say. */
struct active_run {
	const struct nsa_config *conf;
	struct nsa_source src;
	struct nsa_active *active;
	struct agent_metrics am;
	struct nsa_metrics *mx;
	struct nsdp_synth_stats ss;
	struct nsdp_ksrc_stats ks;
	double t0, t_end; /* t_end: 0 until the records are all in */
	double last_progress, last_alive_check;
	uint64_t last_acked;
	int drained;
	struct nag_epoch *epoch; /* a provisional epoch to make known */
};

/* Open the source and its writers, serve the metrics and start the
 * source: 0, or the exit status (2: the source does not fit the
 * process). */
static int active_open(struct active_run *r)
{
	const struct nsa_config *conf = r->conf;
	int open_rc = nsa_source_open(&r->src, conf), mx_failed;

	if (open_rc != 0)
		return open_rc == -EINVAL ? 2 : 1;
	r->active = nsa_source_replicate(&r->src, conf);
	if (!r->active)
		return 1;
	r->am.active = r->active;
	r->am.ksrc = r->src.ksrc;
	r->mx = agent_metrics_start(&r->am, &mx_failed);
	if (mx_failed)
		return 1;
	r->t0 = nsdp_now_s();
	r->last_progress = r->t0;
	r->last_alive_check = r->t0;
	if (r->src.ksrc)
		nsa_source_start(&r->src);
	if (r->src.synth) {
		nsa_source_start(&r->src);
		NSA_INFO("source: %" PRIu64 " events over %" PRIu64
			 " flows on %u lcore(s), rate %s",
			 conf->synth_conf.events, conf->synth_conf.flows,
			 conf->lanes,
			 conf->synth_conf.rate ? "fixed" : "flat out");
	}
	return 0;
}

/* The synthetic source produced every event: wait for the store. 1 when
 * the run ends here (not drained, or no --duration to wait out). */
static int active_synth_done(struct active_run *r, double duration)
{
	nsdp_synth_stats(r->src.synth, &r->ss);
	if (!r->ss.done)
		return 0;
	r->drained = drain_serving(r->active, r->mx, 600000) == 0;
	r->t_end = nsdp_now_s();
	if (!r->drained)
		NSA_ERR("active: not every record was acknowledged in time");
	/* With --duration it stays until that passed, its final counters
	 * served to scrapes. */
	return !r->drained || duration <= 0;
}

static void active_progress(struct active_run *r, double t)
{
	struct nsa_active_stats st;

	if (r->src.ksrc) {
		nsdp_ksrc_stats(r->src.ksrc, &r->ks);
		r->ss.produced = r->ks.creates + r->ks.refreshes +
				 r->ks.deletes + r->ks.dumped;
	}
	nsa_active_stats(r->active, &st);
	fprintf(stderr,
		"progress: active %.1fs produced %" PRIu64 " acked %" PRIu64
		" (%.0f/s) inflight %" PRIu64 " batches %" PRIu64
		" resent %" PRIu64 " drops %" PRIu64 " errors %" PRIu64 "\n",
		t - r->t0, r->ss.produced, st.acked,
		(double)(st.acked - r->last_acked) / (t - r->last_progress),
		st.inflight, st.batches, st.resent, st.lane_drops + st.dropped,
		st.other_errors);
	r->last_acked = st.acked;
	r->last_progress = t;
}

/* Until stopped, the synthetic source is done, --duration passed or the
 * gateway we attached to is gone (gateway_gone). */
static void active_loop(struct active_run *r, double duration)
{
	const struct nsa_config *conf = r->conf;

	while (!nsa_cli_stopping()) {
		double t = nsdp_now_s();

		nsa_sd_watchdog();
		nsa_metrics_wait(r->mx, 20, -1);
		if (r->src.ksrc && nsa_cli_dump_requested())
			kernel_table_dump(&r->src, conf);
		nag_epoch_register(r->epoch, t);
		if (r->src.synth && !r->drained &&
		    active_synth_done(r, duration))
			break;
		if (r->src.attached && t - r->last_alive_check >= 1.0) {
			r->last_alive_check = t;
			if (!rte_eal_primary_proc_alive(NULL)) {
				gateway_gone = 1;
				break;
			}
		}
		if (duration > 0 && t - r->t0 >= duration)
			break;
		if (conf->progress_ms &&
		    (t - r->last_progress) * 1000.0 >= conf->progress_ms)
			active_progress(r, t);
	}
}

/* Replicate what is left (as long as the way the run ended allows), stop
 * the source and write its table to [source] dump. */
static void active_stop(struct active_run *r)
{
	const struct nsa_config *conf = r->conf;

	if (gateway_gone) {
		NSA_ERR("the gateway (DPDK primary process) is gone; "
			"replicating what is left in its lanes, then stopping");
		if (nsa_active_drain(r->active, GATEWAY_GONE_DRAIN_MS) != 0)
			NSA_ERR("active: the lanes were not replicated within "
				"%d ms",
				GATEWAY_GONE_DRAIN_MS);
	} else if (r->src.attached &&
		   nsa_active_drain(r->active, ATTACHED_STOP_DRAIN_MS) != 0) {
		NSA_WARN("active: stopping with records in flight or in the "
			 "lanes (the lanes keep theirs for the next agent)");
	}
	if (r->src.ksrc)
		r->drained =
			stop_kernel_source(&r->src, r->active, conf, &r->ks);
	if (r->t_end == 0)
		r->t_end = nsdp_now_s();
	if (r->src.synth) {
		nsa_source_stop(&r->src);
		/* Stopped before its last event: what it made is replicated
		 * (as the kernel source's is) before the REPORT says so. */
		if (!r->drained) {
			r->drained =
				nsa_active_drain(r->active,
						 SOURCE_STOP_DRAIN_MS) == 0;
			if (!r->drained)
				NSA_ERR("active: the source's records were not "
					"all acknowledged within %d ms",
					SOURCE_STOP_DRAIN_MS);
		}
		nsdp_synth_stats(r->src.synth, &r->ss);
		if (conf->source_dump[0]) {
			int64_t n = nsdp_synth_dump(r->src.synth,
						    conf->source_dump);

			if (n < 0)
				NSA_ERR("source: dump to %s: %s",
					conf->source_dump, strerror((int)-n));
			else
				NSA_INFO("source: %" PRId64
					 " live sessions written to %s",
					 n, conf->source_dump);
		}
	}
}

/* A synthetic source's mix of families ([source] v6_pct): the IPv6
 * records it made, and each family's rate as natsync-bench gives it (the
 * IPv4 one from the acknowledged records, so that both add up to rate
 * when every record was acknowledged). */
static void active_report_families(const struct nsdp_synth_stats *ss,
				   uint64_t acked, double secs)
{
	uint64_t v4 = acked > ss->v6_records ? acked - ss->v6_records : 0;

	printf(" v6_records=%" PRIu64 " rate_v4=%.0f rate_v6=%.0f",
	       ss->v6_records, secs > 0 ? (double)v4 / secs : 0.0,
	       secs > 0 ? (double)ss->v6_records / secs : 0.0);
}

/* The REPORT line; the exit status (1: a source's records were not all
 * acknowledged, or the gateway is gone). */
static int active_report(const struct active_run *r)
{
	const struct nsdp_ksrc_stats *ks = &r->ks;
	int sourced = r->src.synth || r->src.ksrc;
	struct nsa_active_stats st;
	double secs = r->t_end - r->t0;

	nsa_active_stats(r->active, &st);
	/* A source that drops counts in its lane too: lane_drops holds every
	 * record a full ring refused. */
	printf("REPORT role=active records=%" PRIu64 " acked=%" PRIu64
	       " seconds=%.3f rate=%.0f batches=%" PRIu64 " resent=%" PRIu64
	       " replayed=%" PRIu64 " reconnects=%" PRIu64
	       " clusterdown=%" PRIu64 " errors=%" PRIu64 " drops=%" PRIu64
	       " lane_drops=%" PRIu64 " agent_drops=%" PRIu64
	       " store_corrections=%" PRIu64 " log_rewrites=%" PRIu64
	       " fenced=%" PRIu64 " drained=%s",
	       st.records, st.acked, secs,
	       secs > 0 ? (double)st.acked / secs : 0.0, st.batches, st.resent,
	       st.replayed, st.reconnects, st.clusterdown, st.other_errors,
	       st.lane_drops + st.dropped, st.lane_drops, st.dropped,
	       st.store_corrections, st.log_rewrites, st.fenced,
	       sourced ? (r->drained ? "yes" : "no") : "n/a");
	if (r->src.synth && r->ss.v6_records > 0)
		active_report_families(&r->ss, st.acked, secs);
	if (r->src.ksrc)
		printf(" captured=%" PRIu64 " creates=%" PRIu64
		       " refreshes=%" PRIu64 " deletes=%" PRIu64
		       " dumped=%" PRIu64 " redumps=%" PRIu64
		       " ringbuf_drops=%" PRIu64 " filtered=%" PRIu64
		       " end_overruns=%" PRIu64 " reconciled=%" PRIu64
		       " untracked=%" PRIu64,
		       ks->captured, ks->creates, ks->refreshes, ks->deletes,
		       ks->dumped, ks->redumps, ks->ringbuf_drops, ks->filtered,
		       ks->end_overruns, ks->reconciled, ks->untracked);
	if (r->src.ksrc && r->conf->ksrc_conf.defer_max_us) {
		struct nsdp_ksrc_defer_stats d;

		nsdp_ksrc_defer_stats(r->src.ksrc, &d);
		printf(" defer_queued=%" PRIu64 " defer_held=%" PRIu64
		       " defer_settled=%" PRIu64 " defer_timeouts=%" PRIu64
		       " defer_overflow=%" PRIu64 " defer_skipped=%" PRIu64
		       " defer_unmatched=%" PRIu64 " defer_missed=%" PRIu64
		       " defer_p50_us=%" PRIu64 " defer_p99_us=%" PRIu64
		       " defer_p999_us=%" PRIu64,
		       d.queued, d.held, d.settled, d.timeouts, d.overflow,
		       d.skipped, d.unmatched, d.missed, d.p50_us, d.p99_us,
		       d.p999_us);
	}
	printf("\n");
	fflush(stdout);
	return (sourced && !r->drained) || gateway_gone ? 1 : 0;
}

static int run_active(const struct nsa_config *conf, double duration,
		      struct nag_epoch *epoch)
{
	struct active_run r = {
		.conf = conf, .am = {.conf = conf}, .epoch = epoch};
	int rc = active_open(&r);

	if (rc == 0) {
		active_loop(&r, duration);
		active_stop(&r);
		rc = active_report(&r);
	}
	nsa_metrics_stop(r.mx);
	if (r.active) {
		nsa_active_stop(r.active);
		nsa_active_free(r.active);
	}
	nsa_source_close(&r.src);
	return rc;
}

static void standby_dump(struct nsa_standby *sb, const char *path)
{
	int64_t n;

	if (!path[0]) {
		NSA_WARN("standby: no [standby] dump path; nothing dumped");
		return;
	}
	n = nsa_standby_dump(sb, path, 10000);
	if (n < 0)
		NSA_ERR("standby: dump to %s: %s", path, strerror((int)-n));
	else
		NSA_INFO("standby: %" PRId64 " sessions written to %s", n,
			 path);
}

/* The conntrack commit's part of the REPORT line ("" without commit). */
static void standby_commit_report(const struct nsa_standby *sb, char *buf,
				  size_t len)
{
	struct nsdp_ctcommit_stats cs;

	buf[0] = 0;
	if (nsa_standby_commit_stats(sb, &cs) != 0)
		return;
	snprintf(buf, len,
		 " ct_committed=%" PRIu64 " ct_updated=%" PRIu64
		 " ct_deleted=%" PRIu64 " ct_errors=%" PRIu64
		 " ct_retried=%" PRIu64 " ct_refused=%" PRIu64
		 " ct_refused_proto=%" PRIu64 " ct_refused_expired=%" PRIu64
		 " ct_refused_duplicate=%" PRIu64 " ct_evicted=%" PRIu64
		 " ct_messages=%" PRIu64,
		 cs.committed, cs.updated, cs.deleted, cs.errors, cs.retried,
		 cs.refused, cs.refused_proto, cs.refused_expired,
		 cs.refused_duplicate, cs.evicted, cs.messages);
}

/* The mean lag of the records applied, in us. */
static double standby_lag_avg_us(const struct nsa_standby_stats *st)
{
	return st->lag_count ? (double)st->lag_sum_us / (double)st->lag_count
			     : 0.0;
}

static void standby_progress(struct nsa_standby *sb,
			     const struct nsa_standby_stats *st, double secs)
{
	struct nsdp_table_stats ts;

	nsdp_table_stats(nsa_standby_table(sb), &ts);
	fprintf(stderr,
		"progress: standby %.1fs table %" PRIu64 " batches %" PRIu64
		" records %" PRIu64 " loaded %" PRIu64 " gaps %" PRIu64
		" resyncs %" PRIu64 " bad %" PRIu64 " lag_avg_us %.0f\n",
		secs, ts.live, st->batches, st->records, st->loaded, st->gaps,
		st->resyncs, st->bad_messages, standby_lag_avg_us(st));
}

static void max_epoch_cb(const struct ns_session *s, void *arg)
{
	uint32_t *max = arg;

	if (s->epoch > *max)
		*max = s->epoch;
}

/* The REPORT line of a stopped standby. epoch_max: the highest epoch of
 * the sessions its table holds (the floor of this node's next active,
 * [agent] epoch_floor). */
static void standby_report(struct nsa_standby *sb, int64_t handover)
{
	struct nsa_standby_stats st;
	struct nsdp_table_stats ts;
	uint32_t epoch_max = 0;
	char commit[320];

	nsdp_table_walk(nsa_standby_table(sb), max_epoch_cb, &epoch_max);
	nsa_standby_stats(sb, &st);
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	standby_commit_report(sb, commit, sizeof(commit));
	printf("REPORT role=standby sessions=%" PRIu64 " sessions_v6=%" PRIu64
	       " batches=%" PRIu64 " records=%" PRIu64 " loaded=%" PRIu64
	       " load_values=%" PRIu64 " load_bytes=%" PRIu64 " gaps=%" PRIu64
	       " resyncs=%" PRIu64 " repairs=%" PRIu64 " repair_values=%" PRIu64
	       " repair_bytes=%" PRIu64 " refused_segments=%" PRIu64
	       " resubscribes=%" PRIu64 " topology_changes=%" PRIu64
	       " stale=%" PRIu64 " dead_subscriptions=%" PRIu64
	       " bad_messages=%" PRIu64 " table_drops=%" PRIu64
	       " fenced=%" PRIu64 " other_pair=%" PRIu64
	       " epoch_regressions=%" PRIu64 " epoch_resyncs=%" PRIu64
	       " lag_avg_us=%.0f lag_max_us=%" PRIu64 " lag_count=%" PRIu64
	       " epoch_max=%" PRIu32 " handover_epoch=%" PRId64 "%s\n",
	       ts.live, ts.live_v6, st.batches, st.records, st.loaded,
	       st.load_values, st.load_bytes, st.gaps, st.resyncs, st.repairs,
	       st.repair_values, st.repair_bytes, st.refused_segments,
	       st.resubscribes, st.topology_changes, st.stale,
	       st.dead_subscriptions, st.bad_messages, ts.full_drops, st.fenced,
	       st.other_pair, st.epoch_regressions, st.epoch_resyncs,
	       standby_lag_avg_us(&st), st.lag_max_us, st.lag_count, epoch_max,
	       handover < 0 ? 0 : handover, commit);
	fflush(stdout);
}

/* Bounds of a handover's wait for what was published before the fence,
 * and of its resync, as the DPDK gateway's promotion (GW_BARRIER_MS,
 * GW_PROMOTE_RESYNC_MS). */
#define HANDOVER_BARRIER_MS 1000
#define HANDOVER_RESYNC_MS 1000

/* SIGUSR2, before this node's active starts (keepalived-kernel-notify.sh
 * MASTER): the new epoch taken and the old active fenced while this
 * standby still runs, then what the old active published before the fence
 * applied and every master read again into conntrack, so that sessions it
 * wrote to the store and never announced (the fence closed its connection
 * between the writes and the SPUBLISH), and deletes alike, reach the
 * kernel's table. The kernel forwards meanwhile. The epoch for the active
 * (the REPORT's handover_epoch), or -1 when the store gave none. */
static int64_t standby_handover(struct nsa_standby *sb,
				const struct nsa_config *conf)
{
	uint32_t floor = conf->epoch_floor;
	double t0 = nsdp_now_s();
	int64_t e;

	nsdp_table_walk(nsa_standby_table(sb), max_epoch_cb, &floor);
	e = nag_epoch_handover(conf, floor);
	if (e < 0)
		return -1;
	if (nsa_standby_barrier(sb, HANDOVER_BARRIER_MS) != 0)
		NSA_WARN(
			"handover: the subscriber did not confirm within %d ms "
			"that it applied what the old active published "
			"before the fence; conntrack may miss its last "
			"sessions",
			HANDOVER_BARRIER_MS);
	if (nsa_standby_resync_all(sb, HANDOVER_RESYNC_MS) != 0)
		NSA_WARN("handover: the resync of every master after the fence "
			 "did not end within %d ms; conntrack may miss what "
			 "the old active wrote without publishing it",
			 HANDOVER_RESYNC_MS);
	NSA_INFO("handover: every master read again after the fence in "
		 "%.1f ms; the active takes epoch %" PRId64,
		 (nsdp_now_s() - t0) * 1000.0, e);
	return e;
}

static int run_standby(const struct nsa_config *conf, double duration)
{
	int64_t handover = -1;
	struct nsa_standby *sb = nsa_standby_create(conf);
	struct nsa_standby_stats st;
	double t0 = nsdp_now_s(), last_progress = t0;
	int was_synced = 0, mx_failed;
	struct agent_metrics am = {.conf = conf, .standby = sb};
	struct nsa_metrics *mx = NULL;

	if (sb)
		mx = agent_metrics_start(&am, &mx_failed);
	if (sb && mx_failed) {
		nsa_standby_free(sb);
		return 1;
	}
	if (!sb || nsa_standby_start(sb) != 0) {
		NSA_ERR("standby: cannot start");
		nsa_metrics_stop(mx);
		if (sb)
			nsa_standby_free(sb);
		/* The commit's namespace or privileges are missing (said in
		 * the log): a configuration error. */
		return !sb && conf->commit == NSA_COMMIT_CONNTRACK ? 2 : 1;
	}
	while (!nsa_cli_stopping()) {
		double t = nsdp_now_s();

		nsa_sd_watchdog();
		nsa_metrics_wait(mx, 20, -1);
		if (nsa_cli_dump_requested())
			standby_dump(sb, conf->table_dump);
		if (nsa_cli_handover_requested()) {
			handover = standby_handover(sb, conf);
			break;
		}
		nsa_standby_stats(sb, &st);
		if (st.synced && !was_synced) {
			was_synced = 1;
			NSA_INFO("standby: cold load took %.3f s (%" PRIu64
				 " sessions loaded)",
				 t - t0, st.loaded);
		}
		if (duration > 0 && t - t0 >= duration)
			break;
		if (conf->progress_ms &&
		    (t - last_progress) * 1000.0 >= conf->progress_ms) {
			standby_progress(sb, &st, t - t0);
			last_progress = t;
		}
	}
	/* Stopped before the last dump, which is then written here: a
	 * subscriber retrying a store that went away serves no dump request
	 * until it connects, and SIGTERM waited the dump's timeout. */
	nsa_standby_stop(sb);
	if (conf->table_dump[0])
		standby_dump(sb, conf->table_dump);
	standby_report(sb, handover);
	nsa_metrics_stop(mx);
	nsa_standby_stop(sb);
	nsa_standby_free(sb);
	return 0;
}

int main(int argc, char **argv)
{
	/* With the [gateway] keys: one file may serve a gateway and its
	 * agents, which accept and ignore that section. */
	static struct ngw_config conf;
	struct nsa_cli cli = {
		.prog = "natsync-agent",
		.usage = usage,
		.keys = &ngw_config_keys,
	};
	int opt, rc;

	while ((opt = getopt_long(argc, argv, NSA_CLI_OPTSTRING,
				  nsa_cli_longopts, NULL)) != -1)
		if ((rc = nsa_cli_option(&cli, opt, optarg)) != NSA_CLI_RUN)
			return rc;
	if ((rc = nsa_cli_config(&cli, &conf.agent)) != NSA_CLI_RUN)
		return rc;
	rc = nsa_cli_start(&cli, &conf.agent, argc - optind, argv + optind,
			   NULL,
			   NSA_CLI_CATCH_STOP | NSA_CLI_CATCH_DUMP |
				   NSA_CLI_CATCH_HANDOVER);
	if (rc != 0)
		return rc == -ENOENT ? 1 : 2; /* no gateway yet: retry later */
	nsa_sd_ready(conf.agent.role == NSA_ROLE_ACTIVE ? "active" : "standby");

	if (conf.agent.role == NSA_ROLE_ACTIVE) {
		struct nag_epoch epoch = {0};

		rc = conf.agent.epoch == 0 &&
				     nag_epoch_take(&conf.agent, &epoch)
			     ? 1
			     : run_active(&conf.agent, cli.duration, &epoch);
	} else {
		rc = run_standby(&conf.agent, cli.duration);
	}
	nsa_sd_stopping();
	if (!gateway_gone)
		rte_eal_cleanup();
	return rc;
}
