/*
 * nsdp_stat.h - single-writer counters, as every natsync module keeps them.
 *
 * A counter has one writing thread (an lcore, a writer, the subscriber):
 * it adds with a plain read-modify-write published by a relaxed store, so
 * no bus-locked instruction lands on the fast path. Any thread reads it
 * with NSDP_STAT_READ, without a lock, and sees a value that was true at
 * some recent moment. All atomics in natsync use the GCC __atomic builtins,
 * as DPDK does.
 */
#ifndef NSDP_STAT_H
#define NSDP_STAT_H

#include <stdint.h>

#define NSDP_STAT_ADD(c, v) \
	__atomic_store_n(&(c), (c) + (uint64_t)(v), __ATOMIC_RELAXED)
#define NSDP_STAT_SUB(c, v) \
	__atomic_store_n(&(c), (c) - (uint64_t)(v), __ATOMIC_RELAXED)
#define NSDP_STAT_INC(c) NSDP_STAT_ADD(c, 1)
#define NSDP_STAT_READ(c) __atomic_load_n(&(c), __ATOMIC_RELAXED)

#endif
