/*
 * collv.c -- the collectives with per-rank counts (the v forms) and the
 * reduce-scatters, on coll.c's building blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

static int check_counts(const comm_t *c, const int *counts, const int *displs)
{
	if (!counts || !displs)
		return MPI_ERR_ARG;
	for (int r = 0; r < c->size; r++)
		if (counts[r] < 0)
			return MPI_ERR_COUNT;
	return MPI_SUCCESS;
}

/* comm valid and a schedule for it; else an error class. */
static int begin(MPI_Comm comm, comm_t **c_p, sched_t **s_p)
{
	*c_p = pcori_mpi_comm(comm);
	if (!*c_p)
		return MPI_ERR_COMM;
	*s_p = pcori_mpi_sched_new(*c_p);
	return *s_p ? MPI_SUCCESS : MPI_ERR_OTHER;
}

static int abandon(sched_t *s, int err)
{
	pcori_mpi_sched_fini(s);
	free(s);
	return err;
}

/* The local side of a v collective: count elements of t, or IN_PLACE. */
static int local_ok(const void *buf, int count, MPI_Datatype t)
{
	if (buf == MPI_IN_PLACE)
		return MPI_SUCCESS;
	if (count < 0)
		return MPI_ERR_COUNT;
	return pcori_mpi_type_ready(t) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

static int gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		   const int *rcounts, const int *displs, MPI_Datatype rtype,
		   int root, MPI_Comm comm, MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = begin(comm, &c, &s);
	if (err)
		return err;
	err = local_ok(sbuf, scount, stype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root) {
		err = pcori_mpi_type_ready(rtype) ? MPI_SUCCESS : MPI_ERR_TYPE;
		if (!err)
			err = check_counts(c, rcounts, displs);
	}
	if (err)
		return abandon(s, err);
	layout_t l = {0};
	if (c->rank == root)
		l = (layout_t){.base = rbuf,
			       .counts = rcounts,
			       .displs = displs,
			       .d = pcori_mpi_type(rtype),
			       .t = rtype};
	const void *in = MPI_IN_PLACE;
	size_t len = 0;
	if (sbuf != MPI_IN_PLACE) {
		const dtype_t *sd = pcori_mpi_type(stype);
		in = pcori_mpi_coll_in(s, sbuf, scount, sd);
		len = (size_t)scount * sd->size;
	}
	pcori_mpi_b_gather(s, in, len, &l, root);
	return pcori_mpi_coll_start(s, comm, request);
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, const int recvcounts[], const int displs[],
		MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	CHECK_INIT("MPI_Gatherv");
	RETURN(comm, "MPI_Gatherv",
	       gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
		       displs, recvtype, root, comm, NULL));
}

static int scatterv(const void *sbuf, const int *scounts, const int *displs,
		    MPI_Datatype stype, void *rbuf, int rcount,
		    MPI_Datatype rtype, int root, MPI_Comm comm,
		    MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = begin(comm, &c, &s);
	if (err)
		return err;
	err = local_ok(rbuf, rcount, rtype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root) {
		err = pcori_mpi_type_ready(stype) ? MPI_SUCCESS : MPI_ERR_TYPE;
		if (!err)
			err = check_counts(c, scounts, displs);
	}
	if (err)
		return abandon(s, err);
	layout_t l = {0};
	if (c->rank == root)
		l = (layout_t){.base = (char *)sbuf,
			       .counts = scounts,
			       .displs = displs,
			       .d = pcori_mpi_type(stype),
			       .t = stype};
	void *out = MPI_IN_PLACE;
	size_t len = 0;
	if (rbuf != MPI_IN_PLACE) {
		out = pcori_mpi_coll_out(s, rbuf, rcount, rtype);
		len = (size_t)rcount * pcori_mpi_type(rtype)->size;
	}
	pcori_mpi_b_scatter(s, &l, out, len, root);
	return pcori_mpi_coll_start(s, comm, request);
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
		 const int displs[], MPI_Datatype sendtype, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	CHECK_INIT("MPI_Scatterv");
	RETURN(comm, "MPI_Scatterv",
	       scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
			recvcount, recvtype, root, comm, NULL));
}

static int allgatherv(const void *sbuf, int scount, MPI_Datatype stype,
		      void *rbuf, const int *rcounts, const int *displs,
		      MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = begin(comm, &c, &s);
	if (err)
		return err;
	err = local_ok(sbuf, scount, stype);
	if (!err && !pcori_mpi_type_ready(rtype))
		err = MPI_ERR_TYPE;
	if (!err)
		err = check_counts(c, rcounts, displs);
	if (err)
		return abandon(s, err);
	layout_t l = {.base = rbuf,
		      .counts = rcounts,
		      .displs = displs,
		      .d = pcori_mpi_type(rtype),
		      .t = rtype};
	const void *in = MPI_IN_PLACE;
	size_t len = 0;
	if (sbuf != MPI_IN_PLACE) {
		const dtype_t *sd = pcori_mpi_type(stype);
		in = pcori_mpi_coll_in(s, sbuf, scount, sd);
		len = (size_t)scount * sd->size;
	}
	pcori_mpi_b_allgather(s, in, len, &l);
	return pcori_mpi_coll_start(s, comm, request);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		   void *recvbuf, const int recvcounts[], const int displs[],
		   MPI_Datatype recvtype, MPI_Comm comm)
{
	CHECK_INIT("MPI_Allgatherv");
	RETURN(comm, "MPI_Allgatherv",
	       allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
			  displs, recvtype, comm, NULL));
}

static int alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
		     MPI_Datatype stype, void *rbuf, const int *rcounts,
		     const int *rdispls, MPI_Datatype rtype, MPI_Comm comm,
		     MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = begin(comm, &c, &s);
	if (err)
		return err;
	if (!pcori_mpi_type_ready(rtype) ||
	    (sbuf != MPI_IN_PLACE && !pcori_mpi_type_ready(stype)))
		err = MPI_ERR_TYPE;
	if (!err)
		err = check_counts(c, rcounts, rdispls);
	if (!err && sbuf != MPI_IN_PLACE)
		err = check_counts(c, scounts, sdispls);
	if (err)
		return abandon(s, err);
	layout_t rl = {.base = rbuf,
		       .counts = rcounts,
		       .displs = rdispls,
		       .d = pcori_mpi_type(rtype),
		       .t = rtype};
	layout_t sl = {.base = (char *)sbuf,
		       .counts = scounts,
		       .displs = sdispls,
		       .d = pcori_mpi_type(stype),
		       .t = stype};
	if (sbuf == MPI_IN_PLACE) {
		/* Send from a copy of the receive side's span. */
		MPI_Aint hi = 0;
		for (int r = 0; r < c->size; r++) {
			MPI_Aint e =
			    ((MPI_Aint)rdispls[r] + rcounts[r]) * rl.d->extent;
			hi = e > hi ? e : hi;
		}
		sl = rl;
		sl.base = pcori_mpi_sched_alloc(s, (size_t)hi);
		if (sl.base)
			memcpy(sl.base, rbuf, (size_t)hi);
	}
	pcori_mpi_b_alltoall(s, &sl, &rl);
	return pcori_mpi_coll_start(s, comm, request);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
		  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
		  const int recvcounts[], const int rdispls[],
		  MPI_Datatype recvtype, MPI_Comm comm)
{
	CHECK_INIT("MPI_Alltoallv");
	RETURN(comm, "MPI_Alltoallv",
	       alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
			 recvcounts, rdispls, recvtype, comm, NULL));
}

/*
 * Reduce-scatter: an allreduce of the whole vector into scratch, then
 * this rank's part copied out (counts NULL: recvcount each).
 */
static int reduce_scatter(const void *sbuf, void *rbuf, int rcount,
			  const int *counts, MPI_Datatype t, MPI_Op op,
			  MPI_Comm comm, MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = begin(comm, &c, &s);
	if (err)
		return err;
	if (!counts && rcount < 0)
		err = MPI_ERR_COUNT;
	if (!err && counts)
		for (int r = 0; r < c->size && !err; r++)
			if (counts[r] < 0)
				err = MPI_ERR_COUNT;
	if (err)
		return abandon(s, err);
	int total = 0, mine = 0;
	for (int r = 0; r < c->size; r++) {
		if (r == c->rank)
			mine = total;
		total += counts ? counts[r] : rcount;
	}
	int my = counts ? counts[c->rank] : rcount;
	MPI_Datatype pt;
	int n;
	err = pcori_mpi_red_type(t, total, op, &pt, &n);
	if (err)
		return abandon(s, err);
	size_t esz = pcori_mpi_type(t)->size;
	char *full = pcori_mpi_sched_alloc(s, (size_t)total * esz);
	pcori_mpi_b_allreduce(s, sbuf == MPI_IN_PLACE ? rbuf : sbuf, full, n,
			      pt, op);
	pcori_mpi_sched_copy(s, full + (size_t)mine * esz, rbuf,
			     (size_t)my * esz);
	return pcori_mpi_coll_start(s, comm, request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
			     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce_scatter_block");
	RETURN(comm, "MPI_Reduce_scatter_block",
	       reduce_scatter(sendbuf, recvbuf, recvcount, NULL, datatype, op,
			      comm, NULL));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
		       const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
		       MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce_scatter");
	if (!recvcounts)
		return FAIL(comm, "MPI_Reduce_scatter", MPI_ERR_ARG);
	RETURN(comm, "MPI_Reduce_scatter",
	       reduce_scatter(sendbuf, recvbuf, 0, recvcounts, datatype, op,
			      comm, NULL));
}

/* ------------------------------------------------------- nonblocking */

#define NB_CHECK(fn, comm, request)                         \
	do {                                                \
		CHECK_INIT(fn);                             \
		if (!(request))                             \
			return FAIL(comm, fn, MPI_ERR_ARG); \
	} while (0)

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, const int recvcounts[], const int displs[],
		 MPI_Datatype recvtype, int root, MPI_Comm comm,
		 MPI_Request *request)
{
	NB_CHECK("MPI_Igatherv", comm, request);
	RETURN(comm, "MPI_Igatherv",
	       gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
		       displs, recvtype, root, comm, request));
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
		  const int displs[], MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
		  MPI_Request *request)
{
	NB_CHECK("MPI_Iscatterv", comm, request);
	RETURN(comm, "MPI_Iscatterv",
	       scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
			recvcount, recvtype, root, comm, request));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		    void *recvbuf, const int recvcounts[], const int displs[],
		    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	NB_CHECK("MPI_Iallgatherv", comm, request);
	RETURN(comm, "MPI_Iallgatherv",
	       allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
			  displs, recvtype, comm, request));
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
		   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
		   const int recvcounts[], const int rdispls[],
		   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	NB_CHECK("MPI_Ialltoallv", comm, request);
	RETURN(comm, "MPI_Ialltoallv",
	       alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
			 recvcounts, rdispls, recvtype, comm, request));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
			      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
			      MPI_Request *request)
{
	NB_CHECK("MPI_Ireduce_scatter_block", comm, request);
	RETURN(comm, "MPI_Ireduce_scatter_block",
	       reduce_scatter(sendbuf, recvbuf, recvcount, NULL, datatype, op,
			      comm, request));
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
			const int recvcounts[], MPI_Datatype datatype,
			MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	NB_CHECK("MPI_Ireduce_scatter", comm, request);
	if (!recvcounts)
		return FAIL(comm, "MPI_Ireduce_scatter", MPI_ERR_ARG);
	RETURN(comm, "MPI_Ireduce_scatter",
	       reduce_scatter(sendbuf, recvbuf, 0, recvcounts, datatype, op,
			      comm, request));
}
