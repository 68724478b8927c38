/*
 * mpi_more.c -- the rest of the MPI shim's checks.  Run under pcorrun -n N
 * with one case name (or "all"):
 *
 *   dtype   derived datatypes: layouts, sizes, extents, envelopes, in
 *           point to point and in collectives
 *   group   groups, Comm_group, Comm_create, names
 *   modes   Ssend/Issend (not complete before the match), Rsend,
 *           Ibsend, Sendrecv_replace
 *   reqs    Waitsome, Testsome, Testany, Cancel, Request_free
 *   nbc     nonblocking collectives, several outstanding at once
 *   nbcv    the nonblocking v forms and reduce-scatters
 *   env     Info objects, thread queries, version strings
 *   topo    Dims_create, Cartesian grids, distributed graphs
 *   win     windows: create, allocate, dynamic, fence, free
 *   nbr     neighbourhood collectives on grids and graphs, Alltoallw
 *   large   bcast and allreduce (every predefined op class, in place,
 *           nonblocking, a user op) of about 1 MiB and of counts that
 *           are no multiple of the size, plus a few small counts: the
 *           size-dependent algorithms (run with PCOR_MPI_BCAST_LARGE=0
 *           and PCOR_MPI_ALLREDUCE_LARGE=0, the small counts take them)
 *   attr    attribute caching: keyvals, copy callbacks on Comm_dup, delete
 *           callbacks on set, delete and Comm_free, the predefined ones
 *   hosts   (run with "hosts H" on H hosts) the collectives that work by
 *           host, checked from every root, on the world and on a
 *           communicator with uneven hosts
 *
 * Any failed check prints the rank and line and exits 1.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, next, prev;

#include "mpi_check.h"

/* Upper bound of polling loops: far beyond any real wait, never hit. */
#define SPINS 200000000L

static void test_dtype(void)
{
	MPI_Status st;
	int cnt;

	/* A column of a 4 x 5 matrix, around the ring. */
	int m[4][5], col[4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 5; j++)
			m[i][j] = rank * 100 + i * 10 + j;
	MPI_Datatype column;
	OK(MPI_Type_vector(4, 1, 5, MPI_INT, &column));
	OK(MPI_Type_commit(&column));
	OK(MPI_Sendrecv(&m[0][2], 1, column, next, 1, col, 4, MPI_INT, prev, 1,
			MPI_COMM_WORLD, &st));
	for (int i = 0; i < 4; i++)
		CHECK(col[i] == prev * 100 + i * 10 + 2);
	/* ... and received into a column: the rest stays as it was. */
	int back[4][5];
	memset(back, 0xff, sizeof(back));
	OK(MPI_Sendrecv(col, 4, MPI_INT, prev, 2, &back[0][3], 1, column, next,
			2, MPI_COMM_WORLD, &st));
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 5; j++)
			CHECK(back[i][j] ==
			      (j == 3 ? rank * 100 + i * 10 + 2 : -1));
	int sz;
	MPI_Aint lb, ext;
	OK(MPI_Type_size(column, &sz));
	CHECK(sz == 16);
	OK(MPI_Type_get_extent(column, &lb, &ext));
	CHECK(lb == 0 && ext == (3 * 5 + 1) * 4);
	OK(MPI_Type_get_true_extent(column, &lb, &ext));
	CHECK(lb == 0 && ext == 64);
	int ni, na, nt, comb, ints[3];
	MPI_Datatype kid;
	OK(MPI_Type_get_envelope(column, &ni, &na, &nt, &comb));
	CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nt == 1);
	OK(MPI_Type_get_contents(column, 3, 0, 1, ints, NULL, &kid));
	CHECK(ints[0] == 4 && ints[1] == 1 && ints[2] == 5 && kid == MPI_INT);
	OK(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nt, &comb));
	CHECK(comb == MPI_COMBINER_NAMED);

	/* Broadcast of a column from the last rank. */
	int bm[4][5] = {{0}};
	if (rank == size - 1)
		for (int i = 0; i < 4; i++)
			bm[i][1] = 7 + i;
	OK(MPI_Bcast(&bm[0][1], 1, column, size - 1, MPI_COMM_WORLD));
	for (int i = 0; i < 4; i++)
		CHECK(bm[i][1] == 7 + i && bm[i][0] == 0 && bm[i][2] == 0);

	/* Indexed, indexed_block, hvector, contiguous. */
	int src[16], got[8];
	for (int i = 0; i < 16; i++)
		src[i] = rank * 1000 + i;
	int bl[3] = {2, 1, 3}, dp[3] = {0, 4, 7};
	MPI_Datatype idx, blk, hv, tri;
	OK(MPI_Type_indexed(3, bl, dp, MPI_INT, &idx));
	OK(MPI_Type_commit(&idx));
	OK(MPI_Sendrecv(src, 1, idx, next, 3, got, 6, MPI_INT, prev, 3,
			MPI_COMM_WORLD, &st));
	int want_idx[6] = {0, 1, 4, 7, 8, 9};
	for (int i = 0; i < 6; i++)
		CHECK(got[i] == prev * 1000 + want_idx[i]);
	int bd[3] = {1, 5, 9};
	OK(MPI_Type_create_indexed_block(3, 2, bd, MPI_INT, &blk));
	OK(MPI_Type_commit(&blk));
	OK(MPI_Sendrecv(src, 1, blk, next, 4, got, 6, MPI_INT, prev, 4,
			MPI_COMM_WORLD, &st));
	int want_blk[6] = {1, 2, 5, 6, 9, 10};
	for (int i = 0; i < 6; i++)
		CHECK(got[i] == prev * 1000 + want_blk[i]);
	OK(MPI_Type_create_hvector(3, 2, 5 * sizeof(int), MPI_INT, &hv));
	OK(MPI_Type_commit(&hv));
	OK(MPI_Sendrecv(src, 1, hv, next, 5, got, 6, MPI_INT, prev, 5,
			MPI_COMM_WORLD, &st));
	int want_hv[6] = {0, 1, 5, 6, 10, 11};
	for (int i = 0; i < 6; i++)
		CHECK(got[i] == prev * 1000 + want_hv[i]);
	OK(MPI_Type_contiguous(3, MPI_INT, &tri));
	OK(MPI_Type_commit(&tri));
	/* 5 ints into up to 3 triples: count undefined, elements 5. */
	OK(MPI_Sendrecv(src, 5, MPI_INT, next, 6, got, 2, tri, prev, 6,
			MPI_COMM_WORLD, &st));
	OK(MPI_Get_count(&st, tri, &cnt));
	CHECK(cnt == MPI_UNDEFINED);
	OK(MPI_Get_elements(&st, tri, &cnt));
	CHECK(cnt == 5);
	OK(MPI_Get_count(&st, MPI_INT, &cnt));
	CHECK(cnt == 5 && got[4] == prev * 1000 + 4);

	/* A struct, resized to its C size, two of them at once. */
	struct rec {
		int a;
		double b;
		char c[3];
	} out[2], in[2];
	memset(in, 0, sizeof(in));
	for (int i = 0; i < 2; i++) {
		out[i].a = rank + i;
		out[i].b = rank * 0.5 + i;
		memcpy(out[i].c, i ? "xyz" : "abc", 3);
	}
	MPI_Aint base, disp[3];
	OK(MPI_Get_address(&out[0], &base));
	OK(MPI_Get_address(&out[0].a, &disp[0]));
	OK(MPI_Get_address(&out[0].b, &disp[1]));
	OK(MPI_Get_address(&out[0].c, &disp[2]));
	for (int i = 0; i < 3; i++)
		disp[i] -= base;
	int sbl[3] = {1, 1, 3};
	MPI_Datatype sty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, rec0, rec;
	OK(MPI_Type_create_struct(3, sbl, disp, sty, &rec0));
	OK(MPI_Type_create_resized(rec0, 0, sizeof(struct rec), &rec));
	OK(MPI_Type_free(&rec0)); /* rec keeps its own copy */
	CHECK(rec0 == MPI_DATATYPE_NULL);
	OK(MPI_Type_commit(&rec));
	OK(MPI_Type_size(rec, &sz));
	CHECK(sz == 4 + 8 + 3);
	OK(MPI_Type_get_extent(rec, &lb, &ext));
	CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct rec));
	OK(MPI_Sendrecv(out, 2, rec, next, 7, in, 2, rec, prev, 7,
			MPI_COMM_WORLD, &st));
	OK(MPI_Get_count(&st, rec, &cnt));
	CHECK(cnt == 2);
	for (int i = 0; i < 2; i++)
		CHECK(in[i].a == prev + i && in[i].b == prev * 0.5 + i &&
		      !memcmp(in[i].c, i ? "xyz" : "abc", 3));

	/* Gather and all-to-all of derived types. */
	int *all = calloc((size_t)size * 3, sizeof(int));
	int mine[3] = {rank, rank + 1, rank + 2};
	CHECK(all);
	OK(MPI_Allgather(mine, 1, tri, all, 3, MPI_INT, MPI_COMM_WORLD));
	for (int r = 0; r < size; r++)
		CHECK(all[3 * r] == r && all[3 * r + 2] == r + 2);
	int *a2a = malloc((size_t)size * 2 * sizeof(int));
	int *a2b = malloc((size_t)size * 2 * sizeof(int));
	CHECK(a2a && a2b);
	MPI_Datatype pair;
	OK(MPI_Type_contiguous(2, MPI_INT, &pair));
	OK(MPI_Type_commit(&pair));
	for (int r = 0; r < size; r++) {
		a2a[2 * r] = rank * 10 + r;
		a2a[2 * r + 1] = -(rank * 10 + r);
	}
	OK(MPI_Alltoall(a2a, 1, pair, a2b, 2, MPI_INT, MPI_COMM_WORLD));
	for (int r = 0; r < size; r++)
		CHECK(a2b[2 * r] == r * 10 + rank &&
		      a2b[2 * r + 1] == -(r * 10 + rank));
	/* A reduction over a contiguous type of ints works as ints. */
	int sum3[3];
	OK(MPI_Allreduce(mine, sum3, 1, tri, MPI_SUM, MPI_COMM_WORLD));
	CHECK(sum3[0] == size * (size - 1) / 2 &&
	      sum3[2] == size * (size - 1) / 2 + 2 * size);
	free(all);
	free(a2a);
	free(a2b);

	/* An uncommitted type is refused; freed types are gone. */
	MPI_Datatype raw;
	OK(MPI_Type_contiguous(2, MPI_INT, &raw));
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	CHECK(MPI_Send(src, 1, raw, rank, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE);
	CHECK(MPI_Type_free(&(MPI_Datatype){MPI_INT}) == MPI_ERR_TYPE);
	MPI_Datatype gone = column;
	OK(MPI_Type_free(&column));
	CHECK(MPI_Type_size(gone, &sz) == MPI_ERR_TYPE);
	CHECK(MPI_Type_vector(-1, 1, 1, MPI_INT, &raw) == MPI_ERR_COUNT);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	MPI_Datatype fr[] = {idx, blk, hv, tri, rec, pair};
	for (int i = 0; i < 6; i++)
		OK(MPI_Type_free(&fr[i]));
}

static void test_group(void)
{
	MPI_Group world, evens, odds, rev, rng;
	int n, r, res;
	OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
	OK(MPI_Group_size(world, &n));
	OK(MPI_Group_rank(world, &r));
	CHECK(n == size && r == rank);

	/* Evens, listed from the highest down. */
	int ne = (size + 1) / 2, *er = malloc(ne * sizeof(int));
	CHECK(er);
	for (int k = 0; k < ne; k++)
		er[k] = 2 * (ne - 1 - k);
	OK(MPI_Group_incl(world, ne, er, &rev));
	OK(MPI_Group_size(rev, &n));
	CHECK(n == ne);
	OK(MPI_Group_rank(rev, &r));
	CHECK(rank % 2 ? r == MPI_UNDEFINED : r == ne - 1 - rank / 2);
	int ranges[1][3] = {{0, size - 1, 2}};
	OK(MPI_Group_range_incl(world, 1, ranges, &evens));
	OK(MPI_Group_compare(evens, rev, &res));
	CHECK(res == (ne == 1 ? MPI_IDENT : MPI_SIMILAR));
	OK(MPI_Group_excl(world, ne, er, &odds));
	OK(MPI_Group_size(odds, &n));
	CHECK(n == size - ne);
	OK(MPI_Group_compare(evens, world, &res));
	CHECK(res == (size == 1 ? MPI_IDENT : MPI_UNEQUAL));
	/* Ranks of evens in world and in the reversed list. */
	int in[2] = {0, ne - 1}, out[2];
	OK(MPI_Group_translate_ranks(evens, 2, in, world, out));
	CHECK(out[0] == 0 && out[1] == 2 * (ne - 1));
	OK(MPI_Group_translate_ranks(evens, 2, in, rev, out));
	CHECK(out[0] == ne - 1 && out[1] == 0);
	if (size > 1) {
		int one = 1;
		OK(MPI_Group_translate_ranks(world, 1, &one, evens, out));
		CHECK(out[0] == MPI_UNDEFINED);
	}

	/* A communicator of the evens in reversed order. */
	MPI_Comm ec;
	OK(MPI_Comm_create(MPI_COMM_WORLD, rev, &ec));
	if (rank % 2) {
		CHECK(ec == MPI_COMM_NULL);
	} else {
		int er2, sum;
		OK(MPI_Comm_rank(ec, &er2));
		CHECK(er2 == ne - 1 - rank / 2);
		OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ec));
		CHECK(sum == ne * (ne - 1));
		/* Rank 0 of ec is the highest even world rank. */
		int top = rank;
		OK(MPI_Bcast(&top, 1, MPI_INT, 0, ec));
		CHECK(top == 2 * (ne - 1));
		char name[MPI_MAX_OBJECT_NAME];
		int len;
		OK(MPI_Comm_set_name(ec, "evens"));
		OK(MPI_Comm_get_name(ec, name, &len));
		CHECK(len == 5 && !strcmp(name, "evens"));
		OK(MPI_Comm_free(&ec));
	}
	char name[MPI_MAX_OBJECT_NAME];
	int len;
	OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
	CHECK(!strcmp(name, "MPI_COMM_WORLD"));

	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	int bad = size;
	MPI_Group g2;
	CHECK(MPI_Group_incl(world, 1, &bad, &g2) == MPI_ERR_RANK);
	CHECK(MPI_Group_size(MPI_GROUP_NULL, &n) == MPI_ERR_GROUP);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	OK(MPI_Group_size(MPI_GROUP_EMPTY, &n));
	CHECK(n == 0);
	MPI_Group *fr[] = {&world, &evens, &odds, &rev};
	for (int i = 0; i < 4; i++) {
		OK(MPI_Group_free(fr[i]));
		CHECK(*fr[i] == MPI_GROUP_NULL);
	}
	(void)rng;
	free(er);
}

static void test_modes(void)
{
	MPI_Status st;
	int flag;
	/* Issend stays open until the receiver matches it. */
	if (size >= 2 && rank == 0) {
		int v = 42, go = 1;
		MPI_Request q;
		OK(MPI_Issend(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &q));
		/* Rank 1 is blocked in a receive of tag 2 until we send it. */
		for (int i = 0; i < 1000; i++) {
			OK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
			CHECK(!flag);
		}
		OK(MPI_Send(&go, 1, MPI_INT, 1, 2, MPI_COMM_WORLD));
		OK(MPI_Wait(&q, &st));
		CHECK(q == MPI_REQUEST_NULL);
		/* Blocking Ssend, matched by a receive already posted. */
		OK(MPI_Recv(&go, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &st));
		OK(MPI_Ssend(&v, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
	} else if (size >= 2 && rank == 1) {
		int v = 0, go = 0;
		OK(MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &st));
		CHECK(go == 1);
		OK(MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
		CHECK(v == 42);
		MPI_Request q;
		OK(MPI_Irecv(&v, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &q));
		OK(MPI_Send(&go, 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
		v = 0;
		OK(MPI_Wait(&q, &st));
		CHECK(v == 42 && st.MPI_SOURCE == 0 && st.MPI_TAG == 4);
	}
	/* Issend to self, matched by our own receive. */
	MPI_Request q;
	int a = rank + 5, b = 0;
	OK(MPI_Issend(&a, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &q));
	OK(MPI_Recv(&b, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &st));
	OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
	CHECK(b == rank + 5);

	/* Rsend to a posted receive around the ring. */
	OK(MPI_Irecv(&b, 1, MPI_INT, prev, 10, MPI_COMM_WORLD, &q));
	OK(MPI_Barrier(MPI_COMM_WORLD));
	OK(MPI_Rsend(&a, 1, MPI_INT, next, 10, MPI_COMM_WORLD));
	OK(MPI_Wait(&q, &st));
	CHECK(b == prev + 5);
	OK(MPI_Irecv(&b, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &q));
	OK(MPI_Barrier(MPI_COMM_WORLD));
	MPI_Request q2;
	OK(MPI_Irsend(&a, 1, MPI_INT, next, 11, MPI_COMM_WORLD, &q2));
	MPI_Request both[2] = {q, q2};
	OK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
	CHECK(b == prev + 5);

	/* Ibsend: complete at once, the data still arrive. */
	char *buf = malloc(4096);
	CHECK(buf);
	OK(MPI_Buffer_attach(buf, 4096));
	double d[3] = {rank, rank + 0.25, rank + 0.5}, e[3];
	OK(MPI_Ibsend(d, 3, MPI_DOUBLE, next, 12, MPI_COMM_WORLD, &q));
	OK(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
	CHECK(flag && q == MPI_REQUEST_NULL);
	OK(MPI_Recv(e, 3, MPI_DOUBLE, prev, 12, MPI_COMM_WORLD, &st));
	CHECK(e[0] == prev && e[2] == prev + 0.5);
	void *back;
	int bsz;
	OK(MPI_Buffer_detach(&back, &bsz));
	CHECK(back == buf && bsz == 4096);
	free(buf);

	/* Sendrecv_replace around the ring, with a strided type. */
	int m[3][2] = {{rank, 0}, {rank + 1, 0}, {rank + 2, 0}};
	MPI_Datatype col;
	OK(MPI_Type_vector(3, 1, 2, MPI_INT, &col));
	OK(MPI_Type_commit(&col));
	OK(MPI_Sendrecv_replace(m, 1, col, next, 13, prev, 13, MPI_COMM_WORLD,
				&st));
	for (int i = 0; i < 3; i++)
		CHECK(m[i][0] == prev + i && m[i][1] == 0);
	CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 13);
	OK(MPI_Type_free(&col));
}

static void test_reqs(void)
{
	enum { N = 6 };
	MPI_Request q[N], sq[N];
	MPI_Status sts[N];
	int in[N], out[N], idx[N], done = 0, seen[N] = {0}, outcount;
	for (int i = 0; i < N; i++) {
		in[i] = -1;
		out[i] = rank * 10 + i;
		OK(MPI_Irecv(&in[i], 1, MPI_INT, prev, 20 + i, MPI_COMM_WORLD,
			     &q[i]));
	}
	/* Sent in reverse order: tags pick the receive. */
	for (int i = N - 1; i >= 0; i--)
		OK(MPI_Isend(&out[i], 1, MPI_INT, next, 20 + i, MPI_COMM_WORLD,
			     &sq[i]));
	while (done < N) {
		OK(MPI_Waitsome(N, q, &outcount, idx, sts));
		CHECK(outcount >= 1);
		for (int k = 0; k < outcount; k++) {
			CHECK(!seen[idx[k]] && q[idx[k]] == MPI_REQUEST_NULL);
			seen[idx[k]] = 1;
			CHECK(sts[k].MPI_TAG == 20 + idx[k]);
		}
		done += outcount;
	}
	OK(MPI_Waitsome(N, q, &outcount, idx, sts));
	CHECK(outcount == MPI_UNDEFINED);
	for (int i = 0; i < N; i++)
		CHECK(in[i] == prev * 10 + i);
	/* Testsome on the sends, polled. */
	done = 0;
	for (long s = 0; done < N && s < SPINS; s++) {
		OK(MPI_Testsome(N, sq, &outcount, idx, MPI_STATUSES_IGNORE));
		CHECK(outcount != MPI_UNDEFINED);
		done += outcount;
	}
	CHECK(done == N);

	/* Testany: none active gives UNDEFINED with flag set. */
	int index, flag;
	OK(MPI_Testany(N, q, &index, &flag, MPI_STATUS_IGNORE));
	CHECK(flag && index == MPI_UNDEFINED);
	OK(MPI_Irecv(&in[0], 1, MPI_INT, prev, 30, MPI_COMM_WORLD, &q[2]));
	OK(MPI_Isend(&out[0], 1, MPI_INT, next, 30, MPI_COMM_WORLD, &sq[0]));
	flag = 0;
	for (long s = 0; !flag && s < SPINS; s++)
		OK(MPI_Testany(N, q, &index, &flag, MPI_STATUS_IGNORE));
	CHECK(flag && index == 2 && in[0] == prev * 10);
	OK(MPI_Request_free(&sq[0]));
	CHECK(sq[0] == MPI_REQUEST_NULL);

	/* Persistent requests around the ring, restarted five times. */
	MPI_Request pr[2];
	int pv = -1, po = 0;
	OK(MPI_Recv_init(&pv, 1, MPI_INT, prev, 40, MPI_COMM_WORLD, &pr[0]));
	OK(MPI_Send_init(&po, 1, MPI_INT, next, 40, MPI_COMM_WORLD, &pr[1]));
	for (int it = 0; it < 5; it++) {
		po = rank * 10 + it;
		OK(MPI_Startall(2, pr));
		OK(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE));
		CHECK(pr[0] != MPI_REQUEST_NULL && pr[1] != MPI_REQUEST_NULL);
		CHECK(pv == prev * 10 + it);
	}
	/* An idle persistent request completes at once with empty status. */
	MPI_Status pst;
	OK(MPI_Wait(&pr[0], &pst));
	CHECK(pst.MPI_SOURCE == MPI_PROC_NULL && pr[0] != MPI_REQUEST_NULL);
	OK(MPI_Request_free(&pr[0]));
	OK(MPI_Request_free(&pr[1]));
	CHECK(pr[0] == MPI_REQUEST_NULL && pr[1] == MPI_REQUEST_NULL);

	/* Cancel a receive nothing will match. */
	MPI_Request c;
	MPI_Status st;
	OK(MPI_Irecv(in, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &c));
	OK(MPI_Cancel(&c));
	OK(MPI_Wait(&c, &st));
	OK(MPI_Test_cancelled(&st, &flag));
	CHECK(flag);
	/* A receive already matched is not cancelled. */
	int x = rank, y = -1;
	OK(MPI_Send(&x, 1, MPI_INT, rank, 31, MPI_COMM_WORLD));
	OK(MPI_Irecv(&y, 1, MPI_INT, rank, 31, MPI_COMM_WORLD, &c));
	OK(MPI_Cancel(&c));
	OK(MPI_Wait(&c, &st));
	OK(MPI_Test_cancelled(&st, &flag));
	CHECK(!flag && y == rank);
	/* The cancelled receive took nothing: a later message arrives. */
	OK(MPI_Send(&x, 1, MPI_INT, rank, 999, MPI_COMM_WORLD));
	OK(MPI_Recv(&y, 1, MPI_INT, rank, 999, MPI_COMM_WORLD, &st));
	CHECK(y == rank);
}

static void test_nbc(void)
{
	MPI_Request q[6];
	int flag = 0;
	OK(MPI_Ibarrier(MPI_COMM_WORLD, &q[0]));
	for (long s = 0; !flag && s < SPINS; s++)
		OK(MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE));
	CHECK(flag);

	enum { N = 1000 };
	int *bc = malloc(N * sizeof(int)), *ar = malloc(N * sizeof(int));
	int *sum = malloc(N * sizeof(int));
	CHECK(bc && ar && sum);
	for (int i = 0; i < N; i++) {
		bc[i] = rank == size - 1 ? i * 3 : -1;
		ar[i] = rank + i;
	}
	int mx = -1, root = 1 % size;
	int *ga = malloc(size * sizeof(int)), *sc = malloc(size * sizeof(int));
	int *ag = malloc(size * sizeof(int)), *a2 = malloc(size * sizeof(int));
	int *a2r = malloc(size * sizeof(int));
	CHECK(ga && sc && ag && a2 && a2r);
	for (int r = 0; r < size; r++) {
		sc[r] = 100 + r;
		a2[r] = rank * size + r;
	}
	int mine = -1;
	/* Six collectives in flight at once, completed in any order. */
	OK(MPI_Ibcast(bc, N, MPI_INT, size - 1, MPI_COMM_WORLD, &q[0]));
	OK(MPI_Iallreduce(ar, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
	OK(MPI_Ireduce(&rank, &mx, 1, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD,
		       &q[2]));
	OK(MPI_Igather(&rank, 1, MPI_INT, ga, 1, MPI_INT, root, MPI_COMM_WORLD,
		       &q[3]));
	OK(MPI_Iscatter(sc, 1, MPI_INT, &mine, 1, MPI_INT, root, MPI_COMM_WORLD,
			&q[4]));
	OK(MPI_Ialltoall(a2, 1, MPI_INT, a2r, 1, MPI_INT, MPI_COMM_WORLD,
			 &q[5]));
	int left = 6, idx;
	while (left--)
		OK(MPI_Waitany(6, q, &idx, MPI_STATUS_IGNORE));
	for (int i = 0; i < N; i++)
		CHECK(bc[i] == i * 3 &&
		      sum[i] == size * (size - 1) / 2 + size * i);
	if (rank == root) {
		CHECK(mx == size - 1);
		for (int r = 0; r < size; r++)
			CHECK(ga[r] == r);
	}
	CHECK(mine == 100 + rank);
	for (int r = 0; r < size; r++)
		CHECK(a2r[r] == r * size + rank);

	/* A nonblocking collective overlapping point-to-point traffic. */
	MPI_Request p[2];
	int tok = rank, got = -1;
	OK(MPI_Iallgather(&rank, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD,
			  &q[0]));
	OK(MPI_Irecv(&got, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &p[0]));
	OK(MPI_Send(&tok, 1, MPI_INT, next, 5, MPI_COMM_WORLD));
	OK(MPI_Wait(&p[0], MPI_STATUS_IGNORE));
	CHECK(got == prev);
	OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
	for (int r = 0; r < size; r++)
		CHECK(ag[r] == r);

	/* Non-power-of-two sizes, in place, and a scan, in a row. */
	int v[3] = {rank, 1, rank * rank}, pre[3];
	OK(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(v[0] == size * (size - 1) / 2 && v[1] == size);
	OK(MPI_Scan(&rank, pre, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(pre[0] == rank * (rank + 1) / 2);
	OK(MPI_Exscan(&rank, pre, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(rank == 0 || pre[0] == rank * (rank - 1) / 2);
	free(bc);
	free(ar);
	free(sum);
	free(ga);
	free(sc);
	free(ag);
	free(a2);
	free(a2r);
}

static void test_nbcv(void)
{
	/* Rank r contributes r + 1 ints; the v forms, nonblocking. */
	int *cnt = malloc(size * sizeof(int)),
	    *dsp = malloc(size * sizeof(int));
	CHECK(cnt && dsp);
	int total = 0;
	for (int r = 0; r < size; r++) {
		cnt[r] = r + 1;
		dsp[r] = total;
		total += r + 1;
	}
	int *mine = malloc((rank + 1) * sizeof(int));
	int *all = malloc(total * sizeof(int)),
	    *gv = malloc(total * sizeof(int));
	int *sv = malloc(total * sizeof(int)),
	    *back = malloc((rank + 1) * sizeof(int));
	CHECK(mine && all && gv && sv && back);
	for (int k = 0; k <= rank; k++)
		mine[k] = rank * 100 + k;
	for (int i = 0; i < total; i++)
		sv[i] = i;
	int root = size / 2;
	MPI_Request q[4];
	OK(MPI_Iallgatherv(mine, rank + 1, MPI_INT, all, cnt, dsp, MPI_INT,
			   MPI_COMM_WORLD, &q[0]));
	OK(MPI_Igatherv(mine, rank + 1, MPI_INT, gv, cnt, dsp, MPI_INT, root,
			MPI_COMM_WORLD, &q[1]));
	OK(MPI_Iscatterv(sv, cnt, dsp, MPI_INT, back, rank + 1, MPI_INT, root,
			 MPI_COMM_WORLD, &q[2]));
	int rsb[2] = {rank, 2 * rank}, rso = -1;
	int *rsin = malloc(size * sizeof(int));
	CHECK(rsin);
	for (int r = 0; r < size; r++)
		rsin[r] = rank + r;
	OK(MPI_Ireduce_scatter_block(rsin, &rso, 1, MPI_INT, MPI_SUM,
				     MPI_COMM_WORLD, &q[3]));
	OK(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
	for (int r = 0; r < size; r++)
		for (int k = 0; k <= r; k++) {
			CHECK(all[dsp[r] + k] == r * 100 + k);
			if (rank == root)
				CHECK(gv[dsp[r] + k] == r * 100 + k);
		}
	for (int k = 0; k <= rank; k++)
		CHECK(back[k] == dsp[rank] + k);
	CHECK(rso == size * (size - 1) / 2 + size * rank);
	/* Ialltoallv: rank r sends r + 1 copies of its rank to everyone. */
	int *scnt = malloc(size * sizeof(int)),
	    *sdsp = malloc(size * sizeof(int));
	int *rcnt = malloc(size * sizeof(int)),
	    *rdsp = malloc(size * sizeof(int));
	int *sb = malloc(size * (rank + 1) * sizeof(int));
	int *rb = malloc(total * sizeof(int));
	CHECK(scnt && sdsp && rcnt && rdsp && sb && rb);
	for (int r = 0; r < size; r++) {
		scnt[r] = rank + 1;
		sdsp[r] = r * (rank + 1);
		rcnt[r] = r + 1;
		rdsp[r] = dsp[r];
	}
	for (int i = 0; i < size * (rank + 1); i++)
		sb[i] = rank;
	OK(MPI_Ialltoallv(sb, scnt, sdsp, MPI_INT, rb, rcnt, rdsp, MPI_INT,
			  MPI_COMM_WORLD, &q[0]));
	int rsv[2] = {-1, -1}, *rc2 = malloc(size * sizeof(int));
	int *rin = malloc(2 * size * sizeof(int));
	CHECK(rc2 && rin);
	for (int r = 0; r < size; r++)
		rc2[r] = r == size - 1 ? 2 : 0;
	for (int i = 0; i < 2 * size; i++)
		rin[i] = i;
	int need = rank == size - 1 ? 2 : 0;
	int tot2 = 2; /* all counts add up to 2: the last rank gets both */
	(void)tot2;
	OK(MPI_Ireduce_scatter(rin, rsv, rc2, MPI_INT, MPI_MAX, MPI_COMM_WORLD,
			       &q[1]));
	OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
	for (int r = 0; r < size; r++)
		for (int k = 0; k <= r; k++)
			CHECK(rb[dsp[r] + k] == r);
	if (need)
		CHECK(rsv[0] == 0 && rsv[1] == 1);
	(void)rsb;
	free(cnt), free(dsp), free(mine), free(all), free(gv), free(sv);
	free(back), free(rsin), free(scnt), free(sdsp), free(rcnt);
	free(rdsp), free(sb), free(rb), free(rc2), free(rin);
}

static void test_topo(void)
{
	int d[3] = {0, 0, 0};
	OK(MPI_Dims_create(12, 3, d));
	CHECK(d[0] == 3 && d[1] == 2 && d[2] == 2);
	int e[2] = {0, 3};
	OK(MPI_Dims_create(12, 2, e));
	CHECK(e[0] == 4 && e[1] == 3);
	int f[2] = {0, 0};
	OK(MPI_Dims_create(size, 2, f));
	CHECK(f[0] * f[1] == size && f[0] >= f[1]);

	/* A periodic ring of all ranks, and a grid of the first ones. */
	MPI_Comm ring, grid;
	int dims1 = size, per1 = 1, st;
	OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims1, &per1, 0, &ring));
	OK(MPI_Topo_test(ring, &st));
	CHECK(st == MPI_CART);
	int src, dst;
	OK(MPI_Cart_shift(ring, 0, 1, &src, &dst));
	CHECK(src == prev && dst == next);
	int v = rank, w = -1;
	OK(MPI_Sendrecv(&v, 1, MPI_INT, dst, 0, &w, 1, MPI_INT, src, 0, ring,
			MPI_STATUS_IGNORE));
	CHECK(w == prev);
	OK(MPI_Comm_free(&ring));
	int gd[2] = {2, size / 2 > 0 ? size / 2 : 1}, gp[2] = {0, 0};
	if (size == 1)
		gd[0] = 1;
	OK(MPI_Cart_create(MPI_COMM_WORLD, 2, gd, gp, 0, &grid));
	if (rank >= gd[0] * gd[1]) {
		CHECK(grid == MPI_COMM_NULL);
	} else {
		int co[2], r2, nd, dd[2], pp[2], cc[2];
		OK(MPI_Cart_coords(grid, rank, 2, co));
		CHECK(co[0] == rank / gd[1] && co[1] == rank % gd[1]);
		OK(MPI_Cart_rank(grid, co, &r2));
		CHECK(r2 == rank);
		OK(MPI_Cartdim_get(grid, &nd));
		CHECK(nd == 2);
		OK(MPI_Cart_get(grid, 2, dd, pp, cc));
		CHECK(dd[0] == gd[0] && dd[1] == gd[1] && cc[0] == co[0]);
		OK(MPI_Cart_shift(grid, 0, 1, &src, &dst));
		CHECK(co[0] == 0 ? src == MPI_PROC_NULL : src == rank - gd[1]);
		OK(MPI_Comm_set_errhandler(grid, MPI_ERRORS_RETURN));
		int out[2] = {gd[0], 0};
		CHECK(MPI_Cart_rank(grid, out, &r2) == MPI_ERR_ARG);
		OK(MPI_Comm_free(&grid));
	}

	/* A directed ring as a distributed graph, weighted. */
	MPI_Comm g;
	int wi = 5, wo = 7;
	OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &prev, &wi, 1,
					  &next, &wo, MPI_INFO_NULL, 0, &g));
	int indeg, outdeg, weighted, s1, d1, ws, wd;
	OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
	CHECK(indeg == 1 && outdeg == 1 && weighted);
	OK(MPI_Dist_graph_neighbors(g, 1, &s1, &ws, 1, &d1, &wd));
	CHECK(s1 == prev && d1 == next && ws == 5 && wd == 7);
	OK(MPI_Topo_test(g, &st));
	CHECK(st == MPI_DIST_GRAPH);
	OK(MPI_Comm_free(&g));
	OK(MPI_Topo_test(MPI_COMM_WORLD, &st));
	CHECK(st == MPI_UNDEFINED);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	CHECK(MPI_Cart_coords(MPI_COMM_WORLD, 0, 1, d) == MPI_ERR_TOPOLOGY);
	CHECK(MPI_Dims_create(7, 1, (int[]){2}) == MPI_ERR_ARG);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

	char name[MPI_MAX_OBJECT_NAME];
	int len;
	OK(MPI_Type_get_name(MPI_DOUBLE, name, &len));
	CHECK(!strcmp(name, "MPI_DOUBLE") && len == 10);
	MPI_Datatype t;
	OK(MPI_Type_contiguous(2, MPI_INT, &t));
	OK(MPI_Type_set_name(t, "pair"));
	OK(MPI_Type_get_name(t, name, &len));
	CHECK(!strcmp(name, "pair"));
	OK(MPI_Type_free(&t));
}

static void test_win(void)
{
	MPI_Win w1, w2, w3;
	int mem[4] = {0};
	OK(MPI_Win_create(mem, sizeof(mem), sizeof(int), MPI_INFO_NULL,
			  MPI_COMM_WORLD, &w1));
	int *base = NULL;
	OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w2));
	CHECK(base != NULL);
	base[0] = rank; /* the memory is ours to use */
	OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w3));
	OK(MPI_Win_attach(w3, mem, sizeof(mem)));
	OK(MPI_Win_fence(0, w1));
	OK(MPI_Win_detach(w3, mem));
	OK(MPI_Win_set_errhandler(w1, MPI_ERRORS_RETURN));
	CHECK(MPI_Win_attach(w1, mem, 4) == MPI_ERR_ARG);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	CHECK(MPI_Win_fence(0, MPI_WIN_NULL) == MPI_ERR_WIN);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	OK(MPI_Win_free(&w3));
	OK(MPI_Win_free(&w2));
	OK(MPI_Win_free(&w1));
	CHECK(w1 == MPI_WIN_NULL);
}

static void test_nbr(void)
{
	/* A periodic ring: block j goes to side j (0: left, 1: right). */
	MPI_Comm ring, line;
	int dims = size, per = 1, none = 0;
	OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &per, 0, &ring));
	int out[2] = {rank * 10, rank * 10 + 1}, in[2] = {-1, -1};
	OK(MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ring));
	/* From the left comes what it sent right, and the other way. */
	CHECK(in[0] == prev * 10 + 1 && in[1] == next * 10);
	int ag[2] = {-1, -1};
	MPI_Request q;
	OK(MPI_Ineighbor_allgather(&rank, 1, MPI_INT, ag, 1, MPI_INT, ring,
				   &q));
	OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
	CHECK(ag[0] == prev && ag[1] == next);
	OK(MPI_Comm_free(&ring));
	/* Not periodic: the ends have no neighbour, their blocks stay. */
	OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &none, 0, &line));
	in[0] = in[1] = -1;
	OK(MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, line));
	CHECK(in[0] == (rank > 0 ? (rank - 1) * 10 + 1 : -1));
	CHECK(in[1] == (rank < size - 1 ? (rank + 1) * 10 : -1));
	OK(MPI_Comm_free(&line));

	/* A graph: everyone hears from the previous two ranks. */
	int srcs[2] = {prev, (rank - 2 + 2 * size) % size},
	    dsts[2] = {next, (rank + 2) % size};
	MPI_Comm g;
	OK(MPI_Dist_graph_create_adjacent(
	    MPI_COMM_WORLD, 2, srcs, MPI_UNWEIGHTED, 2, dsts, MPI_UNWEIGHTED,
	    MPI_INFO_NULL, 0, &g));
	int cnt[2] = {1, 2}, dsp[2] = {0, 1}, got[3] = {-1, -1, -1};
	int mine[2] = {rank, rank};
	/* Every rank sends 1 int: with counts 1 and 2 only the first fits,
	 * so send 1 and expect 1 in each (the second has room for 2). */
	OK(MPI_Neighbor_allgatherv(mine, 1, MPI_INT, got, cnt, dsp, MPI_INT,
				   g));
	CHECK(got[0] == srcs[0] && got[1] == srcs[1]);
	int so[2] = {rank * 100 + 1, rank * 100 + 2}, ro[2] = {-1, -1};
	int c1[2] = {1, 1}, d1[2] = {0, 1};
	OK(MPI_Ineighbor_alltoallv(so, c1, d1, MPI_INT, ro, c1, d1, MPI_INT, g,
				   &q));
	OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
	/* Our first source sent us its first block, the second its second. */
	CHECK(ro[0] == srcs[0] * 100 + 1 && ro[1] == srcs[1] * 100 + 2);
	OK(MPI_Comm_free(&g));

	/* Alltoallw: to rank r, r + 1 ints from byte offset 4 r. */
	int n = size, *sb = malloc((2 * n + 1) * sizeof(int));
	int *rb = malloc((n * (rank + 1) + 1) * sizeof(int));
	int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
	int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
	MPI_Datatype *ty = malloc(n * sizeof(MPI_Datatype));
	CHECK(sb && rb && sc && sd && rc && rd && ty);
	for (int i = 0; i < 2 * n; i++)
		sb[i] = rank * 1000 + i;
	int off = 0;
	for (int r = 0; r < n; r++) {
		sc[r] = r + 1 > 2 * n - r ? 2 * n - r : r + 1;
		sd[r] = 4 * r;
		ty[r] = MPI_INT;
	}
	for (int r = 0; r < n; r++) {
		rc[r] = rank + 1 > 2 * n - rank ? 2 * n - rank : rank + 1;
		rd[r] = off * 4;
		off += rc[r];
	}
	OK(MPI_Alltoallw(sb, sc, sd, ty, rb, rc, rd, ty, MPI_COMM_WORLD));
	for (int r = 0; r < n; r++)
		for (int k = 0; k < rc[r]; k++)
			CHECK(rb[rd[r] / 4 + k] == r * 1000 + rank + k);
	free(sb), free(rb), free(sc), free(sd), free(rc), free(rd), free(ty);
}

/* Contribution of rank r to element k under op (kept small: PROD fits). */
static long lval(MPI_Op op, int r, int k)
{
	if (op == MPI_PROD)
		return 1 + (r + k) % 2;
	if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
		return (r + k) % 3 == 0;
	return (r * 37 + k * 11) % 101 + (op == MPI_BAND ? 128 : 0);
}

/* Element k of op folded over every rank. */
static long lref(MPI_Op op, int k)
{
	long acc = lval(op, 0, k);
	for (int r = 1; r < size; r++) {
		long v = lval(op, r, k);
		if (op == MPI_SUM)
			acc += v;
		else if (op == MPI_PROD)
			acc *= v;
		else if (op == MPI_MAX)
			acc = v > acc ? v : acc;
		else if (op == MPI_MIN)
			acc = v < acc ? v : acc;
		else if (op == MPI_LAND)
			acc = acc && v;
		else if (op == MPI_LOR)
			acc = acc || v;
		else if (op == MPI_LXOR)
			acc = !acc != !v;
		else if (op == MPI_BAND)
			acc &= v;
		else if (op == MPI_BOR)
			acc |= v;
		else if (op == MPI_BXOR)
			acc ^= v;
	}
	return acc;
}

/* A non-commutative user op: the lower ranks' value wins. */
static void keep_left(void *in, void *inout, int *len, MPI_Datatype *t)
{
	(void)t;
	memcpy(inout, in, (size_t)*len * sizeof(int));
}

static void test_large(void)
{
	/* About 1 MiB of each type, three elements over: never a multiple
	 * of the size (but 1), and small counts. */
	enum { MIB = 1 << 20 };
	const int small[] = {1, 7, 1000};
	char *b = malloc(MIB + 64);
	CHECK(b);
	for (int ci = 0; ci < 5; ci++) {
		int count = ci < 3 ? small[ci] : ci == 3 ? MIB : MIB + 5;
		int roots[3] = {0, size / 2, size - 1};
		for (int ri = 0; ri < 3; ri++) {
			int root = roots[ri];
			for (int i = 0; i < count; i++)
				b[i] = (char)(rank == root ? i * 7 + root : -1);
			if (ri == 1) {
				MPI_Request q;
				OK(MPI_Ibcast(b, count, MPI_BYTE, root,
					      MPI_COMM_WORLD, &q));
				OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
			} else {
				OK(MPI_Bcast(b, count, MPI_BYTE, root,
					     MPI_COMM_WORLD));
			}
			for (int i = 0; i < count; i++)
				CHECK(b[i] == (char)(i * 7 + root));
		}
	}
	/* Ints: (1 MiB + 12 bytes) from the last rank. */
	free(b);
	int ni = MIB / 4 + 3, *ib = malloc((size_t)ni * sizeof(int));
	CHECK(ib);
	for (int i = 0; i < ni; i++)
		ib[i] = rank == size - 1 ? i ^ 0x5a5a : 0;
	OK(MPI_Bcast(ib, ni, MPI_INT, size - 1, MPI_COMM_WORLD));
	for (int i = 0; i < ni; i++)
		CHECK(ib[i] == (i ^ 0x5a5a));
	free(ib);

	const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN, MPI_LAND,
			      MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
	const int counts[] = {1, 7, 1000, MIB / 4 + 3};
	int *iv = malloc(MIB + 64), *ir = malloc(MIB + 64);
	double *dv = malloc(2 * MIB + 64), *dr = malloc(2 * MIB + 64);
	unsigned char *cv = malloc(MIB + 64), *cr = malloc(MIB + 64);
	CHECK(iv && ir && dv && dr && cv && cr);
	for (unsigned o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		MPI_Op op = ops[o];
		bool bitwise =
		    op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;
		bool logical =
		    op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
		for (int ci = 0; ci < 4; ci++) {
			int n = counts[ci];
			for (int k = 0; k < n; k++)
				iv[k] = (int)lval(op, rank, k);
			OK(MPI_Allreduce(iv, ir, n, MPI_INT, op,
					 MPI_COMM_WORLD));
			for (int k = 0; k < n; k++)
				CHECK(ir[k] == (int)lref(op, k));
			if (!bitwise && !logical) {
				/* Doubles: 2 MiB + 24 bytes at the largest. */
				for (int k = 0; k < n; k++)
					dv[k] = (double)lval(op, rank, k);
				OK(MPI_Allreduce(dv, dr, n, MPI_DOUBLE, op,
						 MPI_COMM_WORLD));
				for (int k = 0; k < n; k++)
					CHECK(dr[k] == (double)lref(op, k));
			}
			if (bitwise) {
				/* Bytes: as many bytes as the ints'. */
				int nc = n * 4;
				for (int k = 0; k < nc; k++)
					cv[k] =
					    (unsigned char)lval(op, rank, k);
				OK(MPI_Allreduce(cv, cr, nc, MPI_UNSIGNED_CHAR,
						 op, MPI_COMM_WORLD));
				for (int k = 0; k < nc; k++)
					CHECK(cr[k] ==
					      (unsigned char)lref(op, k));
			}
		}
	}
	/* In place and nonblocking, the largest count. */
	int n = MIB / 4 + 3;
	for (int k = 0; k < n; k++)
		ir[k] = (int)lval(MPI_SUM, rank, k);
	OK(MPI_Allreduce(MPI_IN_PLACE, ir, n, MPI_INT, MPI_SUM,
			 MPI_COMM_WORLD));
	for (int k = 0; k < n; k++)
		CHECK(ir[k] == (int)lref(MPI_SUM, k));
	for (int k = 0; k < n; k++)
		iv[k] = (int)lval(MPI_MAX, rank, k);
	MPI_Request q;
	OK(MPI_Iallreduce(iv, ir, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q));
	OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
	for (int k = 0; k < n; k++)
		CHECK(ir[k] == (int)lref(MPI_MAX, k));
	/* MAXLOC / MINLOC on pairs: ties go to the lower index. */
	struct di {
		double v;
		int i;
	} *pv = (struct di *)dv, *pr = (struct di *)dr;
	int np = MIB / (int)sizeof(struct di) + 3;
	for (int pass = 0; pass < 2; pass++) {
		MPI_Op op = pass ? MPI_MINLOC : MPI_MAXLOC;
		for (int k = 0; k < np; k++)
			pv[k] = (struct di){(double)((rank * 3 + k) % 4), rank};
		OK(MPI_Allreduce(pv, pr, np, MPI_DOUBLE_INT, op,
				 MPI_COMM_WORLD));
		for (int k = 0; k < np; k++) {
			double best = (double)(k % 4);
			int who = 0;
			for (int r = 1; r < size; r++) {
				double x = (double)((r * 3 + k) % 4);
				if (pass ? x < best : x > best) {
					best = x;
					who = r;
				}
			}
			CHECK(pr[k].v == best && pr[k].i == who);
		}
	}
	/* A user op that does not commute keeps rank order at any size. */
	MPI_Op left;
	OK(MPI_Op_create(keep_left, 0, &left));
	for (int k = 0; k < n; k++)
		iv[k] = rank * 1000 + k;
	OK(MPI_Allreduce(iv, ir, n, MPI_INT, left, MPI_COMM_WORLD));
	for (int k = 0; k < n; k++)
		CHECK(ir[k] == k);
	OK(MPI_Op_free(&left));
	free(iv), free(ir), free(dv), free(dr), free(cv), free(cr);
}

/* Attribute callbacks: they count their calls in the extra state. */
typedef struct {
	int copies, deletes, fail, order;
	intptr_t last_deleted;
	MPI_Comm last_comm;
} calls_t;

static int delete_seq;

/* MPI_COMM_SELF's attributes: expected next (0: none), all seen. */
static int self_expect, self_done;

static int self_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)keyval, (void)extra;
	int fin = 1;
	MPI_Finalized(&fin);
	CHECK(comm == MPI_COMM_SELF && !fin);
	CHECK((intptr_t)val == self_expect);
	if (--self_expect == 0)
		self_done = 1;
	return MPI_SUCCESS;
}

static int plus_one_copy(MPI_Comm oldcomm, int keyval, void *extra, void *in,
			 void *out, int *flag)
{
	(void)oldcomm, (void)keyval;
	calls_t *k = extra;
	k->copies++;
	if (k->fail)
		return MPI_ERR_OTHER;
	*(void **)out = (void *)((intptr_t)in + 1);
	*flag = 1;
	return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	(void)keyval;
	calls_t *k = extra;
	k->deletes++;
	k->order = ++delete_seq;
	k->last_deleted = (intptr_t)val;
	k->last_comm = comm;
	return k->fail ? MPI_ERR_ARG : MPI_SUCCESS;
}

static void test_attr(void)
{
	calls_t kc = {0}, nc = {0}, dc = {0};
	int kv, knull, kdup, flag;
	void *v;
	OK(MPI_Comm_create_keyval(plus_one_copy, counting_delete, &kv, &kc));
	OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete,
				  &knull, &nc));
	OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN,
				  &kdup, &dc));
	CHECK(kv != MPI_KEYVAL_INVALID && kv != knull && kv != kdup);

	MPI_Comm a, b;
	OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
	OK(MPI_Comm_get_attr(a, kv, &v, &flag));
	CHECK(flag == 0);
	OK(MPI_Comm_set_attr(a, kv, (void *)(intptr_t)(100 + rank)));
	OK(MPI_Comm_set_attr(a, knull, (void *)(intptr_t)7));
	OK(MPI_Comm_set_attr(a, kdup, (void *)(intptr_t)9));
	OK(MPI_Comm_get_attr(a, kv, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 100 + rank);
	/* Setting again deletes the old value first. */
	OK(MPI_Comm_set_attr(a, kv, (void *)(intptr_t)(200 + rank)));
	CHECK(kc.deletes == 1 && kc.last_deleted == 100 + rank &&
	      kc.last_comm == a);
	OK(MPI_Comm_get_attr(a, kv, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 200 + rank);
	/* The predefined attributes are still there, and read only. */
	int *ub;
	OK(MPI_Comm_get_attr(a, MPI_TAG_UB, &ub, &flag));
	CHECK(flag && *ub >= 32767);

	/* Dup: our copy adds one, the null copy drops, the dup copy keeps. */
	OK(MPI_Comm_dup(a, &b));
	CHECK(kc.copies == 1);
	OK(MPI_Comm_get_attr(b, kv, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 201 + rank);
	OK(MPI_Comm_get_attr(b, knull, &v, &flag));
	CHECK(flag == 0);
	OK(MPI_Comm_get_attr(b, kdup, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 9);
	/* The copy is b's own: deleting it leaves a's. */
	OK(MPI_Comm_delete_attr(b, kv));
	CHECK(kc.deletes == 2 && kc.last_deleted == 201 + rank &&
	      kc.last_comm == b);
	OK(MPI_Comm_get_attr(b, kv, &v, &flag));
	CHECK(flag == 0);
	OK(MPI_Comm_get_attr(a, kv, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 200 + rank);
	/* Communicators that nobody set anything on know nothing. */
	OK(MPI_Comm_get_attr(MPI_COMM_WORLD, kv, &v, &flag));
	CHECK(flag == 0);

	/* A freed keyval: gone for new attributes, kept for the old ones. */
	int kv_copy = kv;
	OK(MPI_Comm_free_keyval(&kv));
	CHECK(kv == MPI_KEYVAL_INVALID);
	MPI_Comm c;
	OK(MPI_Comm_dup(a, &c)); /* the copy callback still runs */
	CHECK(kc.copies == 2);
	OK(MPI_Comm_get_attr(c, kv_copy, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 201 + rank);
	OK(MPI_Comm_free(&c));
	CHECK(kc.deletes == 3 && kc.last_deleted == 201 + rank);

	/* Errors (returned, not fatal, on these communicators). */
	OK(MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN));
	OK(MPI_Comm_set_errhandler(b, MPI_ERRORS_RETURN));
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	CHECK(MPI_Comm_set_attr(a, kv_copy, NULL) == MPI_ERR_KEYVAL);
	CHECK(MPI_Comm_set_attr(a, MPI_TAG_UB, NULL) == MPI_ERR_KEYVAL);
	CHECK(MPI_Comm_delete_attr(a, MPI_TAG_UB) == MPI_ERR_KEYVAL);
	CHECK(MPI_Comm_delete_attr(b, knull) == MPI_ERR_KEYVAL);
	OK(MPI_Comm_get_attr(a, MPI_KEYVAL_INVALID, &v, &flag));
	CHECK(flag == 0);
	CHECK(MPI_Comm_free_keyval(&kv) == MPI_ERR_KEYVAL);
	int tub = MPI_TAG_UB;
	CHECK(MPI_Comm_free_keyval(&tub) == MPI_ERR_KEYVAL);
	/* A copy callback's error fails the dup, and no communicator is
	 * made (the attributes copied before it are deleted). */
	kc.fail = 1;
	MPI_Comm d = MPI_COMM_NULL;
	CHECK(MPI_Comm_dup(a, &d) == MPI_ERR_OTHER);
	CHECK(d == MPI_COMM_NULL && kc.copies == 3);
	/* A delete callback's error fails the delete: the value stays. */
	CHECK(MPI_Comm_delete_attr(a, kv_copy) == MPI_ERR_ARG);
	OK(MPI_Comm_get_attr(a, kv_copy, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 200 + rank);
	/* ... and a free: last set first, so kdup's and knull's go, kv's
	 * fails and stays, and so does the communicator, usable. */
	MPI_Comm keep = a;
	CHECK(MPI_Comm_free(&a) == MPI_ERR_ARG);
	CHECK(a == keep);
	CHECK(nc.deletes == 1 && nc.last_deleted == 7 && nc.order < kc.order);
	OK(MPI_Comm_get_attr(a, knull, &v, &flag));
	CHECK(flag == 0);
	OK(MPI_Comm_get_attr(a, kv_copy, &v, &flag));
	CHECK(flag == 1 && (intptr_t)v == 200 + rank);
	int one = 1, sum = 0;
	OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, a));
	CHECK(sum == size);
	kc.fail = 0;
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

	int before = kc.deletes;
	OK(MPI_Comm_free(&a));
	CHECK(a == MPI_COMM_NULL);
	CHECK(kc.deletes == before + 1 && kc.last_deleted == 200 + rank);
	OK(MPI_Comm_free(&b));
	CHECK(nc.deletes == 1 && dc.copies == 0);
	OK(MPI_Comm_free_keyval(&knull));
	OK(MPI_Comm_free_keyval(&kdup));

	/* On MPI_COMM_SELF: deleted at the start of MPI_Finalize, last set
	 * first, while MPI still works (main checks). */
	int ks1, ks2;
	OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &ks1,
				  NULL));
	OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &ks2,
				  NULL));
	OK(MPI_Comm_set_attr(MPI_COMM_SELF, ks1, (void *)(intptr_t)1));
	OK(MPI_Comm_set_attr(MPI_COMM_SELF, ks2, (void *)(intptr_t)2));
	OK(MPI_Comm_free_keyval(&ks1));
	self_expect = 2;
}

/* Expected number of hosts for the "hosts" case (0: any). */
static int want_hosts;

/* Bcast, reduce, allreduce and barrier on c, every root, three sizes. */
static void by_host(MPI_Comm c)
{
	int r, n;
	OK(MPI_Comm_rank(c, &r));
	OK(MPI_Comm_size(c, &n));
	/* The largest (1 MiB + 12 bytes) takes the large-message algorithms
	 * in the phases that have enough members. */
	enum { BIG = (1 << 18) + 3 };
	const int lens[] = {1, 5000, BIG};
	int *a = malloc(BIG * sizeof(int)), *b = malloc(BIG * sizeof(int));
	CHECK(a && b);
	for (int rep = 0; rep < 3; rep++)
		OK(MPI_Barrier(c));
	for (int li = 0; li < 3; li++) {
		int len = lens[li];
		for (int root = 0; root < n; root++) {
			for (int i = 0; i < len; i++)
				a[i] = r == root ? root * 7 + i : -1;
			OK(MPI_Bcast(a, len, MPI_INT, root, c));
			for (int i = 0; i < len; i++)
				CHECK(a[i] == root * 7 + i);
			for (int i = 0; i < len; i++)
				a[i] = r + i;
			OK(MPI_Reduce(a, b, len, MPI_INT, MPI_SUM, root, c));
			if (r == root)
				for (int i = 0; i < len; i++)
					CHECK(b[i] == n * (n - 1) / 2 + n * i);
		}
		for (int i = 0; i < len; i++)
			a[i] = r * (i % 3 + 1);
		OK(MPI_Allreduce(a, b, len, MPI_INT, MPI_MAX, c));
		for (int i = 0; i < len; i++)
			CHECK(b[i] == (n - 1) * (i % 3 + 1));
		MPI_Request q;
		OK(MPI_Iallreduce(MPI_IN_PLACE, a, len, MPI_INT, MPI_SUM, c,
				  &q));
		OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
		for (int i = 0; i < len; i++)
			CHECK(a[i] == n * (n - 1) / 2 * (i % 3 + 1));
	}
	free(a);
	free(b);
}

static void test_hosts(void)
{
	MPI_Comm node;
	int nr, leaders;
	OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
			       MPI_INFO_NULL, &node));
	OK(MPI_Comm_rank(node, &nr));
	int lead = nr == 0;
	OK(MPI_Allreduce(&lead, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	CHECK(want_hosts == 0 || leaders == want_hosts);
	OK(MPI_Comm_free(&node));
	by_host(MPI_COMM_WORLD);
	/* Without the last rank: hosts with different numbers of ranks. */
	MPI_Comm part;
	OK(MPI_Comm_split(MPI_COMM_WORLD,
			  rank == size - 1 && size > 1 ? MPI_UNDEFINED : 0,
			  rank, &part));
	if (part != MPI_COMM_NULL) {
		by_host(part);
		OK(MPI_Comm_free(&part));
	}
}

static void *not_main(void *arg)
{
	int flag = -1;
	MPI_Is_thread_main(&flag);
	*(int *)arg = flag;
	return NULL;
}

static void test_env(void)
{
	MPI_Info info, dup;
	char v[64], k[MPI_MAX_INFO_KEY];
	int flag, n;
	OK(MPI_Info_create(&info));
	OK(MPI_Info_set(info, "host", "a"));
	OK(MPI_Info_set(info, "wdir", "/x/y"));
	OK(MPI_Info_set(info, "host", "bb"));
	OK(MPI_Info_get_nkeys(info, &n));
	CHECK(n == 2);
	OK(MPI_Info_get(info, "host", sizeof(v) - 1, v, &flag));
	CHECK(flag && !strcmp(v, "bb"));
	OK(MPI_Info_get(info, "wdir", 2, v, &flag));
	CHECK(flag && !strcmp(v, "/x"));
	OK(MPI_Info_get(info, "none", sizeof(v) - 1, v, &flag));
	CHECK(!flag);
	OK(MPI_Info_get_nthkey(info, 1, k));
	CHECK(!strcmp(k, "wdir"));
	OK(MPI_Info_dup(info, &dup));
	OK(MPI_Info_delete(info, "host"));
	OK(MPI_Info_get_nkeys(info, &n));
	CHECK(n == 1);
	OK(MPI_Info_get(dup, "host", sizeof(v) - 1, v, &flag));
	CHECK(flag && !strcmp(v, "bb"));
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	CHECK(MPI_Info_delete(info, "host") == MPI_ERR_INFO_NOKEY);
	CHECK(MPI_Info_set(MPI_INFO_NULL, "a", "b") == MPI_ERR_INFO);
	OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
	OK(MPI_Info_free(&info));
	OK(MPI_Info_free(&dup));
	CHECK(info == MPI_INFO_NULL);

	int prov;
	OK(MPI_Query_thread(&prov));
	CHECK(prov == MPI_THREAD_SERIALIZED);
	OK(MPI_Is_thread_main(&flag));
	CHECK(flag == 1);
	pthread_t t;
	int other = -1;
	CHECK(pthread_create(&t, NULL, not_main, &other) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(other == 0);
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	OK(MPI_Get_library_version(lib, &n));
	CHECK(n > 0 && n == (int)strlen(lib) && strstr(lib, "pcor"));
	OK(MPI_Pcontrol(1));
}

int main(int argc, char **argv)
{
	int prov;
	OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &prov));
	OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
	OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
	next = (rank + 1) % size;
	prev = (rank - 1 + size) % size;
	const char *c = argc > 1 ? argv[1] : "all";
	want_hosts = argc > 2 ? atoi(argv[2]) : 0;
	bool all = !strcmp(c, "all");
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {
	    {"dtype", test_dtype}, {"group", test_group}, {"modes", test_modes},
	    {"reqs", test_reqs},   {"nbc", test_nbc},	  {"nbcv", test_nbcv},
	    {"env", test_env},	   {"topo", test_topo},	  {"win", test_win},
	    {"nbr", test_nbr},	   {"hosts", test_hosts}, {"attr", test_attr},
	    {"large", test_large}};
	int ran = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (all || !strcmp(c, cases[i].name)) {
			cases[i].fn();
			OK(MPI_Barrier(MPI_COMM_WORLD));
			ran++;
		}
	CHECK(ran > 0);
	OK(MPI_Finalize());
	CHECK(self_expect == 0 && (self_done || !(all || !strcmp(c, "attr"))));
	if (rank == 0)
		printf("mpi_more %s: %d ranks ok\n", c, size);
	return 0;
}
