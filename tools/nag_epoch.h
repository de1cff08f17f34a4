/*
 * nag_epoch.h - natsync-agent's epoch as an active with [agent] epoch = 0:
 * taken from the store at start, or, when the store does not answer, a
 * provisional one made known to the store later (agent/fence/nsa_fence.h
 * has the epoch space). Private to the program.
 */
#ifndef NAG_EPOCH_H
#define NAG_EPOCH_H

#include <stdint.h>

#include "nsa_config.h"

struct nag_epoch {
	/* A provisional epoch not yet made known to the store, else 0; the
	 * next try; the store as it is asked (each connect and reply within
	 * [agent] promote_wait_ms) and as the fence is raised. */
	uint32_t provisional;
	/* The provisional epoch once the store took it (fence raised),
	 * until the caller reads the store back (nag_readback.h); else 0. */
	uint32_t made_known;
	double next_register;
	int refused_said; /* the store refused the registration: said once */
	struct nsa_store_conf quick;
	const struct nsa_store_conf *store;
};

/* A new epoch from the store into c, above every earlier one and [agent]
 * epoch_floor, and the fence raised, as a gateway's promotion. When the
 * store does not answer the first ask, an active whose gateway_id has a
 * low byte other than 0 replicates at once on a provisional epoch in the
 * generation after epoch_floor (set in c and pe); one whose low byte is 0
 * asks again with backoff until the store answers or the program is
 * stopped. 0, or 1 when stopped first (or the epochs are used up). */
int nag_epoch_take(struct nsa_config *c, struct nag_epoch *pe);

/* At time t (s), every second while pe holds a provisional epoch: make it
 * known to the store (natsync:epoch raised to it), then raise the fence.
 * A counter already above it means a newer active took over: this one's
 * records are fenced from then on (its writers read the counter on every
 * connection). */
void nag_epoch_register(struct nag_epoch *pe, double t);

/* A standby handing over to this node's active (SIGUSR2): an epoch from
 * the store above floor, each ask bounded as the first ask above, and the
 * fence raised. The epoch, or -1 (logged) when the store did not give one:
 * the active then takes its own as before. */
int64_t nag_epoch_handover(const struct nsa_config *c, uint32_t floor);

#endif
