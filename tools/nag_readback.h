/*
 * nag_readback.h - a kernel active that replicated on a provisional epoch
 * reads the store back into its conntrack once the store took the epoch.
 * Private to natsync-agent.
 *
 * The handover (a standby's SIGUSR2, keepalived-kernel-notify.sh MASTER)
 * reads every master into conntrack after the fence, so that what the old
 * active wrote and never announced is there. With the store hung it could
 * not; so once the provisional epoch is made known and the fence raised,
 * the active reads every master as a standby loads them and commits each
 * session of an earlier epoch into conntrack, as a create only: an entry
 * the kernel has (the flow's own, or another flow's holding its translated
 * address and port) is left as it is.
 */
#ifndef NAG_READBACK_H
#define NAG_READBACK_H

#include <stdint.h>

#include "nsa_config.h"

struct nag_readback;

/* Start reading back the sessions of epochs below epoch (a thread); NULL
 * when it cannot (logged). */
struct nag_readback *nag_readback_start(const struct nsa_config *conf,
					uint32_t epoch);

/* Whether the read-back ended; once it has, it is logged and freed (the
 * caller forgets rb). */
int nag_readback_poll(struct nag_readback *rb);

/* Wait for the read-back to end (each of its replies is bounded), log and
 * free it. */
void nag_readback_finish(struct nag_readback *rb);

#endif
