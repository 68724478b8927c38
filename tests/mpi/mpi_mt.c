/*
 * mpi_mt.c -- MPI_THREAD_MULTIPLE on pcor's MPI shim.  Run under
 * pcorrun -n N.  Each rank starts NT plain pthreads (the shim makes them
 * pcor threads on their first call) that at the same time:
 *
 *   - ping around the ring on a communicator of their own (a dup each),
 *     checking every value and its order;
 *   - exchange on MPI_COMM_WORLD told apart by tag only, so receives of
 *     different threads share one queue;
 *   - run allreduces on their own communicators;
 *   - one thread receives with MPI_ANY_TAG what another thread of the
 *     previous rank sent, in order, on a communicator the two share.
 *
 * Any failed check prints the rank and line and exits 1.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NT    3
#define ITERS 200

static int rank, size, next, prev;

#include "mpi_check.h"
static MPI_Comm comms[NT], pipe_comm;

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg, flag;
	OK(MPI_Is_thread_main(&flag));
	CHECK(!flag);
	MPI_Comm c = comms[t];
	/* Own communicator: the ring, value and order checked. */
	for (int i = 0; i < ITERS; i++) {
		int out[2] = {rank, t * ITERS + i}, in[2] = {-1, -1};
		MPI_Request q;
		OK(MPI_Irecv(in, 2, MPI_INT, prev, 0, c, &q));
		OK(MPI_Send(out, 2, MPI_INT, next, 0, c));
		OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
		CHECK(in[0] == prev && in[1] == t * ITERS + i);
	}
	/* The world, threads told apart by tag. */
	for (int i = 0; i < ITERS; i++) {
		int out = rank * 100000 + t * 1000 + i, in = -1;
		MPI_Status st;
		MPI_Request q;
		OK(MPI_Irecv(&in, 1, MPI_INT, prev, 10 + t, MPI_COMM_WORLD,
			     &q));
		OK(MPI_Send(&out, 1, MPI_INT, next, 10 + t, MPI_COMM_WORLD));
		OK(MPI_Wait(&q, &st));
		CHECK(in == prev * 100000 + t * 1000 + i);
		CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 10 + t);
	}
	/* Collectives on the thread's own communicator. */
	for (int i = 0; i < ITERS / 4; i++) {
		int v = rank + i + t, sum = -1;
		OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c));
		CHECK(sum == size * (size - 1) / 2 + size * (i + t));
	}
	/* Thread 0 sends, thread 1 of the next rank takes them, in order. */
	if (t == 0) {
		for (int i = 0; i < ITERS; i++)
			OK(MPI_Send(&i, 1, MPI_INT, next, 100 + i % 7,
				    pipe_comm));
	} else if (t == 1) {
		for (int i = 0; i < ITERS; i++) {
			int v = -1;
			MPI_Status st;
			OK(MPI_Recv(&v, 1, MPI_INT, prev, MPI_ANY_TAG,
				    pipe_comm, &st));
			CHECK(v == i && st.MPI_TAG == 100 + i % 7);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int prov;
	OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov));
	CHECK(prov == MPI_THREAD_MULTIPLE);
	OK(MPI_Query_thread(&prov));
	CHECK(prov == MPI_THREAD_MULTIPLE);
	OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
	OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
	next = (rank + 1) % size;
	prev = (rank - 1 + size) % size;
	for (int t = 0; t < NT; t++)
		OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
	OK(MPI_Comm_dup(MPI_COMM_WORLD, &pipe_comm));
	pthread_t th[NT];
	for (int t = 0; t < NT; t++)
		CHECK(pthread_create(&th[t], NULL, worker,
				     (void *)(intptr_t)t) == 0);
	for (int t = 0; t < NT; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	for (int t = 0; t < NT; t++)
		OK(MPI_Comm_free(&comms[t]));
	OK(MPI_Comm_free(&pipe_comm));
	OK(MPI_Finalize());
	if (rank == 0)
		printf("mpi_mt: %d ranks x %d threads ok\n", size, NT);
	return 0;
}
