/*
 * nsb_natsync.c - natsync-bench's natsync mode: the real pieces in
 * one process, flat out, at a fixed rate, or both (--half-load).
 *
 * One run: the lanes, the synthetic source on EAL worker lcores, the active
 * writers and (unless --no-standby) a standby with its own table,
 * subscribed and synced before the source starts. The clock runs from the
 * source's start until every record is acknowledged by the store
 * (nsa_active_drain). Then the standby gets a bounded time to catch up, and
 * its table is compared with the source's final table, flow by flow. The
 * lag percentiles are the standby's: its CLOCK_REALTIME when it applied a
 * record minus the record's timestamp, so record -> standby table.
 *
 * The store's memory is probed (every master) before the run and again
 * once the writers and the standby are gone, so that the difference is the
 * sessions' and not the clients' buffers.
 *
 * --half-load: a flat-out run finds the maximum rate; a second run of as
 * many events at half of it gives the latency at half load. Each run prints
 * its RESULT line, the second with load=half and max_rate.
 *
 * Not here: any replication logic (only the agent's public APIs are used).
 */
#include <inttypes.h>
#include <stdio.h>

#include "nsa_active.h"
#include "nsb_bench.h"
#include "nsa_host.h"
#include "nsa_log.h"
#include "nsa_standby.h"
#include "nsdp_synth.h"
#include "nsdp_table.h"
#include "nsdp_time.h"

#define SYNC_TIMEOUT_S 30.0
#define CATCHUP_TIMEOUT_S 10.0
#define DRAIN_TIMEOUT_MS 600000

struct table_check {
	const struct nsdp_table *table;
	uint64_t flows, mismatches;
};

static void count_live(const struct ns_session *s, void *arg)
{
	nsa_storemem_count(arg, s);
}

static void check_flow(const struct ns_session *s, void *arg)
{
	struct table_check *c = arg;
	struct ns_rec got;
	int rc;

	c->flows++;
	if (ns_family_is_v6(s->family)) {
		const struct ns_session_v6 *x = ns_session_v6_of(s);

		rc = nsdp_table_lookup_v6(c->table, s->proto, x->orig_saddr,
					  s->orig.sport, x->orig_daddr,
					  s->orig.dport, &got);
	} else {
		rc = nsdp_table_lookup(c->table, s->proto, &s->orig, &got.s);
	}
	if (rc != 0 || !ns_session_equal_state(s, &got.s))
		c->mismatches++;
}

/* Mismatching flows between the source's final table and the standby's,
 * counting sessions the standby has beyond the source's as mismatches. */
static uint64_t table_mismatches(const struct nsdp_synth *synth,
				 const struct nsdp_table *table)
{
	struct table_check c = {table, 0, 0};
	struct nsdp_table_stats ts;

	nsdp_synth_final_table(synth, check_flow, &c);
	nsdp_table_stats(table, &ts);
	if (ts.live > c.flows)
		c.mismatches += ts.live - c.flows;
	return c.mismatches;
}

static struct nsa_standby *standby_attach(const struct nsa_config *active_conf)
{
	static struct nsa_config conf;
	struct nsa_standby *sb;
	struct nsa_standby_stats st;
	double t0 = nsdp_now_s();

	conf = *active_conf;
	conf.role = NSA_ROLE_STANDBY;
	sb = nsa_standby_create(&conf);
	if (!sb || nsa_standby_start(sb) != 0) {
		NSA_ERR("standby: cannot start");
		if (sb)
			nsa_standby_free(sb);
		return NULL;
	}
	if (nsb_standby_wait_synced(sb, t0, SYNC_TIMEOUT_S, 20, &st,
				    "standby") != 0) {
		nsa_standby_stop(sb);
		nsa_standby_free(sb);
		return NULL;
	}
	NSA_INFO("standby: synced in %.3f s (%" PRIu64 " sessions loaded)",
		 nsdp_now_s() - t0, st.loaded);
	return sb;
}

/* After the drain: give the standby at most CATCHUP_TIMEOUT_S to apply
 * every acknowledged record and to hold the source's final table. */
static const char *standby_verdict(struct nsa_standby *sb,
				   const struct nsdp_synth *synth,
				   uint64_t acked)
{
	struct nsa_standby_stats st;
	double t0 = nsdp_now_s();
	uint64_t mismatches = 0;

	for (;;) {
		nsa_standby_stats(sb, &st);
		if (st.records + st.loaded >= acked) {
			mismatches =
				table_mismatches(synth, nsa_standby_table(sb));
			if (mismatches == 0)
				return "yes";
		}
		if (nsdp_now_s() - t0 > CATCHUP_TIMEOUT_S)
			break;
		nsdp_sleep_ms(50);
	}
	mismatches = table_mismatches(synth, nsa_standby_table(sb));
	NSA_WARN("standby: %" PRIu64 " of %" PRIu64 " records applied, %" PRIu64
		 " flows differ from the source",
		 st.records + st.loaded, acked, mismatches);
	return mismatches == 0 ? "yes" : "no";
}

/* The standby's figures: lag percentiles, the table's memory, and the
 * subscriptions lost and resyncs since it synced (at): a standby the
 * store cut off mid-run reloaded its master instead of applying the
 * stream, which a flat-out run must not pass off as keeping up. */
static void standby_figures(struct nsa_standby *sb,
			    const struct nsa_standby_stats *at,
			    const struct nsa_config *conf, struct nsb_result *r)
{
	struct nsa_standby_stats st;
	struct nsdp_table_stats ts;

	nsa_standby_stats(sb, &st);
	r->standby_resubscribes = st.resubscribes - at->resubscribes;
	r->standby_resyncs = st.resyncs - at->resyncs;
	r->lag_p50_us = nsa_standby_lag_percentile_us(&st, 50);
	r->lag_p99_us = nsa_standby_lag_percentile_us(&st, 99);
	r->lag_p999_us = nsa_standby_lag_percentile_us(&st, 99.9);
	r->send_p50_us = nsa_standby_lag_part_percentile_us(&st, 1, 50);
	r->send_p99_us = nsa_standby_lag_part_percentile_us(&st, 1, 99);
	r->send_p999_us = nsa_standby_lag_part_percentile_us(&st, 1, 99.9);
	r->deliver_p50_us = nsa_standby_lag_part_percentile_us(&st, 0, 50);
	r->deliver_p99_us = nsa_standby_lag_part_percentile_us(&st, 0, 99);
	r->deliver_p999_us = nsa_standby_lag_part_percentile_us(&st, 0, 99.9);
	r->subscriber_nice = st.subscriber_nice;
	r->subscriber_rtprio = st.subscriber_rtprio;
	r->subscriber_lowered = st.subscriber_lowered;
	nsdp_table_stats(nsa_standby_table(sb), &ts);
	r->table_bytes_per_slot =
		(double)ts.memory_bytes / (double)conf->table_capacity;
	if (ts.live > 0)
		r->table_bytes_per_session =
			(double)ts.memory_bytes / (double)ts.live;
}

/* Wait for the source to finish, printing progress once a second. */
static void watch_source(const struct nsa_source *src,
			 const struct nsa_active *active, double t0)
{
	struct nsa_active_stats st;
	struct nsdp_synth_stats ss;
	double last = t0;
	uint64_t last_acked = 0;

	for (;;) {
		double t;

		nsdp_sleep_ms(20);
		t = nsdp_now_s();
		nsdp_synth_stats(src->synth, &ss);
		if (ss.done)
			return;
		if (t - last < 1.0)
			continue;
		nsa_active_stats(active, &st);
		fprintf(stderr,
			"progress: natsync %.1fs produced %" PRIu64
			" acked %" PRIu64 " (%.0f/s) drops %" PRIu64 "\n",
			t - t0, ss.produced, st.acked,
			(double)(st.acked - last_acked) / (t - last),
			st.lane_drops + st.dropped + ss.dropped);
		last_acked = st.acked;
		last = t;
	}
}

/* The store's bytes per session, in all and for each family. */
static void store_figures(const struct nsa_config *conf,
			  const struct nsa_storemem *before,
			  const struct nsa_storemem *after,
			  const struct nsa_storemem_live *live,
			  struct nsb_result *r)
{
	struct nsa_storemem_bytes b;

	nsa_storemem_per_session(&conf->store, before, after, live, &b);
	r->store_bytes_per_session = b.all;
	r->store_bytes_v4 = b.v4;
	r->store_bytes_v6 = b.v6;
}

int nsb_natsync_run(const struct nsa_config *conf, const struct nsb_opts *o,
		    struct nsb_result *r)
{
	struct nsa_storemem before, after;
	struct nsa_source src = {0};
	struct nsa_standby *sb = NULL;
	struct nsa_active *active = NULL;
	struct nsa_active_stats st;
	struct nsdp_synth_stats ss = {0};
	struct nsa_storemem_live live = {0};
	struct nsa_standby_stats synced;
	double t0;
	int rc = 1, drained;

	nsb_result_init(r, "natsync", conf);
	r->value_bytes = (double)ns_record_wire_len(NS_FAMILY_IPV4);
	/* Until the verdict: a run that fails has no matching standby. */
	if (o->standby)
		r->standby_match = "no";
	if (o->flush && nsa_storemem_flush(&conf->store) != 0)
		return 1;
	if (nsa_storemem_probe(&conf->store, &before) != 0)
		return 1;
	if (before.keys != 0)
		NSA_INFO("store: %" PRIu64 " keys before the run: no memory "
			 "per session (--flush empties the store first)",
			 before.keys);
	if (nsa_source_open(&src, conf) != 0)
		goto out;
	if (o->standby && !(sb = standby_attach(conf)))
		goto out;
	if (sb)
		nsa_standby_stats(sb, &synced);
	active = nsb_writers_start(conf, &src, "active");
	if (!active)
		goto out;
	t0 = nsdp_now_s();
	nsa_source_start(&src);
	watch_source(&src, active, t0);
	drained = nsa_active_drain(active, DRAIN_TIMEOUT_MS) == 0;
	r->seconds = nsdp_now_s() - t0;
	if (!drained)
		NSA_ERR("active: not every record was acknowledged in time");
	nsa_source_stop(&src);
	nsdp_synth_stats(src.synth, &ss);
	nsa_active_stats(active, &st);
	r->events = ss.produced;
	r->drops = st.lane_drops + st.dropped + ss.dropped;
	r->events_v6 = ss.v6_records;
	nsdp_synth_final_table(src.synth, count_live, &live);
	r->live = live.live;
	r->live_v6 = live.live_v6;
	if (sb) {
		r->standby_match = standby_verdict(sb, src.synth, st.acked);
		standby_figures(sb, &synced, conf, r);
	}
	rc = drained ? 0 : 1;
out:
	nsb_writers_stop(active);
	if (sb) {
		nsa_standby_stop(sb);
		nsa_standby_free(sb);
	}
	nsa_source_close(&src);
	if (rc == 0) {
		nsdp_sleep_ms(NSB_CLIENTS_GONE_MS);
		if (nsa_storemem_probe(&conf->store, &after) == 0)
			store_figures(conf, &before, &after, &live, r);
	}
	return rc;
}

int nsb_natsync_report(const struct nsa_config *conf, const struct nsb_opts *o,
		       struct nsb_result *r, int rc)
{
	nsb_result_print(r);
	if (o->csv)
		nsb_csv_append(o->csv, r, conf->synth_conf.flows);
	return rc;
}

int nsb_natsync_half_load(const struct nsa_config *conf,
			  const struct nsb_opts *o, const char *sweep,
			  struct nsb_result *max, struct nsb_result *half)
{
	static struct nsa_config run;
	double max_rate;
	int rc;

	run = *conf;
	run.synth_conf.rate = 0;
	fprintf(stderr, "natsync-bench: half load: a flat-out run first\n");
	rc = nsb_natsync_run(&run, o, max);
	max->load = "max";
	max->sweep = sweep;
	if (nsb_natsync_report(conf, o, max, rc) != 0)
		return 1;
	max_rate = nsb_rate(max);
	run.synth_conf.rate = (uint64_t)(max_rate / 2);
	if (run.synth_conf.rate == 0) {
		NSA_ERR("half load: the flat-out run measured no rate");
		return 1;
	}
	fprintf(stderr, "natsync-bench: half load: %" PRIu64 " events/s\n",
		run.synth_conf.rate);
	rc = nsb_natsync_run(&run, o, half);
	half->load = "half";
	half->sweep = sweep;
	half->max_rate = max_rate;
	return nsb_natsync_report(conf, o, half, rc);
}

int nsb_natsync(const struct nsa_config *conf, const struct nsb_opts *o)
{
	struct nsb_result max, half;

	if (o->half_load)
		return nsb_natsync_half_load(conf, o, NULL, &max, &half);
	return nsb_natsync_report(conf, o, &max,
				  nsb_natsync_run(conf, o, &max));
}
