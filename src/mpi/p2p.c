/*
 * p2p.c -- point to point: the send modes, receives, probes, buffered
 * sends.
 *
 * Synchronous sends are done here, over pcor's plain messages: before the
 * data the sender posts a receive for an acknowledgement (CTX_ACK) and
 * sends a notice (CTX_SYNC, same tag); the data follows on the same
 * stream, so the notice is there when a receive matches the data.  A
 * receiver that completes a receive takes the oldest notice of that
 * sender thread and tag, if any, and acknowledges it.  The send completes
 * with the acknowledgement.  (An earlier plain message of the same
 * sender and tag, received after the notice came, releases the sender one
 * message early: the sync message is then already in the receiver's
 * queue.  pcor carries no per-message flag that would say which one.)
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

int pcori_mpi_isend(comm_t *c, int off, int dst, int tag, const void *buf,
		    size_t len, pcor_handle_t *h_p)
{
	int rc;
	while ((rc = pcori_ctx_send(c->pids[dst], c->lane, tag, c->ctx + off,
				    buf, len, h_p)) == PCOR_ERR_AGAIN)
		sched_yield();
	return rc;
}

/* The same, reading buf in place until *h_p completes (no copy). */
static int isend_hold(comm_t *c, int dst, int tag, const void *buf,
		      size_t len, pcor_handle_t *h_p)
{
	int rc;
	while ((rc = pcori_ctx_send_hold(c->pids[dst], c->lane, tag,
					 c->ctx + CTX_P2P, buf, len, h_p)) ==
	       PCOR_ERR_AGAIN)
		sched_yield();
	return rc;
}

int pcori_mpi_irecv(comm_t *c, int off, int src, int tag, void *buf, size_t cap,
		    pcor_msginfo_t *info, pcor_handle_t *h_p)
{
	int rc;
	/* Acknowledgements come to the sending thread itself. */
	int q = off == CTX_ACK ? -1 : c->lane;
	while ((rc = pcori_ctx_recv(q, src < 0 ? PCOR_ANY_PID : c->pids[src],
				    PCOR_ANY_THID, tag, c->ctx + off, buf, cap,
				    info, h_p)) == PCOR_ERR_AGAIN)
		sched_yield();
	return rc;
}

void pcori_mpi_sync_ack(comm_t *c, const pcor_msginfo_t *info)
{
	pcor_msginfo_t n;
	if (pcori_ctx_probe(c->lane, info->pid, info->thid, info->tag,
			    c->ctx + CTX_SYNC, &n) != 1)
		return;
	pcor_handle_t h;
	int rc;
	while ((rc = pcori_ctx_recv(c->lane, info->pid, info->thid, info->tag,
				    c->ctx + CTX_SYNC, NULL, 0, NULL, &h)) ==
	       PCOR_ERR_AGAIN)
		sched_yield();
	if (rc == PCOR_OK)
		pcor_handle_test(h, PCOR_BLOCK);
	while ((rc = pcori_ctx_send(info->pid, info->thid, info->tag,
				    c->ctx + CTX_ACK, NULL, 0, &h)) ==
	       PCOR_ERR_AGAIN)
		sched_yield();
	if (rc == PCOR_OK)
		pcor_handle_test(h, PCOR_BLOCK);
}

static int check_p2p(comm_t *c, int count, MPI_Datatype t, int peer, int tag,
		     bool recv)
{
	if (!c)
		return MPI_ERR_COMM;
	if (count < 0)
		return MPI_ERR_COUNT;
	if (!pcori_mpi_type_ready(t))
		return MPI_ERR_TYPE;
	if (recv ? tag < MPI_ANY_TAG || tag > TAG_UB : tag < 0 || tag > TAG_UB)
		return MPI_ERR_TAG;
	if (peer == MPI_PROC_NULL || (recv && peer == MPI_ANY_SOURCE))
		return MPI_SUCCESS;
	if (peer < 0 || peer >= c->size)
		return MPI_ERR_RANK;
	return MPI_SUCCESS;
}

/*
 * NULL is MPI_BOTTOM: fine for a derived type of absolute addresses,
 * never for data of a predefined type.
 */
static int check_buf(const void *buf, int count, MPI_Datatype t)
{
	const dtype_t *d = pcori_mpi_type(t);
	return !buf && count > 0 && d->predef ? MPI_ERR_BUFFER : MPI_SUCCESS;
}

enum { M_STD, M_SYNC, M_BUF };

static int bsend_post(comm_t *c, int dest, int tag, const void *buf,
		      size_t len);

/*
 * Start a send of any mode.  Contiguous data are read in place until the
 * request completes (MPI leaves the buffer to us until then): a large
 * message moves with one copy.  Packed data leave their copy before pcor
 * returns, so it is freed at once.
 */
static int send_start(int mode, const void *buf, int count, MPI_Datatype t,
		      int dest, int tag, MPI_Comm comm, req_t *r)
{
	comm_t *c = pcori_mpi_comm(comm);
	int err = check_p2p(c, count, t, dest, tag, false);
	if (!err)
		err = check_buf(buf, count, t);
	if (err)
		return err;
	r->comm = comm;
	if (dest == MPI_PROC_NULL) {
		r->kind = R_NULL;
		return MPI_SUCCESS;
	}
	dtype_t *d = pcori_mpi_type(t);
	size_t len = (size_t)count * d->size;
	MPI_Aint off;
	void *tmp = NULL;
	const void *data;
	if (pcori_mpi_type_contig(d, count, &off)) {
		data = (const char *)buf + off;
	} else {
		tmp = malloc(len);
		if (!tmp)
			return MPI_ERR_OTHER;
		pcori_mpi_pack(buf, count, d, tmp);
		data = tmp;
	}
	int rc = PCOR_OK;
	r->kind = R_SEND;
	if (mode == M_BUF) {
		err = bsend_post(c, dest, tag, data, len);
		r->kind = R_DONE;
		free(tmp);
		return err;
	}
	if (mode == M_SYNC) {
		r->kind = R_SSEND;
		rc = pcori_mpi_irecv(c, CTX_ACK, dest, tag, NULL, 0, NULL,
				     &r->ack);
		pcor_handle_t hn;
		if (!rc)
			rc = pcori_mpi_isend(c, CTX_SYNC, dest, tag, NULL, 0,
					     &hn);
		if (!rc)
			pcor_handle_test(hn, PCOR_BLOCK);
	}
	if (!rc)
		rc = tmp ? pcori_mpi_isend(c, CTX_P2P, dest, tag, data, len,
					   &r->h)
			 : isend_hold(c, dest, tag, data, len, &r->h);
	free(tmp);
	return pcori_mpi_class(rc);
}

static int recv_start(void *buf, int count, MPI_Datatype t, int source, int tag,
		      MPI_Comm comm, req_t *r)
{
	comm_t *c = pcori_mpi_comm(comm);
	int err = check_p2p(c, count, t, source, tag, true);
	if (!err)
		err = check_buf(buf, count, t);
	if (err)
		return err;
	r->comm = comm;
	if (source == MPI_PROC_NULL) {
		r->kind = R_NULL;
		return MPI_SUCCESS;
	}
	r->kind = R_RECV;
	dtype_t *d = pcori_mpi_type(t);
	size_t len = (size_t)count * d->size;
	MPI_Aint off;
	void *into;
	if (pcori_mpi_type_contig(d, count, &off)) {
		into = (char *)buf + off;
	} else {
		r->tmp = into = malloc(len ? len : 1);
		if (!into)
			return MPI_ERR_OTHER;
		r->ubuf = buf;
		r->ucount = count;
		r->utype = t;
	}
	int rc =
	    pcori_mpi_irecv(c, CTX_P2P, source == MPI_ANY_SOURCE ? -1 : source,
			    tag, into, len, &r->info, &r->h);
	if (rc) {
		free(r->tmp);
		r->tmp = NULL;
	}
	return pcori_mpi_class(rc);
}

/* A nonblocking call: a request, then the start. */
static int nb(int mode, bool recv, const void *buf, int count, MPI_Datatype t,
	      int peer, int tag, MPI_Comm comm, MPI_Request *request,
	      const char *fn)
{
	CHECK_INIT(fn);
	if (!request)
		return FAIL(comm, fn, MPI_ERR_ARG);
	req_t *r = pcori_mpi_req_new(request);
	if (!r)
		return FAIL(comm, fn, MPI_ERR_OTHER);
	int err = recv ? recv_start((void *)buf, count, t, peer, tag, comm, r)
		       : send_start(mode, buf, count, t, peer, tag, comm, r);
	if (err) {
		pcori_mpi_req_free(*request);
		*request = MPI_REQUEST_NULL;
		return FAIL(comm, fn, err);
	}
	return MPI_SUCCESS;
}

/* ------------------------------------------------ persistent requests */

static int pinit(int mode, bool recv, const void *buf, int count,
		 MPI_Datatype t, int peer, int tag, MPI_Comm comm,
		 MPI_Request *request, const char *fn)
{
	CHECK_INIT(fn);
	int err = check_p2p(pcori_mpi_comm(comm), count, t, peer, tag, recv);
	if (!err && !request)
		err = MPI_ERR_ARG;
	if (err)
		return FAIL(comm, fn, err);
	req_t *r = pcori_mpi_req_new(request);
	if (!r)
		return FAIL(comm, fn, MPI_ERR_OTHER);
	r->persistent = true;
	r->kind = R_IDLE;
	r->comm = comm;
	r->p.mode = mode;
	r->p.recv = recv;
	r->p.buf = (void *)buf;
	r->p.count = count;
	r->p.t = t;
	r->p.peer = peer;
	r->p.tag = tag;
	return MPI_SUCCESS;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest,
		  int tag, MPI_Comm comm, MPI_Request *request)
{
	return pinit(M_STD, false, buf, count, datatype, dest, tag, comm,
		     request, "MPI_Send_init");
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
		   int tag, MPI_Comm comm, MPI_Request *request)
{
	return pinit(M_SYNC, false, buf, count, datatype, dest, tag, comm,
		     request, "MPI_Ssend_init");
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
		   int tag, MPI_Comm comm, MPI_Request *request)
{
	return pinit(M_BUF, false, buf, count, datatype, dest, tag, comm,
		     request, "MPI_Bsend_init");
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
		   int tag, MPI_Comm comm, MPI_Request *request)
{
	return pinit(M_STD, false, buf, count, datatype, dest, tag, comm,
		     request, "MPI_Rsend_init");
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source,
		  int tag, MPI_Comm comm, MPI_Request *request)
{
	return pinit(M_STD, true, buf, count, datatype, source, tag, comm,
		     request, "MPI_Recv_init");
}

int MPI_Start(MPI_Request *request)
{
	CHECK_INIT("MPI_Start");
	req_t *r = request ? pcori_mpi_req_get(*request) : NULL;
	if (!r || !r->persistent || r->kind != R_IDLE)
		return FAIL(r ? r->comm : MPI_COMM_WORLD, "MPI_Start",
			    MPI_ERR_REQUEST);
	r->h = r->ack = -1;
	r->err = 0;
	int err = r->p.recv
		      ? recv_start(r->p.buf, r->p.count, r->p.t, r->p.peer,
				   r->p.tag, r->comm, r)
		      : send_start(r->p.mode, r->p.buf, r->p.count, r->p.t,
				   r->p.peer, r->p.tag, r->comm, r);
	if (err) {
		r->kind = R_IDLE;
		return FAIL(r->comm, "MPI_Start", err);
	}
	return MPI_SUCCESS;
}

int MPI_Startall(int count, MPI_Request array_of_requests[])
{
	CHECK_INIT("MPI_Startall");
	if (count < 0 || (count && !array_of_requests))
		return FAIL(MPI_COMM_WORLD, "MPI_Startall", MPI_ERR_ARG);
	for (int i = 0; i < count; i++) {
		int rc = MPI_Start(&array_of_requests[i]);
		if (rc)
			return rc;
	}
	return MPI_SUCCESS;
}

/*
 * A blocking call: the operation started and run to its end in a request
 * on the stack (no handle to make and drop on the latency path).
 */
static int blk(int mode, bool recv, const void *buf, int count, MPI_Datatype t,
	       int peer, int tag, MPI_Comm comm, MPI_Status *status,
	       const char *fn)
{
	CHECK_INIT(fn);
	req_t r = {.used = true, .h = -1, .ack = -1};
	int err = recv ? recv_start((void *)buf, count, t, peer, tag, comm, &r)
		       : send_start(mode, buf, count, t, peer, tag, comm, &r);
	if (!err)
		err = pcori_mpi_req_run(&r, status);
	RETURN(comm, fn, err);
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
	     int tag, MPI_Comm comm)
{
	return blk(M_STD, false, buf, count, datatype, dest, tag, comm, NULL,
		   "MPI_Send");
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm)
{
	return blk(M_SYNC, false, buf, count, datatype, dest, tag, comm, NULL,
		   "MPI_Ssend");
}

/* Ready mode: the receive is posted, so a standard send is as good. */
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm)
{
	return blk(M_STD, false, buf, count, datatype, dest, tag, comm, NULL,
		   "MPI_Rsend");
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm)
{
	return blk(M_BUF, false, buf, count, datatype, dest, tag, comm, NULL,
		   "MPI_Bsend");
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
	     MPI_Comm comm, MPI_Status *status)
{
	return blk(M_STD, true, buf, count, datatype, source, tag, comm, status,
		   "MPI_Recv");
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm, MPI_Request *request)
{
	return nb(M_STD, false, buf, count, datatype, dest, tag, comm, request,
		  "MPI_Isend");
}

int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request)
{
	return nb(M_SYNC, false, buf, count, datatype, dest, tag, comm, request,
		  "MPI_Issend");
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request)
{
	return nb(M_STD, false, buf, count, datatype, dest, tag, comm, request,
		  "MPI_Irsend");
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request)
{
	return nb(M_BUF, false, buf, count, datatype, dest, tag, comm, request,
		  "MPI_Ibsend");
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
	      MPI_Comm comm, MPI_Request *request)
{
	return nb(M_STD, true, buf, count, datatype, source, tag, comm, request,
		  "MPI_Irecv");
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 int dest, int sendtag, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
		 MPI_Status *status)
{
	MPI_Request q;
	int rc = nb(M_STD, true, recvbuf, recvcount, recvtype, source, recvtag,
		    comm, &q, "MPI_Sendrecv");
	if (rc)
		return rc;
	rc = blk(M_STD, false, sendbuf, sendcount, sendtype, dest, sendtag,
		 comm, NULL, "MPI_Sendrecv");
	int rc2 = MPI_Wait(&q, status);
	return rc ? rc : rc2;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest,
			 int sendtag, int source, int recvtag, MPI_Comm comm,
			 MPI_Status *status)
{
	CHECK_INIT("MPI_Sendrecv_replace");
	comm_t *c = pcori_mpi_comm(comm);
	int err = check_p2p(c, count, datatype, dest, sendtag, false);
	if (err)
		return FAIL(comm, "MPI_Sendrecv_replace", err);
	/* Send a packed copy, receive into the buffer itself. */
	dtype_t *d = pcori_mpi_type(datatype);
	size_t len = (size_t)count * d->size;
	void *copy = malloc(len ? len : 1);
	if (!copy)
		return FAIL(comm, "MPI_Sendrecv_replace", MPI_ERR_OTHER);
	pcori_mpi_pack(buf, count, d, copy);
	int rc = MPI_Sendrecv(copy, (int)len, MPI_BYTE, dest, sendtag, buf,
			      count, datatype, source, recvtag, comm, status);
	free(copy);
	return rc;
}

/* ------------------------------------------------------------- probes */

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
	       MPI_Status *status)
{
	CHECK_INIT("MPI_Iprobe");
	comm_t *c = pcori_mpi_comm(comm);
	int err = check_p2p(c, 0, MPI_BYTE, source, tag, true);
	if (!err && !flag)
		err = MPI_ERR_ARG;
	if (err)
		return FAIL(comm, "MPI_Iprobe", err);
	if (source == MPI_PROC_NULL) {
		*flag = 1;
		pcori_mpi_status_set(status, c, NULL, MPI_SUCCESS, true);
		return MPI_SUCCESS;
	}
	pcor_msginfo_t info;
	int rc = pcori_ctx_probe(
	    c->lane, source == MPI_ANY_SOURCE ? PCOR_ANY_PID : c->pids[source],
	    PCOR_ANY_THID, tag, c->ctx + CTX_P2P, &info);
	if (rc < 0)
		return FAIL(comm, "MPI_Iprobe", pcori_mpi_class(rc));
	*flag = rc;
	if (rc)
		pcori_mpi_status_set(status, c, &info, MPI_SUCCESS, false);
	return MPI_SUCCESS;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	int flag = 0, rc;
	/* Messages arrive through pcor's dispatchers: look until one is in. */
	while ((rc = MPI_Iprobe(source, tag, comm, &flag, status)) ==
		   MPI_SUCCESS &&
	       !flag)
		sched_yield();
	return rc;
}

/* ------------------------------------------------------ buffered sends */

/* Guarded by pcori_mpi.lock. */
static struct {
	void *buf;
	int size;
	pcor_handle_t *pending; /* buffered sends not yet accepted */
	int npending, cap;
} bs;

/* Reap the buffered sends that have completed (or wait for all). */
static void bsend_reap(bool all)
{
	int k = 0;
	for (int i = 0; i < bs.npending; i++) {
		int rc = pcor_handle_test(bs.pending[i],
					  all ? PCOR_BLOCK : PCOR_NONBLOCK);
		if (rc == PCOR_INPROGRESS)
			bs.pending[k++] = bs.pending[i];
	}
	bs.npending = k;
}

void pcori_mpi_bsend_fini(void)
{
	bsend_reap(true);
	free(bs.pending);
	memset(&bs, 0, sizeof(bs));
}

static int bsend_post(comm_t *c, int dest, int tag, const void *buf, size_t len)
{
	pthread_mutex_lock(&pcori_mpi.lock);
	int err = MPI_SUCCESS;
	if (!bs.buf || len > (size_t)bs.size)
		err = MPI_ERR_BUFFER; /* the standard asks for room */
	if (!err)
		bsend_reap(false);
	if (!err && bs.npending == bs.cap) {
		int n = bs.cap ? 2 * bs.cap : 16;
		pcor_handle_t *p = realloc(bs.pending, n * sizeof(*p));
		if (p) {
			bs.pending = p;
			bs.cap = n;
		} else {
			err = MPI_ERR_OTHER;
		}
	}
	if (!err) {
		int rc = pcori_mpi_isend(c, CTX_P2P, dest, tag, buf, len,
					 &bs.pending[bs.npending]);
		err = pcori_mpi_class(rc);
		if (!err)
			bs.npending++;
	}
	pthread_mutex_unlock(&pcori_mpi.lock);
	return err;
}

int MPI_Buffer_attach(void *buffer, int size)
{
	CHECK_INIT("MPI_Buffer_attach");
	pthread_mutex_lock(&pcori_mpi.lock);
	int err = bs.buf			  ? MPI_ERR_BUFFER
		  : size < 0 || (!buffer && size) ? MPI_ERR_ARG
						  : MPI_SUCCESS;
	if (!err) {
		bs.buf = buffer;
		bs.size = size;
	}
	pthread_mutex_unlock(&pcori_mpi.lock);
	RETURN(MPI_COMM_WORLD, "MPI_Buffer_attach", err);
}

int MPI_Buffer_detach(void *buffer_addr, int *size)
{
	CHECK_INIT("MPI_Buffer_detach");
	if (!buffer_addr || !size)
		return FAIL(MPI_COMM_WORLD, "MPI_Buffer_detach", MPI_ERR_ARG);
	pthread_mutex_lock(&pcori_mpi.lock);
	bsend_reap(true);
	*(void **)buffer_addr = bs.buf;
	*size = bs.size;
	bs.buf = NULL;
	bs.size = 0;
	pthread_mutex_unlock(&pcori_mpi.lock);
	return MPI_SUCCESS;
}
