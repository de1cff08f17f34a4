/*
 * nsb_num.h - numbers as both bench programs read and summarise them:
 * option values, medians.
 */
#ifndef NSB_NUM_H
#define NSB_NUM_H

#include <stdint.h>

/* v as a decimal number in min..max into *out; else -1, said on stderr
 * as "PROG: --OPT: ..." (max UINT64_MAX: no upper bound). */
int nsb_parse_u64(const char *prog, const char *opt, const char *v,
		  uint64_t min, uint64_t max, uint64_t *out);

/* v as a percentage 0..100, decimals allowed; else -1, said on stderr. */
int nsb_parse_pct(const char *prog, const char *opt, const char *v,
		  double *out);

/* qsort() order of doubles. */
int nsb_cmp_double(const void *a, const void *b);

/* The median of v[0..n-1], sorted in place; 0 when n is 0. */
double nsb_median(double *v, unsigned int n);

#endif
