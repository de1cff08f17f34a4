/*
 * nsa_active_health.h - the active role's writers as any other thread
 * reads them, through relaxed atomics, never a lock: the counters summed,
 * one writer's health, the store's epoch they read. Included by
 * nsa_active.h.
 */
#ifndef NSA_ACTIVE_HEALTH_H
#define NSA_ACTIVE_HEALTH_H

#include <stdint.h>

#include "nsa_active_stats.h"

struct nsa_active;

void nsa_active_stats(const struct nsa_active *a, struct nsa_active_stats *s);

unsigned int nsa_active_writers(const struct nsa_active *a);
void nsa_active_writer_health(const struct nsa_active *a, unsigned int i,
			      struct nsa_writer_health *h);

/* The highest epoch the writers read from the store's counter (0 before
 * any connection): above the records' epoch, this active is fenced. */
uint32_t nsa_active_fence(const struct nsa_active *a);

#endif
