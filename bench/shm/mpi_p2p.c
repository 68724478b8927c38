/*
 * mpi_p2p -- the MPI side of the shared-memory comparison: the same three
 * measurements as pcor_lat, pcor_bw and pcor_mr, with the same patterns
 * and the same CSV lines, so the two can be put side by side.
 *
 *   mpirun -n 2 mpi_p2p lat|bw|mr [-T] [-H] [-m MIN:MAX] [-i ITERS]
 *                       [-x WARMUP] [-w WINDOW] [-t LABEL]
 *
 * lat  ping-pong, one-way latency = round trip / 2 (us), osu_latency's
 *      iteration (rank 0 MPI_Send then MPI_Recv, rank 1 the reverse),
 *      as in pcor_lat.  Per size the mean ("latency", from a loop with
 *      no clock read inside), then the median ("lat-p50") and the 99th
 *      percentile ("lat-p99") of the single round trips of a second
 *      loop, halved, timed as pcor_lat times them; and of those, the
 *      stalls (20 us or more) per 100,000 and what they add to the
 *      one-way mean (ns), as pcor_lat prints them.
 * bw   windows of 64 MPI_Isend from rank 0, 64 MPI_Irecv on rank 1, a
 *      4-byte ack per window; MB/s (10^6 bytes/s) of payload.
 * mr   the bw pattern with 1-byte messages; messages per second.
 * -T   MPI_Init_thread with MPI_THREAD_MULTIPLE (pcor is always thread
 *      safe: this is the MPI at the same service).
 * -H   the send and receive buffers in transparent huge pages, as pcor's
 *      DMA memory for blocks of 64 KiB and more (a cross-memory read
 *      pins each page it reads: the page size sets its pace).
 *
 * Built outside meson by bench/shm/run_shm_bench.sh, once per MPI
 * (mpicc.openmpi, mpicc.mpich); it uses nothing of pcor.
 */
#define _GNU_SOURCE 1 /* getopt */
#include <mpi.h>

#include "percentile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct mb_args {
	size_t min, max;
	long iters, warmup;
	int window;
	const char *label;
} mb_args_t;

static size_t mb_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	return (size_t)v;
}

/* As sb_iters_for: fewer iterations above 8 KiB, at least 10. */
static long mb_iters_for(size_t size, long base)
{
	if (size <= 8192)
		return base;
	long n = (long)((unsigned long long)base * 8192 / size);
	return n < 10 ? 10 : n;
}

/* One osu_latency iteration: a round trip started by rank 0. */
static void mb_round_trip(int me, size_t size, char *sbuf, char *rbuf)
{
	int peer = 1 - me;
	if (me == 0)
		MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
	MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
		 MPI_STATUS_IGNORE);
	if (me == 1)
		MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
}

/*
 * Mean one-way latency (us) of iters round trips timed as one; rtt gets
 * as many more, each timed on its own (s).
 */
static double mb_lat(int me, size_t size, long iters, long warm, char *sbuf,
		     char *rbuf, double *rtt)
{
	MPI_Barrier(MPI_COMM_WORLD);
	for (long i = 0; i < warm; i++)
		mb_round_trip(me, size, sbuf, rbuf);
	double t0 = MPI_Wtime();
	for (long i = 0; i < iters; i++)
		mb_round_trip(me, size, sbuf, rbuf);
	double t1 = MPI_Wtime();
	for (long i = 0; i < iters; i++) {
		double t = MPI_Wtime();
		mb_round_trip(me, size, sbuf, rbuf);
		rtt[i] = MPI_Wtime() - t;
	}
	return (t1 - t0) * 1e6 / (2.0 * (double)iters);
}

/* Seconds rank 0 spent on iters windows (the pattern of sb_window). */
static double mb_window(int me, size_t size, int window, long iters,
			long warm, char *sbuf, char *rbuf, MPI_Request *h,
			MPI_Status *st)
{
	double t0 = 0;
	char ack[4] = {0};
	MPI_Barrier(MPI_COMM_WORLD);
	for (long it = 0; it < iters + warm; it++) {
		if (it == warm)
			t0 = MPI_Wtime();
		if (me == 0) {
			MPI_Request a;
			MPI_Irecv(ack, 4, MPI_CHAR, 1, 4, MPI_COMM_WORLD, &a);
			for (int w = 0; w < window; w++)
				MPI_Isend(sbuf, (int)size, MPI_CHAR, 1, 3,
					  MPI_COMM_WORLD, &h[w]);
			MPI_Waitall(window, h, st);
			MPI_Wait(&a, MPI_STATUS_IGNORE);
		} else {
			for (int w = 0; w < window; w++)
				MPI_Irecv(rbuf, (int)size, MPI_CHAR, 0, 3,
					  MPI_COMM_WORLD, &h[w]);
			MPI_Waitall(window, h, st);
			MPI_Send(ack, 4, MPI_CHAR, 0, 4, MPI_COMM_WORLD);
		}
	}
	return MPI_Wtime() - t0;
}

/* A buffer of len bytes (at least one), in huge pages if asked. */
static char *buffer(size_t len, int huge)
{
	const size_t huge_page = (size_t)2 << 20;
	if (!len)
		len = 1;
	if (!huge)
		return malloc(len);
	void *p = NULL;
	len = (len + huge_page - 1) & ~(huge_page - 1);
	if (posix_memalign(&p, huge_page, len))
		return NULL;
	(void)madvise(p, len, MADV_HUGEPAGE); /* a hint: may be refused */
	return p;
}

int main(int argc, char **argv)
{
	/*
	 * -T (first option after the pattern): MPI_THREAD_MULTIPLE, so the
	 * MPI pays for thread safety as pcor always does.  Asked before
	 * MPI_Init, so read from argv here; getopt skips it below.
	 */
	int multiple = argc > 2 && !strcmp(argv[2], "-T");
	if (multiple) {
		int got = MPI_THREAD_SINGLE;
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
		if (got != MPI_THREAD_MULTIPLE) {
			fprintf(stderr, "mpi_p2p: no MPI_THREAD_MULTIPLE\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	} else {
		MPI_Init(&argc, &argv);
	}
	int me, np;
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	const char *what = argc > 1 ? argv[1] : "";
	int lat = !strcmp(what, "lat"), bw = !strcmp(what, "bw"),
	    mr = !strcmp(what, "mr");
	mb_args_t a = {.min = lat ? 0 : 1, .max = mr ? 1 : 4 << 20,
		       .iters = lat ? 10000 : mr ? 2000 : 100,
		       .warmup = lat ? 1000 : mr ? 200 : 10, .window = 64,
		       .label = "mpi"};
	int opt, huge = 0;
	optind = multiple ? 3 : 2;
	while (argc > 1 && (opt = getopt(argc, argv, "Hm:i:x:w:t:")) != -1) {
		switch (opt) {
		case 'H': huge = 1; break;
		case 'm': {
			char *colon = strchr(optarg, ':');
			if (colon) {
				*colon = '\0';
				a.min = mb_size(optarg);
				a.max = mb_size(colon + 1);
			} else {
				a.min = a.max = mb_size(optarg);
			}
			break;
		}
		case 'i': a.iters = atol(optarg); break;
		case 'x': a.warmup = atol(optarg); break;
		case 'w': a.window = atoi(optarg); break;
		case 't': a.label = optarg; break;
		default: lat = bw = mr = 0;
		}
	}
	if (np != 2 || !(lat || bw || mr) || a.max < a.min || a.iters < 1 ||
	    a.window < 1 || a.warmup < 0 || a.max > (size_t)1 << 30) {
		if (me == 0)
			fprintf(stderr,
				"usage: mpirun -n 2 %s lat|bw|mr [-T] [-H] [-m MIN:MAX] "
				"[-i ITERS] [-x WARMUP] [-w WINDOW] "
				"[-t LABEL]\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	char *sbuf = buffer(a.max, huge), *rbuf = buffer(a.max, huge);
	/* Statuses kept (not MPI_STATUSES_IGNORE): gcc's bounds check
	 * misreads MPICH's sentinel pointer. */
	MPI_Request *h = malloc(sizeof(*h) * (size_t)a.window);
	MPI_Status *st = malloc(sizeof(*st) * (size_t)a.window);
	double *rtt = malloc(sizeof(*rtt) * (size_t)a.iters);
	if (!sbuf || !rbuf || !h || !st || !rtt)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 'a', a.max ? a.max : 1);
	memset(rbuf, 0, a.max ? a.max : 1);
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		if (lat) {
			long iters = mb_iters_for(size, a.iters);
			double us = mb_lat(me, size, iters,
					   mb_iters_for(size, a.warmup), sbuf,
					   rbuf, rtt);
			if (me == 0) {
				printf("latency,%s,%zu,%.3f,us\n", a.label,
				       size, us);
				bench_round_trip_rows(a.label, size, rtt, iters,
						      1e9);
			}
		} else {
			long iters = a.iters, warm = a.warmup;
			if (bw && size > 8192) {
				iters = (a.iters + 4) / 5;
				warm = (a.warmup + 4) / 5;
			}
			double s = mb_window(me, size, a.window, iters, warm,
					     sbuf, rbuf, h, st);
			if (me == 0 && bw)
				printf("bw,%s,%zu,%.2f,MB/s\n", a.label, size,
				       (double)size * a.window * iters / s /
					       1e6);
			else if (me == 0)
				printf("rate,%s,%zu,%.0f,msg/s\n", a.label,
				       size, (double)a.window * iters / s);
		}
		fflush(stdout);
		if (size >= a.max)
			break;
	}
	free(rtt);
	free(st);
	free(h);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
