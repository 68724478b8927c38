/*
 * percentile.h -- percentiles and stalls of latency samples and the rows
 * printed from them, shared by the pcor and MPI benchmark programs (no
 * pcor or MPI dependency).
 */
#ifndef BENCH_SHM_PERCENTILE_H
#define BENCH_SHM_PERCENTILE_H

#include <stdio.h>
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

/* A round trip at least this long (ns) is a stall. */
#define BENCH_STALL_NS 20000.0

/*
 * The rows both latency programs print from n single round trips v (ns
 * each after scaling by ns_per_unit; sorted in place): the median and
 * the 99th percentile, halved (us one way); the stalls per 100,000; and
 * what the stalls add to the one-way mean beyond the median (ns).  Rare
 * stalls -- a thread put to sleep and woken, a CPU taken away -- are
 * where a loop's mean and its median part.
 */
static inline void bench_round_trip_rows(const char *label, size_t size,
					 double *v, long n, double ns_per_unit)
{
	double m = bench_percentile(v, n, 50) * ns_per_unit;
	double p99 = bench_percentile(v, n, 99) * ns_per_unit;
	long k = 0;
	double excess = 0;
	for (long i = 0; i < n; i++) {
		double ns = v[i] * ns_per_unit;
		if (ns >= BENCH_STALL_NS) {
			k++;
			excess += ns - m;
		}
	}
	printf("lat-p50,%s,%zu,%.3f,us\n", label, size, m / 2e3);
	printf("lat-p99,%s,%zu,%.3f,us\n", label, size, p99 / 2e3);
	printf("stalls,%s,%zu,%.1f,per-100k-round-trips\n", label, size,
	       n ? 1e5 * (double)k / (double)n : 0);
	printf("stall-cost,%s,%zu,%.1f,ns-one-way\n", label, size,
	       n ? excess / (double)n / 2 : 0);
}

#endif
