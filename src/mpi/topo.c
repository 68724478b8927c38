/*
 * topo.c -- process topologies: Cartesian grids and distributed graphs
 * kept beside a communicator (no reordering: ranks stay where they are).
 */
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

/* Marker arrays: only their addresses mean something. */
int pcor_mpi_unweighted_[1], pcor_mpi_weights_empty_[1];

typedef struct topo {
	int kind; /* MPI_CART or MPI_DIST_GRAPH */
	int ndims;
	int *dims, *periods;
	int indeg, outdeg;
	int *src, *srcw, *dst, *dstw;
	bool weighted;
} topo_t;

void pcori_mpi_topo_free(topo_t *t)
{
	if (!t)
		return;
	free(t->dims);
	free(t->periods);
	free(t->src);
	free(t->srcw);
	free(t->dst);
	free(t->dstw);
	free(t);
}

/* A copy of n ints (NULL stays NULL; n may be 0). */
static int *dup_ints(const int *a, int n)
{
	int *p = malloc((n + 1) * sizeof(int));
	if (p && a && n)
		memcpy(p, a, n * sizeof(int));
	return p;
}

int MPI_Dims_create(int nnodes, int ndims, int dims[])
{
	if (nnodes < 1 || ndims < 0 || (ndims && !dims))
		return FAIL(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_ARG);
	int rest = nnodes, nfree = 0;
	for (int i = 0; i < ndims; i++) {
		if (dims[i] < 0)
			return FAIL(MPI_COMM_WORLD, "MPI_Dims_create",
				    MPI_ERR_ARG);
		if (dims[i] == 0) {
			nfree++;
		} else if (rest % dims[i]) {
			return FAIL(MPI_COMM_WORLD, "MPI_Dims_create",
				    MPI_ERR_ARG);
		} else {
			rest /= dims[i];
		}
	}
	if (!nfree)
		return rest == 1 ? MPI_SUCCESS
				 : FAIL(MPI_COMM_WORLD, "MPI_Dims_create",
					MPI_ERR_ARG);
	/* Largest prime factors first, each to the smallest free dim. */
	int *f = calloc(nfree, sizeof(int)), nf = 0;
	if (!f)
		return FAIL(MPI_COMM_WORLD, "MPI_Dims_create", MPI_ERR_OTHER);
	for (int i = 0; i < nfree; i++)
		f[i] = 1;
	int primes[32], np = 0;
	for (int p = 2; rest > 1 && np < 32;) {
		if (p * p > rest) {
			primes[np++] = rest;
			break;
		}
		if (rest % p == 0) {
			primes[np++] = p;
			rest /= p;
		} else {
			p++;
		}
	}
	for (int k = np - 1; k >= 0; k--) {
		int lo = 0;
		for (int i = 1; i < nfree; i++)
			if (f[i] < f[lo])
				lo = i;
		f[lo] *= primes[k];
	}
	/* Free dims in non-increasing order. */
	for (int i = 0; i < nfree; i++)
		for (int j = i + 1; j < nfree; j++)
			if (f[j] > f[i]) {
				int x = f[i];
				f[i] = f[j];
				f[j] = x;
			}
	for (int i = 0; i < ndims; i++)
		if (dims[i] == 0)
			dims[i] = f[nf++];
	free(f);
	return MPI_SUCCESS;
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[],
		    const int periods[], int reorder, MPI_Comm *comm_cart)
{
	CHECK_INIT("MPI_Cart_create");
	(void)reorder;
	comm_t *c = pcori_mpi_comm(comm_old);
	if (!c)
		return FAIL(comm_old, "MPI_Cart_create", MPI_ERR_COMM);
	if (ndims < 0 || (ndims && (!dims || !periods)) || !comm_cart)
		return FAIL(comm_old, "MPI_Cart_create", MPI_ERR_ARG);
	long prod = 1;
	for (int i = 0; i < ndims; i++) {
		if (dims[i] <= 0)
			return FAIL(comm_old, "MPI_Cart_create", MPI_ERR_ARG);
		prod *= dims[i];
		if (prod > c->size)
			return FAIL(comm_old, "MPI_Cart_create", MPI_ERR_ARG);
	}
	/* The first prod ranks form the grid, the others get nothing. */
	int rc = MPI_Comm_split(comm_old, c->rank < prod ? 0 : MPI_UNDEFINED,
				c->rank, comm_cart);
	if (rc || *comm_cart == MPI_COMM_NULL)
		return rc;
	topo_t *t = calloc(1, sizeof(*t));
	if (t) {
		t->kind = MPI_CART;
		t->ndims = ndims;
		t->dims = dup_ints(dims, ndims);
		t->periods = dup_ints(periods, ndims);
	}
	if (!t || !t->dims || !t->periods) {
		pcori_mpi_topo_free(t);
		MPI_Comm_free(comm_cart);
		return FAIL(comm_old, "MPI_Cart_create", MPI_ERR_OTHER);
	}
	pcori_mpi_comm(*comm_cart)->topo = t;
	return MPI_SUCCESS;
}

/* The Cartesian layout of comm, or NULL (error class in *err). */
static topo_t *cart_of(MPI_Comm comm, int *err)
{
	comm_t *c = pcori_mpi_comm(comm);
	*err = !c ? MPI_ERR_COMM : MPI_ERR_TOPOLOGY;
	return c && c->topo && c->topo->kind == MPI_CART ? c->topo : NULL;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
	CHECK_INIT("MPI_Cartdim_get");
	int err;
	topo_t *t = cart_of(comm, &err);
	if (!t || !ndims)
		return FAIL(comm, "MPI_Cartdim_get", t ? MPI_ERR_ARG : err);
	*ndims = t->ndims;
	return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[],
		 int coords[])
{
	CHECK_INIT("MPI_Cart_get");
	int err;
	topo_t *t = cart_of(comm, &err);
	if (!t)
		return FAIL(comm, "MPI_Cart_get", err);
	if (maxdims < t->ndims || (t->ndims && (!dims || !periods || !coords)))
		return FAIL(comm, "MPI_Cart_get", MPI_ERR_ARG);
	memcpy(dims, t->dims, t->ndims * sizeof(int));
	memcpy(periods, t->periods, t->ndims * sizeof(int));
	return MPI_Cart_coords(comm, pcori_mpi_comm(comm)->rank, maxdims,
			       coords);
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
	CHECK_INIT("MPI_Cart_coords");
	int err;
	topo_t *t = cart_of(comm, &err);
	if (!t)
		return FAIL(comm, "MPI_Cart_coords", err);
	if (rank < 0 || rank >= pcori_mpi_comm(comm)->size)
		return FAIL(comm, "MPI_Cart_coords", MPI_ERR_RANK);
	if (maxdims < t->ndims || (t->ndims && !coords))
		return FAIL(comm, "MPI_Cart_coords", MPI_ERR_ARG);
	/* Row-major: the last dimension varies fastest. */
	for (int i = t->ndims - 1; i >= 0; i--) {
		coords[i] = rank % t->dims[i];
		rank /= t->dims[i];
	}
	return MPI_SUCCESS;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
	CHECK_INIT("MPI_Cart_rank");
	int err;
	topo_t *t = cart_of(comm, &err);
	if (!t)
		return FAIL(comm, "MPI_Cart_rank", err);
	if ((t->ndims && !coords) || !rank)
		return FAIL(comm, "MPI_Cart_rank", MPI_ERR_ARG);
	int r = 0;
	for (int i = 0; i < t->ndims; i++) {
		int x = coords[i], d = t->dims[i];
		if (t->periods[i])
			x = ((x % d) + d) % d;
		else if (x < 0 || x >= d)
			return FAIL(comm, "MPI_Cart_rank", MPI_ERR_ARG);
		r = r * d + x;
	}
	*rank = r;
	return MPI_SUCCESS;
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source,
		   int *rank_dest)
{
	CHECK_INIT("MPI_Cart_shift");
	int err;
	topo_t *t = cart_of(comm, &err);
	if (!t)
		return FAIL(comm, "MPI_Cart_shift", err);
	if (direction < 0 || direction >= t->ndims || !rank_source ||
	    !rank_dest)
		return FAIL(comm, "MPI_Cart_shift", MPI_ERR_ARG);
	int c[64];
	if (t->ndims > 64)
		return FAIL(comm, "MPI_Cart_shift", MPI_ERR_ARG);
	MPI_Cart_coords(comm, pcori_mpi_comm(comm)->rank, t->ndims, c);
	int me = c[direction], d = t->dims[direction];
	int *out[2] = {rank_source, rank_dest};
	for (int k = 0; k < 2; k++) {
		int x = me + (k ? disp : -disp);
		if (t->periods[direction])
			x = ((x % d) + d) % d;
		if (x < 0 || x >= d) {
			*out[k] = MPI_PROC_NULL;
			continue;
		}
		c[direction] = x;
		MPI_Cart_rank(comm, c, out[k]);
	}
	return MPI_SUCCESS;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree,
				   const int sources[],
				   const int sourceweights[], int outdegree,
				   const int destinations[],
				   const int destweights[], MPI_Info info,
				   int reorder, MPI_Comm *comm_dist_graph)
{
	CHECK_INIT("MPI_Dist_graph_create_adjacent");
	(void)info;
	(void)reorder;
	const char *fn = "MPI_Dist_graph_create_adjacent";
	comm_t *c = pcori_mpi_comm(comm_old);
	if (!c)
		return FAIL(comm_old, fn, MPI_ERR_COMM);
	if (indegree < 0 || outdegree < 0 || !comm_dist_graph ||
	    (indegree && !sources) || (outdegree && !destinations))
		return FAIL(comm_old, fn, MPI_ERR_ARG);
	for (int i = 0; i < indegree; i++)
		if (sources[i] < 0 || sources[i] >= c->size)
			return FAIL(comm_old, fn, MPI_ERR_RANK);
	for (int i = 0; i < outdegree; i++)
		if (destinations[i] < 0 || destinations[i] >= c->size)
			return FAIL(comm_old, fn, MPI_ERR_RANK);
	bool w = sourceweights != MPI_UNWEIGHTED;
	int rc = MPI_Comm_dup(comm_old, comm_dist_graph);
	if (rc)
		return rc;
	topo_t *t = calloc(1, sizeof(*t));
	if (t) {
		t->kind = MPI_DIST_GRAPH;
		t->indeg = indegree;
		t->outdeg = outdegree;
		t->weighted = w;
		t->src = dup_ints(sources, indegree);
		t->dst = dup_ints(destinations, outdegree);
		t->srcw = dup_ints(w && sourceweights != MPI_WEIGHTS_EMPTY
				       ? sourceweights
				       : NULL,
				   indegree);
		t->dstw = dup_ints(
		    w && destweights != MPI_WEIGHTS_EMPTY ? destweights : NULL,
		    outdegree);
	}
	if (!t || !t->src || !t->dst || !t->srcw || !t->dstw) {
		pcori_mpi_topo_free(t);
		MPI_Comm_free(comm_dist_graph);
		return FAIL(comm_old, fn, MPI_ERR_OTHER);
	}
	pcori_mpi_comm(*comm_dist_graph)->topo = t;
	return MPI_SUCCESS;
}

static topo_t *graph_of(MPI_Comm comm, int *err)
{
	comm_t *c = pcori_mpi_comm(comm);
	*err = !c ? MPI_ERR_COMM : MPI_ERR_TOPOLOGY;
	return c && c->topo && c->topo->kind == MPI_DIST_GRAPH ? c->topo : NULL;
}

int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int *indegree, int *outdegree,
				   int *weighted)
{
	CHECK_INIT("MPI_Dist_graph_neighbors_count");
	int err;
	topo_t *t = graph_of(comm, &err);
	if (!t || !indegree || !outdegree || !weighted)
		return FAIL(comm, "MPI_Dist_graph_neighbors_count",
			    t ? MPI_ERR_ARG : err);
	*indegree = t->indeg;
	*outdegree = t->outdeg;
	*weighted = t->weighted;
	return MPI_SUCCESS;
}

int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[],
			     int sourceweights[], int maxoutdegree,
			     int destinations[], int destweights[])
{
	CHECK_INIT("MPI_Dist_graph_neighbors");
	int err;
	topo_t *t = graph_of(comm, &err);
	if (!t)
		return FAIL(comm, "MPI_Dist_graph_neighbors", err);
	if (maxindegree < t->indeg || maxoutdegree < t->outdeg ||
	    (t->indeg && !sources) || (t->outdeg && !destinations))
		return FAIL(comm, "MPI_Dist_graph_neighbors", MPI_ERR_ARG);
	memcpy(sources, t->src, t->indeg * sizeof(int));
	memcpy(destinations, t->dst, t->outdeg * sizeof(int));
	if (t->weighted && sourceweights && sourceweights != MPI_UNWEIGHTED)
		memcpy(sourceweights, t->srcw, t->indeg * sizeof(int));
	if (t->weighted && destweights && destweights != MPI_UNWEIGHTED)
		memcpy(destweights, t->dstw, t->outdeg * sizeof(int));
	return MPI_SUCCESS;
}

int MPI_Topo_test(MPI_Comm comm, int *status)
{
	CHECK_INIT("MPI_Topo_test");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c || !status)
		return FAIL(comm, "MPI_Topo_test",
			    c ? MPI_ERR_ARG : MPI_ERR_COMM);
	*status = c->topo ? c->topo->kind : MPI_UNDEFINED;
	return MPI_SUCCESS;
}

int pcori_mpi_topo_nbrs(const comm_t *c, int *nin_p, int **in_p, int *nout_p,
			int **out_p, bool *cart_p)
{
	const topo_t *t = c->topo;
	if (!t)
		return MPI_ERR_TOPOLOGY;
	if (t->kind == MPI_DIST_GRAPH) {
		*in_p = dup_ints(t->src, t->indeg);
		*out_p = dup_ints(t->dst, t->outdeg);
		*nin_p = t->indeg;
		*nout_p = t->outdeg;
		*cart_p = false;
	} else {
		/* Per dimension: the negative side, then the positive one. */
		int n = 2 * t->ndims, co[64];
		if (t->ndims > 64)
			return MPI_ERR_TOPOLOGY;
		*in_p = malloc((n + 1) * sizeof(int));
		*out_p = malloc((n + 1) * sizeof(int));
		if (*in_p && *out_p) {
			int r = c->rank;
			for (int i = t->ndims - 1; i >= 0; i--) {
				co[i] = r % t->dims[i];
				r /= t->dims[i];
			}
			for (int d = 0; d < t->ndims; d++)
				for (int s = 0; s < 2; s++) {
					int x = co[d] + (s ? 1 : -1),
					    sz = t->dims[d];
					int nb = MPI_PROC_NULL;
					if (t->periods[d])
						x = (x + sz) % sz;
					if (x >= 0 && x < sz) {
						nb = 0;
						for (int k = 0; k < t->ndims;
						     k++)
							nb = nb * t->dims[k] +
							     (k == d ? x
								     : co[k]);
					}
					(*in_p)[2 * d + s] =
					    (*out_p)[2 * d + s] = nb;
				}
		}
		*nin_p = *nout_p = n;
		*cart_p = true;
	}
	if (!*in_p || !*out_p) {
		free(*in_p);
		free(*out_p);
		return MPI_ERR_OTHER;
	}
	return MPI_SUCCESS;
}
