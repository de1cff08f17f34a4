/*
 * nsa_compactor.h - nsa_compactor.c: the log layout's compactor thread of
 * an active (nsa_writer.h's struct nsa_active).
 */
#ifndef NSA_COMPACTOR_H
#define NSA_COMPACTOR_H

#include "nsa_writer.h"

/* Start the thread when a's layout is the log and compaction is on (0
 * otherwise too); -errno when it cannot start. */
int nsa_compactor_start(struct nsa_active *a);
/* Join the thread, a->stop being set, and log what it did. */
void nsa_compactor_stop(struct nsa_active *a);

#endif
