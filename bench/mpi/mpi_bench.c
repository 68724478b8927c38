/*
 * mpi_bench.c -- OSU-style MPI micro-benchmarks, written against plain
 * MPI so the same source runs on pcor's shim, Open MPI and MPICH.
 *
 *   mpi_bench TEST [--max-size BYTES] [--iters N] [--warmup N]
 *             [--threads T]
 *
 * TEST: latency (ping-pong, half round trip), latency_mt (the same by
 * --threads pairs of threads at once, MPI_THREAD_MULTIPLE; the mean of
 * the threads' latencies), bw (window of 64 Isends,
 * one ack), bibw (both ways at once), bcast, reduce, allreduce,
 * allgather, alltoall, barrier (average time over all ranks' maxima is
 * reported as rank 0's average per call).  Sizes run from 1 (0 for
 * barrier) up to --max-size, doubling.  Rank 0 prints CSV:
 *   test,size,value,unit
 * Method as in the OSU benchmarks: warm-up iterations untimed, then
 * timed iterations; large sizes use a tenth of the iterations.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

static int rank, size;

static int iters_for(size_t sz, int iters)
{
	return sz > 8192 ? (iters / 10 > 2 ? iters / 10 : 2) : iters;
}

static double pt2pt(const char *t, char *sb, char *rb, size_t sz, int n,
		    int warm)
{
	MPI_Request rq[2 * WINDOW];
	double t0 = 0;
	int peer = 1 - rank;
	if (rank > 1)
		return 0;
	for (int i = 0; i < n + warm; i++) {
		if (i == warm)
			t0 = MPI_Wtime();
		if (!strcmp(t, "latency")) {
			if (rank == 0) {
				MPI_Send(sb, (int)sz, MPI_CHAR, peer, 1,
					 MPI_COMM_WORLD);
				MPI_Recv(rb, (int)sz, MPI_CHAR, peer, 1,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(rb, (int)sz, MPI_CHAR, peer, 1,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(sb, (int)sz, MPI_CHAR, peer, 1,
					 MPI_COMM_WORLD);
			}
			continue;
		}
		int bi = !strcmp(t, "bibw"), k = 0;
		if (rank == 0 || bi)
			for (int w = 0; w < WINDOW; w++)
				MPI_Isend(sb + w * sz, (int)sz, MPI_CHAR, peer,
					  2, MPI_COMM_WORLD, &rq[k++]);
		if (rank == 1 || bi)
			for (int w = 0; w < WINDOW; w++)
				MPI_Irecv(rb + w * sz, (int)sz, MPI_CHAR, peer,
					  2, MPI_COMM_WORLD, &rq[k++]);
		MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
		char ack = 0;
		if (rank == 0)
			MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		else
			MPI_Send(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
	}
	double el = MPI_Wtime() - t0;
	if (!strcmp(t, "latency"))
		return el * 1e6 / (2.0 * n);
	double bytes = (double)sz * WINDOW * n * (!strcmp(t, "bibw") ? 2 : 1);
	return bytes / el / 1e6;
}

/* latency_mt: one ping-pong per thread pair, told apart by tag. */
typedef struct mt_arg {
	char *sb, *rb;
	size_t sz;
	int n, warm, tag;
	double us;
} mt_arg_t;

static void *mt_pingpong(void *p)
{
	mt_arg_t *a = p;
	int peer = 1 - rank;
	double t0 = 0;
	for (int i = 0; i < a->n + a->warm; i++) {
		if (i == a->warm)
			t0 = MPI_Wtime();
		if (rank == 0) {
			MPI_Send(a->sb, (int)a->sz, MPI_CHAR, peer, a->tag,
				 MPI_COMM_WORLD);
			MPI_Recv(a->rb, (int)a->sz, MPI_CHAR, peer, a->tag,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(a->rb, (int)a->sz, MPI_CHAR, peer, a->tag,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(a->sb, (int)a->sz, MPI_CHAR, peer, a->tag,
				 MPI_COMM_WORLD);
		}
	}
	a->us = (MPI_Wtime() - t0) * 1e6 / (2.0 * a->n);
	return NULL;
}

static double latency_mt(char *sb, char *rb, size_t sz, int n, int warm,
			 int nthreads)
{
	if (rank > 1)
		return 0;
	pthread_t th[WINDOW];
	mt_arg_t a[WINDOW];
	for (int k = 0; k < nthreads; k++) {
		a[k] = (mt_arg_t){sb + (size_t)k * sz, rb + (size_t)k * sz, sz,
				  n, warm, 10 + k, 0};
		if (pthread_create(&th[k], NULL, mt_pingpong, &a[k]))
			MPI_Abort(MPI_COMM_WORLD, 1);
	}
	double sum = 0;
	for (int k = 0; k < nthreads; k++) {
		pthread_join(th[k], NULL);
		sum += a[k].us;
	}
	return sum / nthreads;
}

static double coll(const char *t, char *sb, char *rb, size_t sz, int n,
		   int warm)
{
	double t0 = 0, sum = 0;
	int cnt = (int)(sz / sizeof(float));
	for (int i = 0; i < n + warm; i++) {
		if (i == warm) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		if (!strcmp(t, "bcast"))
			MPI_Bcast(sb, (int)sz, MPI_CHAR, 0, MPI_COMM_WORLD);
		else if (!strcmp(t, "reduce"))
			MPI_Reduce(sb, rb, cnt, MPI_FLOAT, MPI_SUM, 0,
				   MPI_COMM_WORLD);
		else if (!strcmp(t, "allreduce"))
			MPI_Allreduce(sb, rb, cnt, MPI_FLOAT, MPI_SUM,
				      MPI_COMM_WORLD);
		else if (!strcmp(t, "allgather"))
			MPI_Allgather(sb, (int)sz, MPI_CHAR, rb, (int)sz,
				      MPI_CHAR, MPI_COMM_WORLD);
		else if (!strcmp(t, "alltoall"))
			MPI_Alltoall(sb, (int)sz, MPI_CHAR, rb, (int)sz,
				     MPI_CHAR, MPI_COMM_WORLD);
		else
			MPI_Barrier(MPI_COMM_WORLD);
	}
	double us = (MPI_Wtime() - t0) * 1e6 / n;
	/* OSU reports the average over ranks of each rank's time. */
	MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	return sum / size;
}

int main(int argc, char **argv)
{
	int mt = argc > 1 && !strcmp(argv[1], "latency_mt"), prov;
	if (mt) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
		if (prov < MPI_THREAD_MULTIPLE)
			MPI_Abort(MPI_COMM_WORLD, 3);
	} else {
		MPI_Init(&argc, &argv);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_bench TEST [--max-size B]"
					" [--iters N] [--warmup N]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *t = argv[1];
	size_t max = 1 << 20;
	int iters = 1000, warm = 100, nthreads = 2;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--max-size"))
			max = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--iters"))
			iters = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--warmup"))
			warm = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = atoi(argv[i + 1]);
	}
	int p2p = !strcmp(t, "latency") || !strcmp(t, "bw") ||
		  !strcmp(t, "bibw") || mt;
	if (nthreads < 1 || nthreads > WINDOW)
		nthreads = 2;
	if (p2p && size < 2) {
		if (rank == 0)
			fprintf(stderr, "%s needs 2 ranks\n", t);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	size_t room = max * (p2p ? WINDOW : (size_t)size) + 64;
	char *sb = malloc(room), *rb = malloc(room);
	if (!sb || !rb)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sb, 1, room);
	memset(rb, 0, room);
	if (rank == 0)
		printf("test,size,value,unit\n");
	size_t first = !strcmp(t, "barrier") ? 0 : !strcmp(t, "reduce") ||
			!strcmp(t, "allreduce") ? 4 : 1;
	for (size_t sz = first; sz <= max; sz = sz ? sz * 2 : max + 1) {
		int n = iters_for(sz, iters), w = iters_for(sz, warm);
		if (mt)
			MPI_Barrier(MPI_COMM_WORLD);
		double v = mt    ? latency_mt(sb, rb, sz, n, w, nthreads)
			   : p2p ? pt2pt(t, sb, rb, sz, n, w)
				 : coll(t, sb, rb, sz, n, w);
		if (rank == 0)
			printf("%s,%zu,%.3f,%s\n", t, sz, v,
			       p2p && strcmp(t, "latency") && !mt ? "MB/s"
								   : "us");
		if (!strcmp(t, "barrier"))
			break;
	}
	free(sb);
	free(rb);
	MPI_Finalize();
	return 0;
}
