/*
 * nag_active.c - natsync-agent's active role (nag_active.h): the session
 * source opened (the lanes of an attached gateway, the synthetic source or
 * the kernel one), its records replicated by the writers until the run
 * ends, what is left replicated as the way it ended allows, the progress
 * lines and the REPORT line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_eal.h>

#include "nag_active.h"
#include "nag_metrics.h"
#include "nag_readback.h"
#include "nsa_active.h"
#include "nsa_cli.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_metrics.h"
#include "nsa_sdnotify.h"
#include "nsdp_ksrc.h"
#include "nsdp_synth.h"
#include "nsdp_time.h"

/* Attached to a gateway: how long to replicate what is left when asked to
 * stop, and when the gateway is gone. */
#define ATTACHED_STOP_DRAIN_MS 2000
#define GATEWAY_GONE_DRAIN_MS 5000
/* A source stopped (the kernel one, or the synthetic one before its last
 * event): how long the writers get for the rest. */
#define SOURCE_STOP_DRAIN_MS 10000
/* The kernel active's read-back after a provisional epoch waits this long
 * at most for its queued records to reach the store (its own ends of
 * flows among them). */
#define READBACK_DRAIN_S 2.0

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
	struct nag_metrics am;
	struct nsa_metrics *mx;
	struct nsdp_synth_stats ss;
	struct nsdp_ksrc_stats ks;
	double t0, t_end; /* t_end: 0 until the records are all in */
	double last_progress, last_alive_check;
	uint64_t last_acked;
	int drained;
	struct nag_epoch *epoch; /* a provisional epoch to make known */
	/* The kernel source's read-back once the store took that epoch:
	 * due since readback_due (0: not due), running while readback. */
	double readback_due;
	struct nag_readback *readback;
	int gateway_gone; /* the gateway we attached to died */
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
	r->mx = nag_metrics_start(&r->am, &mx_failed);
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

/* A kernel active whose provisional epoch the store took reads the store
 * back into conntrack (nag_readback.h) once its queued records are in,
 * or READBACK_DRAIN_S passed. */
static void active_readback(struct active_run *r, double t)
{
	struct nag_epoch *pe = r->epoch;

	if (r->readback) {
		if (nag_readback_poll(r->readback))
			r->readback = NULL;
		return;
	}
	if (!r->src.ksrc || !pe || pe->made_known == 0)
		return;
	if (r->readback_due == 0)
		r->readback_due = t;
	if (nsa_active_drain(r->active, 0) != 0 &&
	    t - r->readback_due < READBACK_DRAIN_S)
		return;
	r->readback = nag_readback_start(r->conf, pe->made_known);
	pe->made_known = 0;
	r->readback_due = 0;
}

/* Until stopped, the synthetic source is done, --duration passed or the
 * gateway we attached to is gone (r->gateway_gone). */
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
		active_readback(r, t);
		if (r->src.synth && !r->drained &&
		    active_synth_done(r, duration))
			break;
		if (r->src.attached && t - r->last_alive_check >= 1.0) {
			r->last_alive_check = t;
			if (!rte_eal_primary_proc_alive(NULL)) {
				r->gateway_gone = 1;
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

	if (r->readback) {
		nag_readback_finish(r->readback);
		r->readback = NULL;
	}
	if (r->gateway_gone) {
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
	return (sourced && !r->drained) || r->gateway_gone ? 1 : 0;
}

int nag_active_run(const struct nsa_config *conf, double duration,
		   struct nag_epoch *epoch, int *gateway_gone)
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
	*gateway_gone = r.gateway_gone;
	return rc;
}
