/*
 * nag_active.h - natsync-agent's active role (nag_active.c). Private to
 * the program.
 */
#ifndef NAG_ACTIVE_H
#define NAG_ACTIVE_H

#include "nag_epoch.h"
#include "nsa_config.h"

/* Replicate until stopped, --duration (s, 0: none) passed, the synthetic
 * source is done or the gateway attached to is gone (*gateway_gone set:
 * its shared EAL state is then no longer ours to tidy). epoch: a
 * provisional epoch to make known (nag_epoch.h). The exit status: 0, 1
 * (a failure, a source's records not all acknowledged, the gateway gone)
 * or 2 (the source does not fit the process). */
int nag_active_run(const struct nsa_config *conf, double duration,
		   struct nag_epoch *epoch, int *gateway_gone);

#endif
