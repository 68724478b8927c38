/*
 * percentile.h -- the p-th percentile of latency samples, shared by the
 * pcor and MPI benchmark programs (no pcor or MPI dependency).
 */
#ifndef BENCH_SHM_PERCENTILE_H
#define BENCH_SHM_PERCENTILE_H

#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The p-th percentile (nearest rank) of n samples, sorted in place. */
static inline double bench_percentile(double *v, long n, int p)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	long k = (n * p + 99) / 100;
	return v[k > 0 ? k - 1 : 0];
}

#endif
