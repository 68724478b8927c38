/*
 * mpi_test.c -- an MPI program checking pcor's MPI shim.  Run under
 * pcorrun -n N with one case name:
 *
 *   p2p     ordering, wildcards, truncation, PROC_NULL, nonblocking
 *   comm    dup, split, compare, isolation of communicators
 *   coll    every collective, every predefined op on every type class
 *   errors  bad arguments give the standard's class with ERRORS_RETURN
 *   fatal   a bad rank under the default handler ends the job (rank 1)
 *
 * Any failed check prints the rank and line and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#include "mpi_check.h"


static void test_p2p(void)
{
	int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
	MPI_Status st;
	int cnt;

	/* A ring of 20 messages each way, in order, with distinct tags. */
	enum { N = 20 };
	MPI_Request rq[N];
	int out[N], in[N];
	for (int i = 0; i < N; i++) {
		out[i] = rank * 1000 + i;
		OK(MPI_Isend(&out[i], 1, MPI_INT, next, i % 3, MPI_COMM_WORLD,
			     &rq[i]));
	}
	for (int i = 0; i < N; i++) {
		OK(MPI_Recv(&in[i], 1, MPI_INT, prev, MPI_ANY_TAG,
			    MPI_COMM_WORLD, &st));
		CHECK(in[i] == prev * 1000 + i);
		CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == i % 3);
		OK(MPI_Get_count(&st, MPI_INT, &cnt));
		CHECK(cnt == 1);
	}
	OK(MPI_Waitall(N, rq, MPI_STATUSES_IGNORE));
	for (int i = 0; i < N; i++)
		CHECK(rq[i] == MPI_REQUEST_NULL);

	/* Tag selection skips earlier messages of another tag. */
	if (size >= 2 && rank == 0) {
		int a = 1, b = 2;
		OK(MPI_Send(&a, 1, MPI_INT, 1, 10, MPI_COMM_WORLD));
		OK(MPI_Send(&b, 1, MPI_INT, 1, 11, MPI_COMM_WORLD));
	} else if (size >= 2 && rank == 1) {
		int x;
		OK(MPI_Recv(&x, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, &st));
		CHECK(x == 2 && st.MPI_TAG == 11);
		OK(MPI_Recv(&x, 1, MPI_INT, 0, 10, MPI_COMM_WORLD, &st));
		CHECK(x == 1 && st.MPI_TAG == 10);
	}

	/* ANY_SOURCE: rank 0 hears once from everybody else. */
	if (rank == 0) {
		int seen = 0;
		for (int i = 1; i < size; i++) {
			int v;
			OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7,
				    MPI_COMM_WORLD, &st));
			CHECK(v == st.MPI_SOURCE * 3);
			CHECK(!(seen & 1 << v / 3));
			seen |= 1 << v / 3;
		}
		CHECK(seen == ((1 << size) - 2));
	} else {
		int v = rank * 3;
		OK(MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
	}

	/* Truncation: what fits arrives, the status says the rest. */
	if (size >= 2 && rank == 0) {
		char big[100];
		for (int i = 0; i < 100; i++)
			big[i] = (char)i;
		OK(MPI_Send(big, 100, MPI_CHAR, 1, 3, MPI_COMM_WORLD));
	} else if (size >= 2 && rank == 1) {
		char small[40] = {0};
		OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
		int rc = MPI_Recv(small, 40, MPI_CHAR, 0, 3, MPI_COMM_WORLD,
				  &st);
		int cls;
		OK(MPI_Error_class(rc, &cls));
		CHECK(cls == MPI_ERR_TRUNCATE);
		for (int i = 0; i < 40; i++)
			CHECK(small[i] == (char)i);
		OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD,
					   MPI_ERRORS_ARE_FATAL));
	}

	/* PROC_NULL completes at once with the standard's status. */
	int z = 5;
	OK(MPI_Send(&z, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
	OK(MPI_Recv(&z, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
	CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
	OK(MPI_Get_count(&st, MPI_INT, &cnt));
	CHECK(cnt == 0 && z == 5);

	/* Sendrecv around the ring, a 1 MiB message (rendezvous sized). */
	size_t n = 1 << 18;
	int *sb = malloc(n * sizeof(int)), *rb = malloc(n * sizeof(int));
	CHECK(sb && rb);
	for (size_t i = 0; i < n; i++)
		sb[i] = (int)(rank * 7 + i);
	OK(MPI_Sendrecv(sb, (int)n, MPI_INT, next, 4, rb, (int)n, MPI_INT,
			prev, 4, MPI_COMM_WORLD, &st));
	for (size_t i = 0; i < n; i++)
		CHECK(rb[i] == (int)(prev * 7 + i));
	free(sb);
	free(rb);

	/* Test polls to completion; Waitany picks a finished request. */
	MPI_Request r2[2];
	int v2[2], o2 = rank;
	OK(MPI_Irecv(&v2[0], 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &r2[0]));
	OK(MPI_Isend(&o2, 1, MPI_INT, next, 5, MPI_COMM_WORLD, &r2[1]));
	int idx, flag = 0;
	OK(MPI_Waitany(2, r2, &idx, &st));
	CHECK(idx == 0 || idx == 1);
	for (int spins = 0; !flag && spins < 100000000; spins++)
		OK(MPI_Test(&r2[1 - idx], &flag, MPI_STATUS_IGNORE));
	CHECK(flag && v2[0] == prev);
}

/* Probe, Iprobe, Bsend. */
static void test_probe(void)
{
	MPI_Status st;
	int flag, cnt;
	if (size >= 2 && rank == 0) {
		double d[6] = {1, 2, 3, 4, 5, 6};
		char *bb;
		int bsz = 1 << 16;
		OK(MPI_Alloc_mem(bsz, MPI_INFO_NULL, &bb));
		OK(MPI_Buffer_attach(bb, bsz));
		OK(MPI_Bsend(d, 6, MPI_DOUBLE, 1, 21, MPI_COMM_WORLD));
		void *back;
		int bsz2;
		OK(MPI_Buffer_detach(&back, &bsz2));
		CHECK(back == bb && bsz2 == bsz);
		OK(MPI_Free_mem(bb));
	} else if (size >= 2 && rank == 1) {
		/* Nothing with tag 22 is ever sent: Iprobe says so. */
		OK(MPI_Iprobe(0, 22, MPI_COMM_WORLD, &flag, &st));
		CHECK(!flag);
		OK(MPI_Probe(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &st));
		CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 21);
		OK(MPI_Get_count(&st, MPI_DOUBLE, &cnt));
		CHECK(cnt == 6);
		/* Probing leaves the message for the receive. */
		OK(MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
		CHECK(flag && st.MPI_TAG == 21);
		double d[6];
		OK(MPI_Recv(d, 6, MPI_DOUBLE, 0, 21, MPI_COMM_WORLD, &st));
		CHECK(d[0] == 1 && d[5] == 6);
		OK(MPI_Iprobe(0, 21, MPI_COMM_WORLD, &flag, &st));
		CHECK(!flag);
	}
	OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_comm(void)
{
	MPI_Comm dup, half;
	int r, s, res;
	OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	OK(MPI_Comm_rank(dup, &r));
	OK(MPI_Comm_size(dup, &s));
	CHECK(r == rank && s == size);
	OK(MPI_Comm_compare(dup, MPI_COMM_WORLD, &res));
	CHECK(res == MPI_CONGRUENT);
	OK(MPI_Comm_compare(dup, dup, &res));
	CHECK(res == MPI_IDENT);

	/* Same source and tag on two communicators: each gets its own. */
	if (size >= 2 && rank == 0) {
		int a = 111, b = 222;
		OK(MPI_Send(&a, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
		OK(MPI_Send(&b, 1, MPI_INT, 1, 0, dup));
	} else if (size >= 2 && rank == 1) {
		int x;
		OK(MPI_Recv(&x, 1, MPI_INT, 0, 0, dup, MPI_STATUS_IGNORE));
		CHECK(x == 222);
		OK(MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD,
			    MPI_STATUS_IGNORE));
		CHECK(x == 111);
	}

	/* Split by parity, ordered by descending world rank. */
	OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
	OK(MPI_Comm_rank(half, &r));
	OK(MPI_Comm_size(half, &s));
	int expect_size = (size + 1 - rank % 2) / 2;
	CHECK(s == expect_size);
	int sum;
	OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
	int want = 0;
	for (int i = rank % 2; i < size; i += 2)
		want += i;
	CHECK(sum == want);
	int top;
	OK(MPI_Bcast(&(int){rank}, 1, MPI_INT, 0, half));
	top = rank;
	OK(MPI_Bcast(&top, 1, MPI_INT, 0, half));
	/* Rank 0 of half is the highest world rank of this parity. */
	int hi = rank % 2;
	while (hi + 2 < size)
		hi += 2;
	CHECK(top == hi);
	CHECK(r == (hi - rank) / 2);

	MPI_Comm none;
	OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0,
			  &none));
	CHECK((rank == 0) == (none == MPI_COMM_NULL));
	if (none != MPI_COMM_NULL)
		OK(MPI_Comm_free(&none));
	OK(MPI_Comm_free(&half));
	OK(MPI_Comm_free(&dup));
	CHECK(dup == MPI_COMM_NULL);

	OK(MPI_Comm_size(MPI_COMM_SELF, &s));
	CHECK(s == 1);

	/* pcorrun puts every process on this host: one shared group. */
	MPI_Comm node;
	OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
			       &node));
	OK(MPI_Comm_size(node, &s));
	OK(MPI_Comm_rank(node, &r));
	CHECK(s == size && r == rank);
	OK(MPI_Comm_free(&node));

	int *ub, flag;
	OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
	CHECK(flag && *ub >= 32767);
	int *uni, *io;
	OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &uni, &flag));
	CHECK(flag && *uni == size);
	OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &io, &flag));
	CHECK(flag && *io == MPI_ANY_SOURCE);
	OK(MPI_Comm_get_attr(MPI_COMM_WORLD, 12345, &io, &flag));
	CHECK(!flag);
	/* The largest tag works. */
	int v = rank, w = -1;
	OK(MPI_Sendrecv(&v, 1, MPI_INT, rank, *ub, &w, 1, MPI_INT, rank, *ub,
			MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	CHECK(w == rank);
}

/* Reference result of op over v(0..size-1), v(r) = r + 1 + k. */
static long ref(MPI_Op op, int k)
{
	long acc = 1 + k;
	for (int r = 1; r < size; r++) {
		long v = r + 1 + k;
		if (op == MPI_SUM) acc += v;
		else if (op == MPI_PROD) acc *= v;
		else if (op == MPI_MAX) acc = v > acc ? v : acc;
		else if (op == MPI_MIN) acc = v < acc ? v : acc;
		else if (op == MPI_BAND) acc &= v;
		else if (op == MPI_BOR) acc |= v;
		else if (op == MPI_BXOR) acc ^= v;
	}
	return acc;
}

static void test_coll(void)
{
	OK(MPI_Barrier(MPI_COMM_WORLD));
	enum { K = 4 };
	const MPI_Op arith[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN,
				MPI_BAND, MPI_BOR, MPI_BXOR};
	for (unsigned o = 0; o < sizeof(arith) / sizeof(arith[0]); o++) {
		int iv[K], ir[K];
		long lv[K], lr[K];
		unsigned char cv[K], cr[K];
		for (int k = 0; k < K; k++) {
			iv[k] = rank + 1 + k;
			lv[k] = rank + 1 + k;
			cv[k] = (unsigned char)(rank + 1 + k);
		}
		for (int root = 0; root < size; root += size > 2 ? 2 : 1) {
			memset(ir, 0, sizeof(ir));
			OK(MPI_Reduce(iv, ir, K, MPI_INT, arith[o], root,
				      MPI_COMM_WORLD));
			if (rank == root)
				for (int k = 0; k < K; k++)
					CHECK(ir[k] == (int)ref(arith[o], k));
		}
		OK(MPI_Allreduce(lv, lr, K, MPI_LONG, arith[o],
				 MPI_COMM_WORLD));
		for (int k = 0; k < K; k++)
			CHECK(lr[k] == ref(arith[o], k));
		OK(MPI_Allreduce(cv, cr, K, MPI_UNSIGNED_CHAR, arith[o],
				 MPI_COMM_WORLD));
		for (int k = 0; k < K; k++)
			CHECK(cr[k] == (unsigned char)ref(arith[o], k));
		if (o < 4) { /* the arithmetic ones on floating types */
			double dv[K], dr[K];
			for (int k = 0; k < K; k++)
				dv[k] = rank + 1 + k;
			OK(MPI_Allreduce(dv, dr, K, MPI_DOUBLE, arith[o],
					 MPI_COMM_WORLD));
			for (int k = 0; k < K; k++)
				CHECK(dr[k] == (double)ref(arith[o], k));
		}
	}
	/* Logical ops: rank 0 contributes 0, everybody else 1. */
	int l = rank != 0, land, lor, lxor;
	OK(MPI_Allreduce(&l, &land, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
	OK(MPI_Allreduce(&l, &lor, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD));
	OK(MPI_Allreduce(&l, &lxor, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD));
	CHECK(land == 0 && lor == (size > 1) && lxor == (size - 1) % 2);
	/* MAXLOC/MINLOC with a tie broken by the lower index. */
	struct { double v; int i; } dl = {rank % 2 ? 9.0 : rank, rank}, dlr;
	OK(MPI_Allreduce(&dl, &dlr, 1, MPI_DOUBLE_INT, MPI_MAXLOC,
			 MPI_COMM_WORLD));
	CHECK(size == 1 ? dlr.i == 0 : dlr.v == 9.0 && dlr.i == 1);
	OK(MPI_Allreduce(&dl, &dlr, 1, MPI_DOUBLE_INT, MPI_MINLOC,
			 MPI_COMM_WORLD));
	CHECK(dlr.v == 0.0 && dlr.i == 0);
	/* IN_PLACE allreduce. */
	int ip = rank;
	OK(MPI_Allreduce(MPI_IN_PLACE, &ip, 1, MPI_INT, MPI_SUM,
			 MPI_COMM_WORLD));
	CHECK(ip == size * (size - 1) / 2);

	/* Bcast from every root. */
	for (int root = 0; root < size; root++) {
		int b[3] = {rank, rank, rank};
		if (rank == root)
			b[0] = b[1] = b[2] = 100 + root;
		OK(MPI_Bcast(b, 3, MPI_INT, root, MPI_COMM_WORLD));
		CHECK(b[0] == 100 + root && b[2] == 100 + root);
	}

	/* Gather, scatter, allgather, alltoall. */
	int *all = malloc(2 * size * sizeof(int));
	int *out = malloc(2 * size * sizeof(int));
	CHECK(all && out);
	int mine[2] = {rank, -rank};
	int root = size - 1;
	OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root,
		      MPI_COMM_WORLD));
	if (rank == root)
		for (int r = 0; r < size; r++)
			CHECK(all[2 * r] == r && all[2 * r + 1] == -r);
	for (int r = 0; r < size; r++)
		out[2 * r] = out[2 * r + 1] = r * 10;
	OK(MPI_Scatter(out, 2, MPI_INT, mine, 2, MPI_INT, 0, MPI_COMM_WORLD));
	CHECK(mine[0] == rank * 10 && mine[1] == rank * 10);
	mine[0] = rank;
	mine[1] = rank * rank;
	OK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
	for (int r = 0; r < size; r++)
		CHECK(all[2 * r] == r && all[2 * r + 1] == r * r);
	for (int r = 0; r < size; r++) {
		out[2 * r] = rank * 100 + r;
		out[2 * r + 1] = -(rank * 100 + r);
	}
	OK(MPI_Alltoall(out, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
	for (int r = 0; r < size; r++)
		CHECK(all[2 * r] == r * 100 + rank &&
		      all[2 * r + 1] == -(r * 100 + rank));
	free(all);
	free(out);
	OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* A non-commutative user op: 2x2 matrix product, rank order matters. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t)
{
	(void)t;
	int *a = in, *b = inout;
	for (int k = 0; k < *len / 4; k++, a += 4, b += 4) {
		int r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
			    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
		memcpy(b, r, sizeof(r));
	}
}

static void test_coll_v(void)
{
	/* Rank r contributes r + 1 ints of value r. */
	int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
	int total = 0;
	for (int r = 0; r < size; r++) {
		cnt[r] = r + 1;
		dsp[r] = total;
		total += r + 1;
	}
	int *mine = malloc((rank + 1) * sizeof(int));
	int *all = malloc(total * sizeof(int));
	CHECK(cnt && dsp && mine && all);
	for (int i = 0; i <= rank; i++)
		mine[i] = rank;
	memset(all, 0xff, total * sizeof(int));
	OK(MPI_Gatherv(mine, rank + 1, MPI_INT, all, cnt, dsp, MPI_INT, 0,
		       MPI_COMM_WORLD));
	if (rank == 0)
		for (int r = 0; r < size; r++)
			for (int i = 0; i <= r; i++)
				CHECK(all[dsp[r] + i] == r);
	memset(all, 0xff, total * sizeof(int));
	OK(MPI_Allgatherv(mine, rank + 1, MPI_INT, all, cnt, dsp, MPI_INT,
			  MPI_COMM_WORLD));
	for (int r = 0; r < size; r++)
		for (int i = 0; i <= r; i++)
			CHECK(all[dsp[r] + i] == r);
	for (int i = 0; i < total; i++)
		all[i] = i;
	OK(MPI_Scatterv(all, cnt, dsp, MPI_INT, mine, rank + 1, MPI_INT, 0,
			MPI_COMM_WORLD));
	for (int i = 0; i <= rank; i++)
		CHECK(mine[i] == dsp[rank] + i);

	/* Alltoallv: to rank d, rank s sends d + 1 ints of s * 100 + d. */
	int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
	int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
	int *sb = malloc(total * sizeof(int)), *rb = malloc(size * (rank + 1) *
							    sizeof(int));
	CHECK(sc && sd && rc && rd && sb && rb);
	for (int d = 0; d < size; d++) {
		sc[d] = d + 1;
		sd[d] = dsp[d];
		for (int i = 0; i <= d; i++)
			sb[dsp[d] + i] = rank * 100 + d;
		rc[d] = rank + 1;
		rd[d] = d * (rank + 1);
	}
	OK(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT,
			 MPI_COMM_WORLD));
	for (int s2 = 0; s2 < size; s2++)
		for (int i = 0; i <= rank; i++)
			CHECK(rb[rd[s2] + i] == s2 * 100 + rank);

	/* Reduce_scatter(_block), Scan, Exscan with SUM. */
	int *v = malloc(total * sizeof(int));
	CHECK(v);
	for (int i = 0; i < total; i++)
		v[i] = i + rank;
	int out[64];
	CHECK(rank + 1 <= 64);
	OK(MPI_Reduce_scatter(v, out, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	for (int i = 0; i <= rank; i++)
		CHECK(out[i] == size * (dsp[rank] + i) + size * (size - 1) / 2);
	OK(MPI_Reduce_scatter_block(v, out, 1, MPI_INT, MPI_MAX,
				    MPI_COMM_WORLD));
	CHECK(out[0] == rank + size - 1);
	int x = rank + 1, sc1, ex = -1;
	OK(MPI_Scan(&x, &sc1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(sc1 == (rank + 1) * (rank + 2) / 2);
	OK(MPI_Exscan(&x, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(rank == 0 ? ex == -1 : ex == rank * (rank + 1) / 2);

	/* User op, not commutative: M0 * M1 * ... with Mr = [[1,r+1],[1,0]]. */
	MPI_Op mm;
	OK(MPI_Op_create(matmul, 0, &mm));
	int m[4] = {1, rank + 1, 1, 0}, res[4], want[4] = {1, 1, 1, 0};
	OK(MPI_Allreduce(m, res, 4, MPI_INT, mm, MPI_COMM_WORLD));
	for (int r = 1; r < size; r++) {
		int mr[4] = {1, r + 1, 1, 0}, len = 4;
		int lhs[4];
		memcpy(lhs, want, sizeof(lhs));
		memcpy(want, mr, sizeof(want));
		matmul(lhs, want, &len, NULL);
	}
	CHECK(!memcmp(res, want, sizeof(want)));
	OK(MPI_Op_free(&mm));
	CHECK(mm == MPI_OP_NULL);
	free(v);
	free(sc); free(sd); free(rc); free(rd); free(sb); free(rb);
	free(cnt); free(dsp); free(mine); free(all);
}

static void test_errors(void)
{
	int x = 0, cls;
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	MPI_Errhandler eh;
	OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
	CHECK(eh == MPI_ERRORS_RETURN);
#define CLASS(call, want)                                                 \
	do {                                                              \
		int rc_ = (call);                                         \
		OK(MPI_Error_class(rc_, &cls));                           \
		CHECK(cls == (want));                                     \
	} while (0)
	/* A NULL buffer with data of a predefined type. */
	CLASS(MPI_Send(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
	CLASS(MPI_Recv(NULL, 4, MPI_INT, 0, 0, MPI_COMM_WORLD,
		       MPI_STATUS_IGNORE), MPI_ERR_BUFFER);
	CLASS(MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
	CLASS(MPI_Send(&x, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
	CLASS(MPI_Send(&x, 1, MPI_INT, 0, -3, MPI_COMM_WORLD), MPI_ERR_TAG);
	CLASS(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
	CLASS(MPI_Send(&x, 1, (MPI_Datatype)12345, 0, 0, MPI_COMM_WORLD),
	      MPI_ERR_TYPE);
	CLASS(MPI_Recv(&x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD,
		       MPI_STATUS_IGNORE), MPI_ERR_TAG);
	CLASS(MPI_Send(&x, 1, MPI_INT, 0, 0, (MPI_Comm)777), MPI_ERR_COMM);
	CLASS(MPI_Allreduce(&x, &cls, 1, MPI_INT, (MPI_Op)99,
			    MPI_COMM_WORLD), MPI_ERR_OP);
	CLASS(MPI_Bcast(&x, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
	MPI_Request bad = (MPI_Request)0x2c00ffff;
	CLASS(MPI_Wait(&bad, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
	CLASS(MPI_Send(&x, 1, MPI_INT, 0, (1 << 30), MPI_COMM_WORLD),
	      MPI_ERR_TAG);
	CLASS(MPI_Bsend(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
	      MPI_ERR_BUFFER); /* no buffer attached */
	char msg[MPI_MAX_ERROR_STRING];
	int len;
	OK(MPI_Error_string(MPI_ERR_RANK, msg, &len));
	CHECK(len > 0 && strstr(msg, "rank"));
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	/* The world still works after the failed calls. */
	OK(MPI_Allreduce(&rank, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(x == size * (size - 1) / 2);
}

int main(int argc, char **argv)
{
	int provided;
	OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
	CHECK(provided == MPI_THREAD_FUNNELED);
	OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
	OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
	const char *c = argc > 1 ? argv[1] : "all";
	if (!strcmp(c, "fatal")) {
		int x = 0;
		if (rank == 1 % size)
			MPI_Send(&x, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
		/* The others wait for a message that never comes. */
		MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		return 3; /* not reached: the job was ended */
	}
	if (!strcmp(c, "p2p") || !strcmp(c, "all"))
		test_p2p();
	if (!strcmp(c, "p2p") || !strcmp(c, "all"))
		test_probe();
	if (!strcmp(c, "comm") || !strcmp(c, "all"))
		test_comm();
	if (!strcmp(c, "coll") || !strcmp(c, "all"))
		test_coll();
	if (!strcmp(c, "coll") || !strcmp(c, "all"))
		test_coll_v();
	if (!strcmp(c, "errors") || !strcmp(c, "all"))
		test_errors();
	double t = MPI_Wtime();
	CHECK(t > 0 && MPI_Wtick() > 0);
	OK(MPI_Finalize());
	int fin;
	OK(MPI_Finalized(&fin));
	CHECK(fin);
	if (rank == 0)
		printf("mpi_test %s: %d ranks ok\n", c, size);
	return 0;
}
