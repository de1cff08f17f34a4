/*
 * nsb_num.c - option numbers and medians for natsync-bench and
 * natsync-gwbench, so that both refuse the same bad input the same way and
 * summarise runs alike.
 *
 * Not here: anything a program prints on stdout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "nsb_num.h"

int nsb_parse_u64(const char *prog, const char *opt, const char *v,
		  uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v >= '0' && *v <= '9' && !*end && !errno && n >= min && n <= max) {
		*out = n;
		return 0;
	}
	if (max == UINT64_MAX)
		fprintf(stderr,
			"%s: --%s: '%s' is not a number >= %" PRIu64 "\n", prog,
			opt, v, min);
	else
		fprintf(stderr,
			"%s: --%s: '%s' is not a number in %" PRIu64
			"..%" PRIu64 "\n",
			prog, opt, v, min, max);
	return -1;
}

int nsb_parse_pct(const char *prog, const char *opt, const char *v, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if ((*v < '0' || *v > '9') || *end || errno || !(d >= 0 && d <= 100)) {
		fprintf(stderr, "%s: --%s: '%s' is not a percentage 0..100\n",
			prog, opt, v);
		return -1;
	}
	*out = d;
	return 0;
}

int nsb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double nsb_median(double *v, unsigned int n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), nsb_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}
