/*
 * nag_metrics.c - natsync-agent's [metrics] (nag_metrics.h): /metrics,
 * /healthz and /readyz of the role that runs, served from its main loop
 * (nsa_metrics.h); the role's own figures come from nsa_metrics_roles.h.
 */
#include <stdint.h>

#include "nag_metrics.h"
#include "nsa_log.h"
#include "nsa_metrics_roles.h"

static int agent_ready(void *arg, char *why, size_t whylen)
{
	const struct nag_metrics *am = arg;

	if (am->active)
		return nsa_metrics_active_ready(
			am->active, am->conf->metrics_ready_retry_ms, why,
			whylen);
	return nsa_metrics_standby_ready(am->standby, why, whylen);
}

static void agent_render(void *arg, struct nsa_mx *m)
{
	struct nag_metrics *am = arg;
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

struct nsa_metrics *nag_metrics_start(struct nag_metrics *am, int *failed)
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
