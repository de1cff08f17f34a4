/*
 * nag_standby.c - natsync-agent's standby role (nag_standby.h): the table
 * rebuilt from the store and the notifications until stopped, dumped on
 * SIGUSR1, handed over to this node's active on SIGUSR2 (an epoch, the
 * fence, every master read again), the progress lines and the REPORT
 * line.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nag_epoch.h"
#include "nag_metrics.h"
#include "nag_standby.h"
#include "nsa_cli.h"
#include "nsa_log.h"
#include "nsa_metrics.h"
#include "nsa_sdnotify.h"
#include "nsa_standby.h"
#include "nsdp_time.h"

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

/* The REPORT line of a stopped standby. epoch_max: the highest epoch of
 * its pair it knows (its table's sessions', the batches and the store's
 * counter it saw: nsa_standby_epoch_known), the floor of this node's next
 * active ([agent] epoch_floor). */
static void standby_report(struct nsa_standby *sb, int64_t handover)
{
	struct nsa_standby_stats st;
	struct nsdp_table_stats ts;
	uint32_t epoch_max = nsa_standby_epoch_known(sb);
	char commit[320];

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
	       " epoch_max=%" PRIu32 " handover_epoch=%" PRId64
	       " subscriber_nice=%d subscriber_rtprio=%d"
	       " subscriber_lowered=%" PRIu64 "%s\n",
	       ts.live, ts.live_v6, st.batches, st.records, st.loaded,
	       st.load_values, st.load_bytes, st.gaps, st.resyncs, st.repairs,
	       st.repair_values, st.repair_bytes, st.refused_segments,
	       st.resubscribes, st.topology_changes, st.stale,
	       st.dead_subscriptions, st.bad_messages, ts.full_drops, st.fenced,
	       st.other_pair, st.epoch_regressions, st.epoch_resyncs,
	       standby_lag_avg_us(&st), st.lag_max_us, st.lag_count, epoch_max,
	       handover < 0 ? 0 : handover, st.subscriber_nice,
	       st.subscriber_rtprio, st.subscriber_lowered, commit);
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
	uint32_t floor = conf->epoch_floor, known = nsa_standby_epoch_known(sb);
	double t0 = nsdp_now_s();
	int64_t e;

	if (known > floor)
		floor = known;
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

int nag_standby_run(const struct nsa_config *conf, double duration)
{
	int64_t handover = -1;
	struct nsa_standby *sb = nsa_standby_create(conf);
	struct nsa_standby_stats st;
	double t0 = nsdp_now_s(), last_progress = t0;
	int was_synced = 0, mx_failed;
	struct nag_metrics am = {.conf = conf, .standby = sb};
	struct nsa_metrics *mx = NULL;

	if (sb)
		mx = nag_metrics_start(&am, &mx_failed);
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
