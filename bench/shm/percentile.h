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

/*
 * Stalls among n round trips: how many took `over` or more (same unit as
 * v), and in *excess_p what they add to the mean beyond the median m (the
 * sum of their excess over it, over n).  Rare stalls -- a thread put to
 * sleep and woken, a CPU taken away -- are where a loop's mean and its
 * median part.
 */
static inline long bench_stalls(const double *v, long n, double over,
				double m, double *excess_p)
{
	long k = 0;
	double x = 0;
	for (long i = 0; i < n; i++)
		if (v[i] >= over) {
			k++;
			x += v[i] - m;
		}
	*excess_p = n ? x / (double)n : 0;
	return k;
}

#endif
