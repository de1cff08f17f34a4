/*
 * nag_metrics.h - natsync-agent's [metrics] (nag_metrics.c): the HTTP
 * endpoint of either role. Private to the program.
 */
#ifndef NAG_METRICS_H
#define NAG_METRICS_H

#include "nsa_config.h"

struct nsa_active;
struct nsa_metrics;
struct nsa_standby;
struct nsdp_ksrc;

struct nag_metrics {
	const struct nsa_config *conf;
	struct nsa_active *active; /* the role's, NULL for the other */
	struct nsa_standby *standby;
	const struct nsdp_ksrc *ksrc; /* the active's kernel source, or NULL */
};

/* NULL when [metrics] listen is empty or on failure (*failed set, said). */
struct nsa_metrics *nag_metrics_start(struct nag_metrics *am, int *failed);

#endif
