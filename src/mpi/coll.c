/*
 * coll.c -- collective algorithms as schedules, and the blocking and
 * nonblocking entry points built on them.
 *
 * Algorithms here: ring allgather; recursive-doubling scan; gather,
 * scatter and all-to-all with every message of a round posted at once.
 * Barrier, broadcast, reduce and allreduce (flat or by host): tree.c.
 */
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

/* ------------------------------------------------------------ helpers */

/* Bytes of count elements of d at buf to send: in place or packed now. */
const void *pcori_mpi_coll_in(sched_t *s, const void *buf, int count,
			      const dtype_t *d)
{
	MPI_Aint off;
	if (pcori_mpi_type_contig(d, count, &off))
		return (const char *)buf + off;
	void *p = pcori_mpi_sched_alloc(s, (size_t)count * d->size);
	if (p)
		pcori_mpi_pack(buf, count, d, p);
	return p;
}

/* Where count elements of type t at buf are received (unpacked last). */
void *pcori_mpi_coll_out(sched_t *s, void *buf, int count, MPI_Datatype t)
{
	const dtype_t *d = pcori_mpi_type(t);
	MPI_Aint off;
	if (pcori_mpi_type_contig(d, count, &off))
		return (char *)buf + off;
	size_t len = (size_t)count * d->size;
	void *p = pcori_mpi_sched_alloc(s, len);
	if (p)
		pcori_mpi_sched_unpack(s, p, len, buf, count, t);
	return p;
}

int pcori_mpi_coll_start(sched_t *s, MPI_Comm comm, MPI_Request *request)
{
	if (!request) {
		int err = pcori_mpi_sched_progress(s, true);
		pcori_mpi_sched_fini(s);
		free(s);
		return err;
	}
	req_t *r = pcori_mpi_req_new(request);
	if (!r) {
		pcori_mpi_sched_fini(s);
		free(s);
		return MPI_ERR_OTHER;
	}
	r->kind = R_COLL;
	r->comm = comm;
	r->sched = s;
	/* Post the first round now: peers may be waiting for it. */
	int err = pcori_mpi_sched_progress(s, false);
	if (err > 0) {
		pcori_mpi_req_free(*request);
		*request = MPI_REQUEST_NULL;
		return err;
	}
	return MPI_SUCCESS;
}

sched_t *pcori_mpi_sched_new(comm_t *c)
{
	sched_t *s = malloc(sizeof(*s));
	if (s)
		pcori_mpi_sched_init(s, c);
	return s;
}

int pcori_mpi_red_type(MPI_Datatype t, int count, MPI_Op op, MPI_Datatype *pt,
		       int *pn)
{
	dtype_t *d = pcori_mpi_type_ready(t);
	MPI_Aint off;
	if (!d)
		return MPI_ERR_TYPE;
	if (!pcori_mpi_op_ok(op))
		return MPI_ERR_OP;
	if (!pcori_mpi_type_contig(d, count, &off) || off != 0)
		return MPI_ERR_TYPE;
	if (op >= MPI_MAX && op <= MPI_MAXLOC) {
		if (!d->prim)
			return MPI_ERR_TYPE;
		*pt = d->prim;
		*pn = (int)((size_t)count * d->nprim);
	} else {
		*pt = t; /* user functions see the caller's type */
		*pn = count;
	}
	return MPI_SUCCESS;
}

/* --------------------------------------------------------- algorithms */

static int lay_count(const layout_t *l, int r)
{
	return l->counts ? l->counts[r] : l->count;
}

static char *lay_at(const layout_t *l, int r)
{
	MPI_Aint e = l->displs ? l->displs[r] : (MPI_Aint)r * l->count;
	return l->base + e * l->d->extent;
}

/* Gather: the root receives every block (its own copied). */
void pcori_mpi_b_gather(sched_t *s, const void *in, size_t inlen,
			const layout_t *l, int root)
{
	comm_t *c = s->c;
	pcori_mpi_sched_stage(s, 1);
	if (c->rank != root) {
		pcori_mpi_sched_send(s, root, in, inlen);
		pcori_mpi_sched_fence(s);
		return;
	}
	for (int r = 0; r < c->size; r++) {
		int cnt = lay_count(l, r);
		void *at = pcori_mpi_coll_out(s, lay_at(l, r), cnt, l->t);
		if (r == root) {
			if (in != MPI_IN_PLACE)
				pcori_mpi_sched_copy(s, in, at, inlen);
		} else {
			pcori_mpi_sched_recv(s, r, at,
					     (size_t)cnt * l->d->size);
		}
	}
	pcori_mpi_sched_fence(s);
}

/* Scatter: the root sends every block (its own copied). */
void pcori_mpi_b_scatter(sched_t *s, const layout_t *l, void *out,
			 size_t outlen, int root)
{
	comm_t *c = s->c;
	pcori_mpi_sched_stage(s, 1);
	if (c->rank != root) {
		pcori_mpi_sched_recv(s, root, out, outlen);
		pcori_mpi_sched_fence(s);
		return;
	}
	for (int r = 0; r < c->size; r++) {
		int cnt = lay_count(l, r);
		const void *at = pcori_mpi_coll_in(s, lay_at(l, r), cnt, l->d);
		if (r == root) {
			if (out != MPI_IN_PLACE)
				pcori_mpi_sched_copy(s, at, out, outlen);
		} else {
			pcori_mpi_sched_send(s, r, at,
					     (size_t)cnt * l->d->size);
		}
	}
	pcori_mpi_sched_fence(s);
}

/*
 * Allgather on a ring: in round k, pass on to the right the block that
 * came from k ranks to the left.  Blocks are packed in scratch when the
 * layout is not contiguous, and unpacked at the end.
 */
void pcori_mpi_b_allgather(sched_t *s, const void *in, size_t inlen,
			   const layout_t *l)
{
	comm_t *c = s->c;
	int n = c->size, r = c->rank;
	void **blk = pcori_mpi_sched_alloc(s, n * sizeof(void *));
	if (!blk)
		return;
	for (int q = 0; q < n; q++)
		blk[q] =
		    pcori_mpi_coll_out(s, lay_at(l, q), lay_count(l, q), l->t);
	if (in != MPI_IN_PLACE)
		pcori_mpi_sched_copy(s, in, blk[r], inlen);
	else if (blk[r] != lay_at(l, r))
		pcori_mpi_pack(lay_at(l, r), lay_count(l, r), l->d, blk[r]);
	unsigned base = pcori_mpi_sched_stage(s, n);
	for (int k = 0; k < n - 1; k++) {
		int sb = (r - k + n) % n, rb = (r - k - 1 + n) % n;
		s->round = (uint8_t)(base + k);
		pcori_mpi_sched_recv(s, (r - 1 + n) % n, blk[rb],
				     (size_t)lay_count(l, rb) * l->d->size);
		pcori_mpi_sched_send(s, (r + 1) % n, blk[sb],
				     (size_t)lay_count(l, sb) * l->d->size);
		pcori_mpi_sched_fence(s);
	}
}

/* All-to-all: every receive and send of one round at once. */
void pcori_mpi_b_alltoall(sched_t *s, const layout_t *sl, const layout_t *rl)
{
	comm_t *c = s->c;
	int n = c->size, me = c->rank;
	pcori_mpi_sched_stage(s, 1);
	for (int k = 1; k < n; k++) {
		int r = (me - k + n) % n;
		int cnt = lay_count(rl, r);
		pcori_mpi_sched_recv(
		    s, r, pcori_mpi_coll_out(s, lay_at(rl, r), cnt, rl->t),
		    (size_t)cnt * rl->d->size);
	}
	const void *own =
	    pcori_mpi_coll_in(s, lay_at(sl, me), lay_count(sl, me), sl->d);
	pcori_mpi_sched_copy(
	    s, own,
	    pcori_mpi_coll_out(s, lay_at(rl, me), lay_count(rl, me), rl->t),
	    (size_t)lay_count(sl, me) * sl->d->size);
	for (int k = 1; k < n; k++) {
		int r = (me + k) % n;
		int cnt = lay_count(sl, r);
		pcori_mpi_sched_send(
		    s, r, pcori_mpi_coll_in(s, lay_at(sl, r), cnt, sl->d),
		    (size_t)cnt * sl->d->size);
	}
	pcori_mpi_sched_fence(s);
}

/*
 * Prefix reduction by recursive doubling: after round k a rank holds the
 * fold of the 2^k ranks ending at it (partial) and of the ones below it
 * (result).  Exclusive: the result starts empty.
 */
static void b_scan(sched_t *s, const void *in, void *out, int count,
		   MPI_Datatype t, MPI_Op op, bool excl)
{
	comm_t *c = s->c;
	int n = c->size, r = c->rank;
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	unsigned base = pcori_mpi_sched_stage(s, 32);
	void *partial = pcori_mpi_sched_alloc(s, len);
	pcori_mpi_sched_copy(s, in, partial, len);
	bool have = !excl;
	if (!excl)
		pcori_mpi_sched_copy(s, in, out, len);
	for (int mask = 1, i = 0; mask < n; mask <<= 1, i++) {
		int peer = r ^ mask;
		if (peer >= n)
			continue;
		void *tmp = pcori_mpi_sched_alloc(s, len);
		s->round = (uint8_t)(base + i);
		pcori_mpi_sched_recv(s, peer, tmp, len);
		pcori_mpi_sched_send(s, peer, partial, len);
		pcori_mpi_sched_fence(s);
		if (peer < r) {
			/* tmp folds ranks below everything we hold. */
			if (have) {
				pcori_mpi_sched_reduce(s, op, t, tmp, out,
						       count);
			} else {
				pcori_mpi_sched_copy(s, tmp, out, len);
				have = true;
			}
			pcori_mpi_sched_reduce(s, op, t, tmp, partial, count);
		} else {
			pcori_mpi_sched_reduce(s, op, t, partial, tmp, count);
			partial = tmp;
		}
	}
	pcori_mpi_sched_fence(s);
}

/* ------------------------------------------------ internal blocking use */

int pcori_mpi_allreduce_c(comm_t *c, const void *sbuf, void *rbuf, int count,
			  MPI_Datatype t, MPI_Op op)
{
	sched_t *s = pcori_mpi_sched_new(c);
	if (!s)
		return MPI_ERR_OTHER;
	pcori_mpi_b_allreduce(s, sbuf, rbuf, count, t, op);
	return pcori_mpi_coll_start(s, MPI_COMM_NULL, NULL);
}

int pcori_mpi_allgather_c(comm_t *c, const void *sbuf, void *rbuf, size_t len)
{
	sched_t *s = pcori_mpi_sched_new(c);
	if (!s)
		return MPI_ERR_OTHER;
	layout_t l = {.base = rbuf,
		      .count = (int)len,
		      .d = pcori_mpi_type(MPI_BYTE),
		      .t = MPI_BYTE};
	pcori_mpi_b_allgather(s, sbuf, len, &l);
	return pcori_mpi_coll_start(s, MPI_COMM_NULL, NULL);
}

/* --------------------------------------------------------- entry points */

/* Validate comm (and count/type when given); the schedule, or an error. */
static int coll_begin(MPI_Comm comm, int count, MPI_Datatype t, comm_t **c_p,
		      sched_t **s_p)
{
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return MPI_ERR_COMM;
	if (count < 0)
		return MPI_ERR_COUNT;
	if (t != MPI_DATATYPE_NULL && !pcori_mpi_type_ready(t))
		return MPI_ERR_TYPE;
	*s_p = pcori_mpi_sched_new(c);
	*c_p = c;
	return *s_p ? MPI_SUCCESS : MPI_ERR_OTHER;
}

static int barrier(MPI_Comm comm, MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = coll_begin(comm, 0, MPI_DATATYPE_NULL, &c, &s);
	if (err)
		return err;
	pcori_mpi_b_barrier(s);
	return pcori_mpi_coll_start(s, comm, request);
}

static int bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm,
		 MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = coll_begin(comm, count, t, &c, &s);
	if (err)
		return err;
	if (root < 0 || root >= c->size) {
		pcori_mpi_sched_fini(s);
		free(s);
		return MPI_ERR_ROOT;
	}
	dtype_t *d = pcori_mpi_type(t);
	size_t len = (size_t)count * d->size;
	void *data = c->rank == root
			 ? (void *)pcori_mpi_coll_in(s, buf, count, d)
			 : pcori_mpi_coll_out(s, buf, count, t);
	pcori_mpi_b_bcast(s, data, len, root);
	return pcori_mpi_coll_start(s, comm, request);
}

static int reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t,
		  MPI_Op op, int root, bool all, MPI_Comm comm,
		  MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	MPI_Datatype pt;
	int n;
	int err = coll_begin(comm, count, t, &c, &s);
	if (err)
		return err;
	err = pcori_mpi_red_type(t, count, op, &pt, &n);
	if (!err && !all && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && (!rbuf && count && (all || c->rank == root)))
		err = MPI_ERR_BUFFER;
	if (err) {
		pcori_mpi_sched_fini(s);
		free(s);
		return err;
	}
	if (sbuf == MPI_IN_PLACE)
		sbuf = rbuf;
	if (all)
		pcori_mpi_b_allreduce(s, sbuf, rbuf, n, pt, op);
	else
		pcori_mpi_b_reduce(s, sbuf, rbuf, n, pt, op, root);
	return pcori_mpi_coll_start(s, comm, request);
}

static int scan(const void *sbuf, void *rbuf, int count, MPI_Datatype t,
		MPI_Op op, bool excl, MPI_Comm comm)
{
	comm_t *c;
	sched_t *s;
	MPI_Datatype pt;
	int n;
	int err = coll_begin(comm, count, t, &c, &s);
	if (!err && (err = pcori_mpi_red_type(t, count, op, &pt, &n))) {
		pcori_mpi_sched_fini(s);
		free(s);
	}
	if (err)
		return err;
	b_scan(s, sbuf == MPI_IN_PLACE ? rbuf : sbuf, rbuf, n, pt, op, excl);
	return pcori_mpi_coll_start(s, comm, NULL);
}

/* Gather / scatter of uniform blocks (v forms: collv.c). */
static int gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		  int rcount, MPI_Datatype rtype, int root, bool scatter,
		  MPI_Comm comm, MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	bool inplace = scatter ? rbuf == MPI_IN_PLACE : sbuf == MPI_IN_PLACE;
	/* The local side: what this rank sends (gather) or gets (scatter). */
	int lcount = scatter ? rcount : scount;
	MPI_Datatype ltype = scatter ? rtype : stype;
	int err = coll_begin(comm, inplace ? 0 : lcount,
			     inplace ? MPI_DATATYPE_NULL : ltype, &c, &s);
	if (err)
		return err;
	if (root < 0 || root >= c->size)
		err = MPI_ERR_ROOT;
	int bcount = scatter ? scount : rcount;
	MPI_Datatype btype = scatter ? stype : rtype;
	if (!err && c->rank == root &&
	    (bcount < 0 || !pcori_mpi_type_ready(btype)))
		err = bcount < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE;
	if (!err && c->rank == root && !inplace &&
	    (size_t)bcount * pcori_mpi_type(btype)->size !=
		(size_t)lcount * pcori_mpi_type(ltype)->size)
		err = MPI_ERR_TRUNCATE;
	if (err) {
		pcori_mpi_sched_fini(s);
		free(s);
		return err;
	}
	dtype_t *ld = inplace ? NULL : pcori_mpi_type(ltype);
	size_t llen = inplace ? 0 : (size_t)lcount * ld->size;
	layout_t l = {0};
	if (c->rank == root)
		l = (layout_t){.base = scatter ? (char *)sbuf : rbuf,
			       .count = bcount,
			       .d = pcori_mpi_type(btype),
			       .t = btype};
	if (scatter)
		pcori_mpi_b_scatter(
		    s, &l,
		    inplace ? MPI_IN_PLACE
			    : pcori_mpi_coll_out(s, rbuf, lcount, ltype),
		    llen, root);
	else
		pcori_mpi_b_gather(s,
				   inplace
				       ? MPI_IN_PLACE
				       : pcori_mpi_coll_in(s, sbuf, lcount, ld),
				   llen, &l, root);
	return pcori_mpi_coll_start(s, comm, request);
}

static int allgather(const void *sbuf, int scount, MPI_Datatype stype,
		     void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
		     MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	bool inplace = sbuf == MPI_IN_PLACE;
	int err = coll_begin(comm, rcount, rtype, &c, &s);
	if (err)
		return err;
	dtype_t *sd = inplace ? NULL : pcori_mpi_type_ready(stype);
	dtype_t *rd = pcori_mpi_type(rtype);
	if (!inplace && (!sd || scount < 0))
		err = scount < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE;
	else if (!inplace &&
		 (size_t)scount * sd->size != (size_t)rcount * rd->size)
		err = MPI_ERR_TRUNCATE;
	if (err) {
		pcori_mpi_sched_fini(s);
		free(s);
		return err;
	}
	layout_t l = {.base = rbuf, .count = rcount, .d = rd, .t = rtype};
	pcori_mpi_b_allgather(
	    s, inplace ? MPI_IN_PLACE : pcori_mpi_coll_in(s, sbuf, scount, sd),
	    inplace ? 0 : (size_t)scount * sd->size, &l);
	return pcori_mpi_coll_start(s, comm, request);
}

static int alltoall(const void *sbuf, int scount, MPI_Datatype stype,
		    void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
		    MPI_Request *request)
{
	comm_t *c;
	sched_t *s;
	int err = coll_begin(comm, rcount, rtype, &c, &s);
	if (err)
		return err;
	dtype_t *rd = pcori_mpi_type(rtype), *sd = rd;
	if (sbuf == MPI_IN_PLACE) {
		/* Send from a copy of the receive buffer. */
		size_t all = (size_t)rcount * c->size * rd->extent;
		void *copy = pcori_mpi_sched_alloc(s, all);
		if (copy)
			memcpy(copy, rbuf, all);
		sbuf = copy;
		scount = rcount;
		stype = rtype;
	} else if (!(sd = pcori_mpi_type_ready(stype)) || scount < 0) {
		err = scount < 0 ? MPI_ERR_COUNT : MPI_ERR_TYPE;
	} else if ((size_t)scount * sd->size != (size_t)rcount * rd->size) {
		err = MPI_ERR_TRUNCATE;
	}
	if (err) {
		pcori_mpi_sched_fini(s);
		free(s);
		return err;
	}
	layout_t sl = {
	    .base = (char *)sbuf, .count = scount, .d = sd, .t = stype};
	layout_t rl = {.base = rbuf, .count = rcount, .d = rd, .t = rtype};
	pcori_mpi_b_alltoall(s, &sl, &rl);
	return pcori_mpi_coll_start(s, comm, request);
}

#define ENTRY(fn, comm, call) RETURN(comm, fn, call)

int MPI_Barrier(MPI_Comm comm)
{
	CHECK_INIT("MPI_Barrier");
	ENTRY("MPI_Barrier", comm, barrier(comm, NULL));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Ibarrier");
	if (!request)
		return FAIL(comm, "MPI_Ibarrier", MPI_ERR_ARG);
	ENTRY("MPI_Ibarrier", comm, barrier(comm, request));
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
	      MPI_Comm comm)
{
	CHECK_INIT("MPI_Bcast");
	ENTRY("MPI_Bcast", comm,
	      bcast(buffer, count, datatype, root, comm, NULL));
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root,
	       MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Ibcast");
	if (!request)
		return FAIL(comm, "MPI_Ibcast", MPI_ERR_ARG);
	ENTRY("MPI_Ibcast", comm,
	      bcast(buffer, count, datatype, root, comm, request));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce");
	ENTRY("MPI_Reduce", comm,
	      reduce(sendbuf, recvbuf, count, datatype, op, root, false, comm,
		     NULL));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
		MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
		MPI_Request *request)
{
	CHECK_INIT("MPI_Ireduce");
	if (!request)
		return FAIL(comm, "MPI_Ireduce", MPI_ERR_ARG);
	ENTRY("MPI_Ireduce", comm,
	      reduce(sendbuf, recvbuf, count, datatype, op, root, false, comm,
		     request));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
		  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Allreduce");
	ENTRY(
	    "MPI_Allreduce", comm,
	    reduce(sendbuf, recvbuf, count, datatype, op, 0, true, comm, NULL));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
		   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
		   MPI_Request *request)
{
	CHECK_INIT("MPI_Iallreduce");
	if (!request)
		return FAIL(comm, "MPI_Iallreduce", MPI_ERR_ARG);
	ENTRY("MPI_Iallreduce", comm,
	      reduce(sendbuf, recvbuf, count, datatype, op, 0, true, comm,
		     request));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
	       void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
	       MPI_Comm comm)
{
	CHECK_INIT("MPI_Gather");
	ENTRY("MPI_Gather", comm,
	      gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
		     root, false, comm, NULL));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Igather");
	if (!request)
		return FAIL(comm, "MPI_Igather", MPI_ERR_ARG);
	ENTRY("MPI_Igather", comm,
	      gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
		     root, false, comm, request));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		MPI_Comm comm)
{
	CHECK_INIT("MPI_Scatter");
	ENTRY("MPI_Scatter", comm,
	      gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
		     root, true, comm, NULL));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		 MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Iscatter");
	if (!request)
		return FAIL(comm, "MPI_Iscatter", MPI_ERR_ARG);
	ENTRY("MPI_Iscatter", comm,
	      gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
		     root, true, comm, request));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		  void *recvbuf, int recvcount, MPI_Datatype recvtype,
		  MPI_Comm comm)
{
	CHECK_INIT("MPI_Allgather");
	ENTRY("MPI_Allgather", comm,
	      allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
			recvtype, comm, NULL));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		   void *recvbuf, int recvcount, MPI_Datatype recvtype,
		   MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Iallgather");
	if (!request)
		return FAIL(comm, "MPI_Iallgather", MPI_ERR_ARG);
	ENTRY("MPI_Iallgather", comm,
	      allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
			recvtype, comm, request));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype,
		 MPI_Comm comm)
{
	CHECK_INIT("MPI_Alltoall");
	ENTRY("MPI_Alltoall", comm,
	      alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
		       recvtype, comm, NULL));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		  void *recvbuf, int recvcount, MPI_Datatype recvtype,
		  MPI_Comm comm, MPI_Request *request)
{
	CHECK_INIT("MPI_Ialltoall");
	if (!request)
		return FAIL(comm, "MPI_Ialltoall", MPI_ERR_ARG);
	ENTRY("MPI_Ialltoall", comm,
	      alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
		       recvtype, comm, request));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
	     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Scan");
	ENTRY("MPI_Scan", comm,
	      scan(sendbuf, recvbuf, count, datatype, op, false, comm));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Exscan");
	ENTRY("MPI_Exscan", comm,
	      scan(sendbuf, recvbuf, count, datatype, op, true, comm));
}
