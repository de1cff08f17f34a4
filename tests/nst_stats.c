/*
 * nst_stats.c - test support: sorting and percentiles (nst_stats.h).
 */
#include <stdlib.h>

#include "nst_stats.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void nst_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t nst_percentile(const uint64_t *v, size_t n, double p)
{
	long i = (long)(p / 100.0 * (double)n + 0.999999) - 1;

	return v[i < 0 ? 0 : i >= (long)n ? (long)n - 1 : i];
}
