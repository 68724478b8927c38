/*
 * nbr.c -- neighbourhood collectives over a communicator's topology, and
 * MPI_Alltoallw: every block with its own count, type and displacement.
 *
 * One round: a receive from every in-neighbour, a send to every
 * out-neighbour.  On a grid, the block sent towards the positive side of
 * a dimension arrives from the receiver's negative side, so each message
 * is tagged with the side it arrives on: when both sides are the same
 * process (a periodic dimension of two), blocks still land in their
 * places.  Graph edges between the same pair match in order.
 */
#include <stdlib.h>

#include "mpii.h"

typedef struct blkv {
	char *p;
	int count;
	MPI_Datatype t;
} blkv_t;

/* The schedule of one exchange; the entry points fill sb and rb. */
static int exchange(sched_t *s, int nin, const int *in, const blkv_t *rb,
		    int nout, const int *out, const blkv_t *sb, bool cart)
{
	unsigned base = pcori_mpi_sched_stage(s, cart ? nin : 1);
	for (int i = 0; i < nin; i++) {
		if (in[i] == MPI_PROC_NULL)
			continue;
		const dtype_t *d = pcori_mpi_type_ready(rb[i].t);
		if (!d || rb[i].count < 0)
			return d ? MPI_ERR_COUNT : MPI_ERR_TYPE;
		/* Arrives on side i: it left the sender towards side i ^ 1. */
		s->round = (uint8_t)(base + (cart ? (unsigned)(i ^ 1) : 0));
		pcori_mpi_sched_recv(
		    s, in[i],
		    pcori_mpi_coll_out(s, rb[i].p, rb[i].count, rb[i].t),
		    (size_t)rb[i].count * d->size);
	}
	for (int j = 0; j < nout; j++) {
		if (out[j] == MPI_PROC_NULL)
			continue;
		const dtype_t *d = pcori_mpi_type_ready(sb[j].t);
		if (!d || sb[j].count < 0)
			return d ? MPI_ERR_COUNT : MPI_ERR_TYPE;
		s->round = (uint8_t)(base + (cart ? (unsigned)j : 0));
		pcori_mpi_sched_send(
		    s, out[j], pcori_mpi_coll_in(s, sb[j].p, sb[j].count, d),
		    (size_t)sb[j].count * d->size);
	}
	pcori_mpi_sched_fence(s);
	return MPI_SUCCESS;
}

/* Which neighbourhood collective; how its blocks are laid out. */
enum { N_ALLGATHER, N_ALLGATHERV, N_ALLTOALL, N_ALLTOALLV, N_ALLTOALLW };

typedef struct args {
	int kind;
	const void *sbuf;
	int scount;
	const int *scounts;
	const int *sdispls;	/* elements */
	const MPI_Aint *sdispw; /* bytes (w forms) */
	MPI_Datatype stype;
	const MPI_Datatype *stypes;
	void *rbuf;
	int rcount;
	const int *rcounts, *rdispls;
	const MPI_Aint *rdispw;
	MPI_Datatype rtype;
	const MPI_Datatype *rtypes;
} args_t;

static MPI_Aint ext_of(MPI_Datatype t)
{
	const dtype_t *d = pcori_mpi_type(t);
	return d ? d->extent : 0;
}

/* Block k of the send or receive side. */
static blkv_t blk(const args_t *a, bool recv, int k)
{
	char *base = recv ? a->rbuf : (char *)a->sbuf;
	int cnt = recv ? a->rcount : a->scount;
	const int *cnts = recv ? a->rcounts : a->scounts;
	const int *dsp = recv ? a->rdispls : a->sdispls;
	const MPI_Aint *dw = recv ? a->rdispw : a->sdispw;
	MPI_Datatype t = recv ? a->rtype : a->stype;
	switch (a->kind) {
	case N_ALLGATHER:
		return recv ? (blkv_t){base + (MPI_Aint)k * cnt * ext_of(t),
				       cnt, t}
			    : (blkv_t){base, cnt, t};
	case N_ALLGATHERV:
		return recv ? (blkv_t){base + (MPI_Aint)dsp[k] * ext_of(t),
				       cnts[k], t}
			    : (blkv_t){base, cnt, t};
	case N_ALLTOALL:
		return (blkv_t){base + (MPI_Aint)k * cnt * ext_of(t), cnt, t};
	case N_ALLTOALLV:
		return (blkv_t){base + (MPI_Aint)dsp[k] * ext_of(t), cnts[k],
				t};
	default:
		return (blkv_t){base + dw[k], cnts[k],
				recv ? a->rtypes[k] : a->stypes[k]};
	}
}

/* Whether the arrays the kind reads are there for n blocks. */
static bool arrays_ok(const args_t *a, int nin, int nout)
{
	switch (a->kind) {
	case N_ALLGATHERV:
		return !nin || (a->rcounts && a->rdispls);
	case N_ALLTOALLV:
		return (!nin || (a->rcounts && a->rdispls)) &&
		       (!nout || (a->scounts && a->sdispls));
	case N_ALLTOALLW:
		return (!nin || (a->rcounts && a->rdispw && a->rtypes)) &&
		       (!nout || (a->scounts && a->sdispw && a->stypes));
	default:
		return true;
	}
}

/* Any neighbourhood collective (all: Alltoallw over every rank). */
static int run(const args_t *a, bool all, MPI_Comm comm, MPI_Request *request)
{
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return MPI_ERR_COMM;
	int nin, nout, *in = NULL, *out = NULL, err;
	bool cart = false;
	if (all) {
		nin = nout = c->size;
		in = malloc((c->size + 1) * sizeof(int));
		out = malloc((c->size + 1) * sizeof(int));
		err = in && out ? MPI_SUCCESS : MPI_ERR_OTHER;
		for (int r = 0; r < c->size && !err; r++)
			in[r] = out[r] = r;
	} else {
		err = pcori_mpi_topo_nbrs(c, &nin, &in, &nout, &out, &cart);
	}
	blkv_t *rb = NULL, *sb = NULL;
	if (!err && !arrays_ok(a, nin, nout))
		err = MPI_ERR_ARG;
	if (!err) {
		rb = malloc((nin + 1) * sizeof(*rb));
		sb = malloc((nout + 1) * sizeof(*sb));
		err = rb && sb ? MPI_SUCCESS : MPI_ERR_OTHER;
	}
	for (int i = 0; i < nin && !err; i++)
		rb[i] = blk(a, true, i);
	for (int j = 0; j < nout && !err; j++)
		sb[j] = blk(a, false, j);
	sched_t *s = err ? NULL : pcori_mpi_sched_new(c);
	if (!err && !s)
		err = MPI_ERR_OTHER;
	if (!err)
		err = exchange(s, nin, in, rb, nout, out, sb, cart);
	free(in);
	free(out);
	free(rb);
	free(sb);
	if (err) {
		if (s) {
			pcori_mpi_sched_fini(s);
			free(s);
		}
		return err;
	}
	return pcori_mpi_coll_start(s, comm, request);
}

/* Blocking (request NULL) or not (nb: a request pointer is required). */
#define ENTRY(fn, a, nb, comm, request)                         \
	do {                                                    \
		CHECK_INIT(fn);                                 \
		if ((nb) && !(request))                         \
			return FAIL(comm, fn, MPI_ERR_ARG);     \
		RETURN(comm, fn, run(a, false, comm, request)); \
	} while (0)

int MPI_Neighbor_allgather(const void *sendbuf, int sendcount,
			   MPI_Datatype sendtype, void *recvbuf, int recvcount,
			   MPI_Datatype recvtype, MPI_Comm comm)
{
	args_t a = {.kind = N_ALLGATHER,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcount = recvcount,
		    .rtype = recvtype};
	ENTRY("MPI_Neighbor_allgather", &a, false, comm, NULL);
}

int MPI_Ineighbor_allgather(const void *sendbuf, int sendcount,
			    MPI_Datatype sendtype, void *recvbuf, int recvcount,
			    MPI_Datatype recvtype, MPI_Comm comm,
			    MPI_Request *request)
{
	args_t a = {.kind = N_ALLGATHER,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcount = recvcount,
		    .rtype = recvtype};
	ENTRY("MPI_Ineighbor_allgather", &a, true, comm, request);
}

int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount,
			    MPI_Datatype sendtype, void *recvbuf,
			    const int recvcounts[], const int displs[],
			    MPI_Datatype recvtype, MPI_Comm comm)
{
	args_t a = {.kind = N_ALLGATHERV,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcounts = recvcounts,
		    .rdispls = displs,
		    .rtype = recvtype};
	ENTRY("MPI_Neighbor_allgatherv", &a, false, comm, NULL);
}

int MPI_Ineighbor_allgatherv(const void *sendbuf, int sendcount,
			     MPI_Datatype sendtype, void *recvbuf,
			     const int recvcounts[], const int displs[],
			     MPI_Datatype recvtype, MPI_Comm comm,
			     MPI_Request *request)
{
	args_t a = {.kind = N_ALLGATHERV,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcounts = recvcounts,
		    .rdispls = displs,
		    .rtype = recvtype};
	ENTRY("MPI_Ineighbor_allgatherv", &a, true, comm, request);
}

int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount,
			  MPI_Datatype sendtype, void *recvbuf, int recvcount,
			  MPI_Datatype recvtype, MPI_Comm comm)
{
	args_t a = {.kind = N_ALLTOALL,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcount = recvcount,
		    .rtype = recvtype};
	ENTRY("MPI_Neighbor_alltoall", &a, false, comm, NULL);
}

int MPI_Ineighbor_alltoall(const void *sendbuf, int sendcount,
			   MPI_Datatype sendtype, void *recvbuf, int recvcount,
			   MPI_Datatype recvtype, MPI_Comm comm,
			   MPI_Request *request)
{
	args_t a = {.kind = N_ALLTOALL,
		    .sbuf = sendbuf,
		    .scount = sendcount,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcount = recvcount,
		    .rtype = recvtype};
	ENTRY("MPI_Ineighbor_alltoall", &a, true, comm, request);
}

int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[],
			   const int sdispls[], MPI_Datatype sendtype,
			   void *recvbuf, const int recvcounts[],
			   const int rdispls[], MPI_Datatype recvtype,
			   MPI_Comm comm)
{
	args_t a = {.kind = N_ALLTOALLV,
		    .sbuf = sendbuf,
		    .scounts = sendcounts,
		    .sdispls = sdispls,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcounts = recvcounts,
		    .rdispls = rdispls,
		    .rtype = recvtype};
	ENTRY("MPI_Neighbor_alltoallv", &a, false, comm, NULL);
}

int MPI_Ineighbor_alltoallv(const void *sendbuf, const int sendcounts[],
			    const int sdispls[], MPI_Datatype sendtype,
			    void *recvbuf, const int recvcounts[],
			    const int rdispls[], MPI_Datatype recvtype,
			    MPI_Comm comm, MPI_Request *request)
{
	args_t a = {.kind = N_ALLTOALLV,
		    .sbuf = sendbuf,
		    .scounts = sendcounts,
		    .sdispls = sdispls,
		    .stype = sendtype,
		    .rbuf = recvbuf,
		    .rcounts = recvcounts,
		    .rdispls = rdispls,
		    .rtype = recvtype};
	ENTRY("MPI_Ineighbor_alltoallv", &a, true, comm, request);
}

#define W_ARGS                             \
	args_t a = {.kind = N_ALLTOALLW,   \
		    .sbuf = sendbuf,       \
		    .scounts = sendcounts, \
		    .sdispw = sdispls,     \
		    .stypes = sendtypes,   \
		    .rbuf = recvbuf,       \
		    .rcounts = recvcounts, \
		    .rdispw = rdispls,     \
		    .rtypes = recvtypes}

int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[],
			   const MPI_Aint sdispls[],
			   const MPI_Datatype sendtypes[], void *recvbuf,
			   const int recvcounts[], const MPI_Aint rdispls[],
			   const MPI_Datatype recvtypes[], MPI_Comm comm)
{
	W_ARGS;
	ENTRY("MPI_Neighbor_alltoallw", &a, false, comm, NULL);
}

int MPI_Ineighbor_alltoallw(const void *sendbuf, const int sendcounts[],
			    const MPI_Aint sdispls[],
			    const MPI_Datatype sendtypes[], void *recvbuf,
			    const int recvcounts[], const MPI_Aint rdispls[],
			    const MPI_Datatype recvtypes[], MPI_Comm comm,
			    MPI_Request *request)
{
	W_ARGS;
	ENTRY("MPI_Ineighbor_alltoallw", &a, true, comm, request);
}

/* Alltoallw: displacements in bytes, as ints (MPI-3 signature). */
static int alltoallw(const void *sendbuf, const int sendcounts[],
		     const int sdispls[], const MPI_Datatype sendtypes[],
		     void *recvbuf, const int recvcounts[], const int rdispls[],
		     const MPI_Datatype recvtypes[], MPI_Comm comm,
		     MPI_Request *request)
{
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return MPI_ERR_COMM;
	if (sendbuf == MPI_IN_PLACE || !sdispls || !rdispls)
		return MPI_ERR_ARG;
	MPI_Aint *sd = malloc((c->size + 1) * sizeof(*sd));
	MPI_Aint *rd = malloc((c->size + 1) * sizeof(*rd));
	int err = sd && rd ? MPI_SUCCESS : MPI_ERR_OTHER;
	for (int r = 0; r < c->size && !err; r++) {
		sd[r] = sdispls[r];
		rd[r] = rdispls[r];
	}
	args_t a = {.kind = N_ALLTOALLW,
		    .sbuf = sendbuf,
		    .scounts = sendcounts,
		    .sdispw = sd,
		    .stypes = sendtypes,
		    .rbuf = recvbuf,
		    .rcounts = recvcounts,
		    .rdispw = rd,
		    .rtypes = recvtypes};
	if (!err)
		err = run(&a, true, comm, request);
	free(sd);
	free(rd);
	return err;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
		  const int sdispls[], const MPI_Datatype sendtypes[],
		  void *recvbuf, const int recvcounts[], const int rdispls[],
		  const MPI_Datatype recvtypes[], MPI_Comm comm)
{
	CHECK_INIT("MPI_Alltoallw");
	RETURN(comm, "MPI_Alltoallw",
	       alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
			 recvcounts, rdispls, recvtypes, comm, NULL));
}

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
		   const int sdispls[], const MPI_Datatype sendtypes[],
		   void *recvbuf, const int recvcounts[], const int rdispls[],
		   const MPI_Datatype recvtypes[], MPI_Comm comm,
		   MPI_Request *request)
{
	CHECK_INIT("MPI_Ialltoallw");
	if (!request)
		return FAIL(comm, "MPI_Ialltoallw", MPI_ERR_ARG);
	RETURN(comm, "MPI_Ialltoallw",
	       alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
			 recvcounts, rdispls, recvtypes, comm, request));
}
