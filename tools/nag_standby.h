/*
 * nag_standby.h - natsync-agent's standby role (nag_standby.c). Private
 * to the program.
 */
#ifndef NAG_STANDBY_H
#define NAG_STANDBY_H

#include "nsa_config.h"

/* Rebuild the table until stopped, --duration (s, 0: none) passed or a
 * handover (SIGUSR2) ended. The exit status: 0, 1 (a failure) or 2 (the
 * conntrack commit's namespace or privileges are missing). */
int nag_standby_run(const struct nsa_config *conf, double duration);

#endif
