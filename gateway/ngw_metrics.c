/*
 * ngw_metrics.c - natsync-gateway's metrics and health: /metrics and
 * /readyz ([metrics] listen, agent/ops/nsa_metrics.h) and the control socket's
 * "health" command, one logic for both; and the control socket's "stats"
 * reply (gw_stats), the same counters one name=value a line.
 *
 * All of it runs on the main loop, the thread that promotes and demotes,
 * so g->active and the mode cannot change under a scrape. The fast path's
 * counters are read as gw_stats reads them (relaxed loads of its
 * per-lcore counters); nothing here waits for the forwarding lcore.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ngw_gw.h"
#include "nsa_active.h"
#include "nsa_log.h"
#include "nsa_metrics_roles.h"
#include "nsa_standby.h"
#include "nsdp_nat.h"
#include "nsdp_stat.h"
#include "nsdp_table.h"

/* ---- the control socket's stats ----------------------------------------- */

#define STAT_LINE(buf, len, used, name, v)                                    \
	do {                                                                  \
		int n_ = snprintf((buf) + (used), (len) - (used),             \
				  "%s=%" PRIu64 "\n", (name), (uint64_t)(v)); \
		if (n_ > 0 && (size_t)n_ < (len) - (used))                    \
			(used) += (size_t)n_;                                 \
	} while (0)

/* Defer: the hold time under which fraction p of the held packets left,
 * us (the upper end of its histogram bucket); 0 with none. */
static uint64_t gw_defer_pct(struct gw *g, double p)
{
	uint64_t h[NSDP_NAT_DEFER_BUCKETS], total = 0, seen = 0;
	unsigned int i;

	nsdp_nat_defer_hist(g->nat, h);
	for (i = 0; i < NSDP_NAT_DEFER_BUCKETS; i++)
		total += h[i];
	if (total == 0)
		return 0;
	for (i = 0; i < NSDP_NAT_DEFER_BUCKETS; i++) {
		seen += h[i];
		if ((double)seen >= p * (double)total)
			break;
	}
	if (i >= NSDP_NAT_DEFER_BUCKETS)
		i = NSDP_NAT_DEFER_BUCKETS - 1;
	return (uint64_t)(i + 1) * NSDP_NAT_DEFER_BUCKET_US;
}

int gw_stats(struct gw *g, char *reply, size_t len)
{
	struct nsdp_nat_stats ns;
	struct nsdp_table_stats ts;
	struct nsa_active_stats as = {0};
	size_t used;

	nsdp_nat_stats(g->nat, &ns);
	nsdp_table_stats(g->table, &ts);
	if (g->active)
		nsa_active_stats(g->active, &as);
	used = (size_t)snprintf(reply, len, "ok\n");
#define NAT(f) STAT_LINE(reply, len, used, "nat." #f, ns.f)
	NAT(rx_inside);
	NAT(rx_outside);
	NAT(tx_inside);
	NAT(tx_outside);
	NAT(created);
	NAT(refreshed);
	NAT(revived);
	NAT(closed);
	NAT(expired);
	NAT(recorded);
	NAT(record_drops);
	NAT(standby_drops);
	NAT(not_ipv4);
	NAT(truncated);
	NAT(bad_ip_header);
	NAT(bad_ip_checksum);
	NAT(ip_options);
	NAT(fragments);
	NAT(ttl_expired);
	NAT(unknown_proto);
	NAT(icmp_unsupported);
	NAT(tcp_no_session);
	NAT(no_session);
	NAT(not_ours);
	NAT(to_gateway);
	NAT(ports_exhausted);
	NAT(table_full);
	NAT(neigh_miss);
	NAT(arp_in);
	NAT(arp_replies_sent);
	NAT(arp_requests_sent);
	NAT(arp_announcements);
	NAT(arp_ignored);
	NAT(alloc_failures);
	NAT(defer_held);
	NAT(defer_settled);
	NAT(defer_timeouts);
	NAT(defer_dropped);
	NAT(defer_overflow);
	NAT(defer_unrecorded);
	NAT(ip6_ext_headers);
	NAT(udp6_zero_checksum);
	NAT(nd_in);
	NAT(nd_adverts_sent);
	NAT(nd_solicits_sent);
	NAT(nd_ignored);
	NAT(icmp_errors_translated);
	NAT(icmp_error_no_session);
	NAT(icmp_error_bad);
	NAT(adopted);
	NAT(adopt_known);
	NAT(adopt_port_taken);
	NAT(forgotten);
#undef NAT
	STAT_LINE(reply, len, used, "defer.p50_us", gw_defer_pct(g, 0.50));
	STAT_LINE(reply, len, used, "defer.p99_us", gw_defer_pct(g, 0.99));
	STAT_LINE(reply, len, used, "defer.p999_us", gw_defer_pct(g, 0.999));
	STAT_LINE(reply, len, used, "port.tx_drops",
		  NSDP_STAT_READ(g->fwd.tx_drops));
	STAT_LINE(reply, len, used, "table.live", ts.live);
	STAT_LINE(reply, len, used, "table.live_v6", ts.live_v6);
	STAT_LINE(reply, len, used, "table.tombstones", ts.tombstones);
	STAT_LINE(reply, len, used, "table.full_drops", ts.full_drops);
	STAT_LINE(reply, len, used, "agent.acked", as.acked);
	STAT_LINE(reply, len, used, "agent.dropped", as.dropped);
	STAT_LINE(reply, len, used, "agent.settle_abandoned",
		  as.settle_abandoned);
	STAT_LINE(reply, len, used, "gateway.promotions", g->promotions);
	STAT_LINE(reply, len, used, "gateway.demotions", g->demotions);
	STAT_LINE(reply, len, used, "gateway.fenced", g->fenced);
	STAT_LINE(reply, len, used, "gateway.readbacks", g->readbacks);
	STAT_LINE(reply, len, used, "agent.fenced", as.fenced);
	return 0;
}

/* ---- health and metrics -------------------------------------------------- */

int ngw_health(struct gw *g, char *why, size_t whylen)
{
	if (g->stuck) {
		snprintf(why, whylen,
			 "stuck: the forwarding lcore has not confirmed a "
			 "mode change");
		return 0;
	}
	if (g->unfit_epoch) {
		snprintf(why, whylen,
			 "fenced: epoch %" PRIu64 " of another gateway took "
			 "over; unfit for MASTER until a demote (keepalived's "
			 "BACKUP)",
			 g->unfit_epoch);
		return 0;
	}
	if (nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE) {
		/* agent = external: the writers are another process's,
		 * whose own /readyz tells. */
		if (g->active == NULL)
			return 1;
		return nsa_metrics_active_ready(
			g->active, g->conf.agent.metrics_ready_retry_ms, why,
			whylen);
	}
	return nsa_metrics_standby_ready(g->sb, why, whylen);
}

static int ngw_ready_hook(void *arg, char *why, size_t whylen)
{
	return ngw_health(arg, why, whylen);
}

/* What the gateway's families read: the fast path's and the table's
 * stats, and the main loop's own counters and mode. */
struct gw_view {
	struct nsdp_nat_stats ns;
	struct nsdp_table_stats ts;
	uint64_t tx_drops; /* what the ports did not take */
	uint64_t mode_active, mode_standby, mode_stuck;
	uint64_t promotions, demotions, fenced;
};

/* The fast path's packet and drop counters are labelled with their
 * fields' names, and most counters are named after their fields. */
#define DROP(f) NSA_MX_SAMPLE(ns.f, #f)
#define PACKETS(direction, side) \
	NSA_MX_SAMPLE2(ns.direction##_##side, #direction, #side)
#define SESSIONS(f, help) \
	NSA_MX_COUNTER(ns.f, "natsync_gateway_sessions_" #f "_total", help)
#define GW(f, help) NSA_MX_COUNTER(f, "natsync_gateway_" #f "_total", help)
/* clang-format off */
#define NSA_MX_STRUCT struct gw_view
static const struct nsa_mx_row gateway_rows[] = {
	NSA_MX_FAMILY2("natsync_gateway_packets_total", "counter", "direction", "side", "Packets received (rx) and put on the tx lists (tx), by side."),
	PACKETS(rx, inside),
	PACKETS(rx, outside),
	PACKETS(tx, inside),
	PACKETS(tx, outside),
	NSA_MX_FAMILY("natsync_gateway_drops_total", "counter", "reason", "Packets dropped, by reason (the fast path's drop counters; tx_drops: what the ports did not take)."),
	DROP(standby_drops),
	DROP(not_ipv4),
	DROP(truncated),
	DROP(bad_ip_header),
	DROP(bad_ip_checksum),
	DROP(ip_options),
	DROP(fragments),
	DROP(ttl_expired),
	DROP(unknown_proto),
	DROP(icmp_unsupported),
	DROP(tcp_no_session),
	DROP(no_session),
	DROP(not_ours),
	DROP(to_gateway),
	DROP(ports_exhausted),
	DROP(table_full),
	DROP(neigh_miss),
	DROP(alloc_failures),
	DROP(ip6_ext_headers),
	DROP(udp6_zero_checksum),
	DROP(icmp_error_no_session),
	DROP(icmp_error_bad),
	NSA_MX_SAMPLE(tx_drops, "tx_drops"),
	NSA_MX_GAUGE(ts.live, "natsync_gateway_sessions", "Sessions in the gateway's table."),
	SESSIONS(created, "Sessions the fast path created."),
	SESSIONS(refreshed, "Session refreshes the fast path recorded."),
	SESSIONS(revived, "Refreshes of sessions whose replicated copy had expired (the store and a standby no longer held them); under defer their packet waited as a new session's first."),
	SESSIONS(closed, "Sessions closed (TCP FIN/RST)."),
	SESSIONS(expired, "Sessions expired."),
	NSA_MX_COUNTER(ns.recorded, "natsync_gateway_records_total", "Records the fast path put in its lane."),
	NSA_MX_COUNTER(ns.record_drops, "natsync_gateway_record_drops_total", "Records the full lane refused."),
	NSA_MX_FAMILY("natsync_gateway_defer_packets_total", "counter", "outcome", "Defer: first packets held until their record was acknowledged (held), and how each left: settled, timeout (after defer_max_us), dropped (demoted while held); overflow and unrecorded went at once, unheld."),
	NSA_MX_SAMPLE(ns.defer_held, "held"),
	NSA_MX_SAMPLE(ns.defer_settled, "settled"),
	NSA_MX_SAMPLE(ns.defer_timeouts, "timeout"),
	NSA_MX_SAMPLE(ns.defer_dropped, "dropped"),
	NSA_MX_SAMPLE(ns.defer_overflow, "overflow"),
	NSA_MX_SAMPLE(ns.defer_unrecorded, "unrecorded"),
	NSA_MX_FAMILY("natsync_gateway_mode", "gauge", "mode", "1 on the gateway's current mode."),
	NSA_MX_SAMPLE(mode_active, "active"),
	NSA_MX_SAMPLE(mode_standby, "standby"),
	NSA_MX_SAMPLE(mode_stuck, "stuck"),
	GW(promotions, "Promotions to active."),
	GW(demotions, "Demotions to standby."),
	GW(fenced, "Demotions because a newer epoch took over."),
};
#undef NSA_MX_STRUCT
/* clang-format on */
#undef GW
#undef SESSIONS
#undef DROP
#undef PACKETS

static void gateway_families(struct nsa_mx *m, struct gw *g)
{
	int active = nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE;
	struct gw_view v;

	nsdp_nat_stats(g->nat, &v.ns);
	nsdp_table_stats(g->table, &v.ts);
	v.tx_drops = NSDP_STAT_READ(g->fwd.tx_drops);
	v.mode_active = active && !g->stuck;
	v.mode_standby = !active && !g->stuck;
	v.mode_stuck = g->stuck != 0;
	v.promotions = g->promotions;
	v.demotions = g->demotions;
	v.fenced = g->fenced;
	nsa_mx_table(m, gateway_rows,
		     sizeof(gateway_rows) / sizeof(gateway_rows[0]), &v);
}

static void ngw_render(void *arg, struct nsa_mx *m)
{
	struct gw *g = arg;
	char why[256];

	nsa_metrics_common(m, nsdp_nat_epoch(g->nat),
			   ngw_health(g, why, sizeof(why)));
	/* Zeros while standby (or with agent = external). */
	nsa_metrics_active(m, g->active);
	nsa_metrics_standby(m, g->sb, g->conf.agent.table_capacity);
	gateway_families(m, g);
}

int ngw_metrics_start(struct gw *g)
{
	struct nsa_metrics_hooks hooks = {
		.render = ngw_render,
		.ready = ngw_ready_hook,
		.arg = g,
		.role = "gateway",
		.gateway_id = g->conf.agent.gateway_id,
	};
	char err[256];

	if (!g->conf.agent.metrics_listen[0])
		return 0;
	g->metrics = nsa_metrics_start(g->conf.agent.metrics_listen, &hooks,
				       err, sizeof(err));
	if (g->metrics == NULL) {
		NSA_ERR("%s", err);
		return -1;
	}
	NSA_INFO("metrics: serving /metrics, /healthz and /readyz on %s",
		 g->conf.agent.metrics_listen);
	return 0;
}
