/*
 * nst_stats.h - test support: the percentiles the benchmark-like tests
 * print (failover outages, first-packet latencies).
 */
#ifndef NST_STATS_H
#define NST_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Sort n values in place, smallest first. */
void nst_sort_u64(uint64_t *v, size_t n);

/* The p-th percentile (nearest rank) of n sorted values (n > 0). */
uint64_t nst_percentile(const uint64_t *v, size_t n, double p);

#endif
