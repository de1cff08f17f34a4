/*
 * nv_memory.h - natsync-verify --used-memory and --memory-base
 * (nv_memory.c): the store's memory, as natsync-bench measures it
 * (nsa_storemem.c). Private to the program.
 */
#ifndef NV_MEMORY_H
#define NV_MEMORY_H

#include <stdint.h>

#include "nsa_config.h"
#include "nv_table.h"

/* --memory-base: the store's growth since base per session of store (the
 * table read from it), in all and for each family, printed. 0, or -EIO
 * (logged). */
int nv_memory_report(const struct nsa_config *conf,
		     const struct nv_table *store, uint64_t base);

/* --used-memory: what the store uses now, summed over its masters,
 * printed: 0, or 2. */
int nv_used_memory(const struct nsa_config *conf);

#endif
