/*
 * ngw_metrics.c - natsync-gateway's metrics and health: /metrics and
 * /readyz ([metrics] listen, agent/ops/nsa_metrics.h) and the control socket's
 * "health" command, one logic for both.
 *
 * All of it runs on the main loop, the thread that promotes and demotes,
 * so g->active and the mode cannot change under a scrape. The fast path's
 * counters are read as gw_stats reads them (relaxed loads of its
 * per-lcore counters); nothing here waits for the forwarding lcore.
 */
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

int ngw_health(struct gw *g, char *why, size_t whylen)
{
	if (g->stuck) {
		snprintf(why, whylen,
			 "stuck: the forwarding lcore has not confirmed a "
			 "mode change");
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

static void gateway_families(struct nsa_mx *m, struct gw *g)
{
	struct nsdp_nat_stats ns;
	struct nsdp_table_stats ts;
	int active = nsdp_nat_mode(g->nat) == NSDP_NAT_ACTIVE;

	nsdp_nat_stats(g->nat, &ns);
	nsdp_table_stats(g->table, &ts);
	nsa_mx_family(m, "natsync_gateway_packets_total", "counter",
		      "Packets received (rx) and put on the tx lists (tx), "
		      "by side.");
	nsa_mx_sample(m, "natsync_gateway_packets_total", (double)ns.rx_inside,
		      "direction", "rx", "side", "inside", NULL);
	nsa_mx_sample(m, "natsync_gateway_packets_total", (double)ns.rx_outside,
		      "direction", "rx", "side", "outside", NULL);
	nsa_mx_sample(m, "natsync_gateway_packets_total", (double)ns.tx_inside,
		      "direction", "tx", "side", "inside", NULL);
	nsa_mx_sample(m, "natsync_gateway_packets_total", (double)ns.tx_outside,
		      "direction", "tx", "side", "outside", NULL);
	nsa_mx_family(m, "natsync_gateway_drops_total", "counter",
		      "Packets dropped, by reason (the fast path's drop "
		      "counters; tx_drops: what the ports did not take).");
#define DROP(f)                                                       \
	nsa_mx_sample(m, "natsync_gateway_drops_total", (double)ns.f, \
		      "reason", #f, NULL)
	DROP(standby_drops);
	DROP(not_ipv4);
	DROP(truncated);
	DROP(bad_ip_header);
	DROP(bad_ip_checksum);
	DROP(ip_options);
	DROP(fragments);
	DROP(ttl_expired);
	DROP(unknown_proto);
	DROP(icmp_unsupported);
	DROP(tcp_no_session);
	DROP(no_session);
	DROP(not_ours);
	DROP(to_gateway);
	DROP(ports_exhausted);
	DROP(table_full);
	DROP(neigh_miss);
	DROP(alloc_failures);
#undef DROP
	nsa_mx_sample(m, "natsync_gateway_drops_total",
		      (double)NSDP_STAT_READ(g->fwd.tx_drops), "reason",
		      "tx_drops", NULL);
	nsa_mx_gauge(m, "natsync_gateway_sessions", (double)ts.live,
		     "Sessions in the gateway's table.");
	nsa_mx_counter(m, "natsync_gateway_sessions_created_total", ns.created,
		       "Sessions the fast path created.");
	nsa_mx_counter(m, "natsync_gateway_sessions_refreshed_total",
		       ns.refreshed,
		       "Session refreshes the fast path recorded.");
	nsa_mx_counter(m, "natsync_gateway_sessions_closed_total", ns.closed,
		       "Sessions closed (TCP FIN/RST).");
	nsa_mx_counter(m, "natsync_gateway_sessions_expired_total", ns.expired,
		       "Sessions expired.");
	nsa_mx_counter(m, "natsync_gateway_records_total", ns.recorded,
		       "Records the fast path put in its lane.");
	nsa_mx_counter(m, "natsync_gateway_record_drops_total", ns.record_drops,
		       "Records the full lane refused.");
	nsa_mx_family(m, "natsync_gateway_mode", "gauge",
		      "1 on the gateway's current mode.");
	nsa_mx_sample(m, "natsync_gateway_mode", active && !g->stuck, "mode",
		      "active", NULL);
	nsa_mx_sample(m, "natsync_gateway_mode", !active && !g->stuck, "mode",
		      "standby", NULL);
	nsa_mx_sample(m, "natsync_gateway_mode", g->stuck, "mode", "stuck",
		      NULL);
	nsa_mx_counter(m, "natsync_gateway_promotions_total", g->promotions,
		       "Promotions to active.");
	nsa_mx_counter(m, "natsync_gateway_demotions_total", g->demotions,
		       "Demotions to standby.");
	nsa_mx_counter(m, "natsync_gateway_fenced_total", g->fenced,
		       "Demotions because a newer epoch took over.");
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
