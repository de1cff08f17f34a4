/*
 * nsa_metrics_roles.h - the active's and the standby's metrics and
 * readiness, as natsync-agent and natsync-gateway both serve them, over
 * the exposition writer of nsa_metrics.h. Each reads the relaxed atomics
 * the REPORT line reads.
 */
#ifndef NSA_METRICS_ROLES_H
#define NSA_METRICS_ROLES_H

#include <stddef.h>
#include <stdint.h>

#include "nsa_metrics.h"
#include "nsdp_ksrc.h"

struct nsa_active;
struct nsa_standby;

/* natsync_build_info, natsync_ready, natsync_epoch. */
void nsa_metrics_common(struct nsa_mx *m, uint32_t epoch, int ready);

/* The active's families; a NULL a gives zeros (a gateway while standby)
 * and no per-writer series. */
void nsa_metrics_active(struct nsa_mx *m, const struct nsa_active *a);

/* The standby's families; table_capacity is the table's size. */
void nsa_metrics_standby(struct nsa_mx *m, struct nsa_standby *sb,
			 uint64_t table_capacity);

/* /readyz of an active: every writer connected, none retrying longer than
 * retry_ms. 1, or 0 with the reason in why. */
int nsa_metrics_active_ready(const struct nsa_active *a, unsigned int retry_ms,
			     char *why, size_t whylen);

/* /readyz of a standby: synced, subscribed to every master and each
 * loaded since. 1, or 0 with the reason in why. */
int nsa_metrics_standby_ready(const struct nsa_standby *sb, char *why,
			      size_t whylen);

/* A kernel source's defer (nsdp_ksrc.h): natsync_kernel_defer_packets_total
 * by outcome and the hold time quantiles. */
void nsa_metrics_kernel_defer(struct nsa_mx *m,
			      const struct nsdp_ksrc_defer_stats *st);

#endif
