/*
 * req.c -- requests: their table, completion (Wait/Test and the array
 * forms), Request_free, Cancel.
 *
 * A request advances in req_progress; when its operation has ended, the
 * outcome is kept in the request (kind R_DONE, st, err) until a call
 * hands it to the caller and releases the handle.  So Testall can leave
 * finished requests alone while others are still running.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

/*
 * Request objects stay in their table slot for good; a freed one is only
 * marked unused and its index kept for the next request, so the message
 * path allocates nothing.  free_lock guards the list of free indexes.
 */
static htable_t reqs;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static int *free_idx;
static int nfree, capfree;

req_t *pcori_mpi_req_get(MPI_Request q)
{
	if (HKIND(q) != REQ_KIND)
		return NULL;
	req_t *r = pcori_mpi_tab_get(&reqs, HINDEX(q) - 1);
	return r && r->used ? r : NULL;
}

bool pcori_mpi_req_idle(MPI_Request q)
{
	if (q == MPI_REQUEST_NULL)
		return true;
	req_t *r = pcori_mpi_req_get(q);
	return r && r->kind == R_IDLE;
}

req_t *pcori_mpi_req_new(MPI_Request *q_p)
{
	int i = -1;
	req_t *r;
	pthread_mutex_lock(&free_lock);
	if (nfree)
		i = free_idx[--nfree];
	pthread_mutex_unlock(&free_lock);
	if (i >= 0) {
		r = pcori_mpi_tab_get(&reqs, i);
	} else {
		r = malloc(sizeof(*r));
		i = r ? pcori_mpi_tab_add(&reqs, r, 0) : -1;
		if (i < 0) {
			free(r);
			return NULL;
		}
	}
	/* Only what every path reads before writing it. */
	r->kind = R_NULL;
	r->used = true;
	r->persistent = false;
	r->h = r->ack = -1;
	r->tmp = NULL;
	r->sched = NULL;
	r->err = 0;
	*q_p = (MPI_Request)(REQ_KIND | (unsigned)(i + 1));
	return r;
}

static void req_clear(req_t *r)
{
	free(r->tmp);
	r->tmp = NULL;
	if (r->sched) {
		pcori_mpi_sched_fini(r->sched);
		free(r->sched);
		r->sched = NULL;
	}
}

void pcori_mpi_req_free(MPI_Request q)
{
	req_t *r = pcori_mpi_req_get(q);
	req_clear(r);
	r->used = false;
	pthread_mutex_lock(&free_lock);
	if (nfree == capfree) {
		int n = capfree ? 2 * capfree : 256;
		int *p = realloc(free_idx, n * sizeof(*p));
		if (!p) { /* keep the slot out of use rather than lose it */
			pthread_mutex_unlock(&free_lock);
			return;
		}
		free_idx = p;
		capfree = n;
	}
	free_idx[nfree++] = HINDEX(q) - 1;
	pthread_mutex_unlock(&free_lock);
}

void pcori_mpi_reqs_fini(void)
{
	for (int i = 0; i < reqs.nslots; i++) {
		req_t *r = pcori_mpi_tab_get(&reqs, i);
		if (r) {
			pcori_mpi_tab_del(&reqs, i);
			if (r->used)
				req_clear(r);
			free(r);
		}
	}
	free(free_idx);
	free_idx = NULL;
	nfree = capfree = 0;
}

/* Test (or wait for) one pcor handle; -1 once done, rc kept in *rc_p. */
static bool handle_done(pcor_handle_t *h, bool block, int *rc_p)
{
	if (*h < 0)
		return true;
	int rc = pcor_handle_test(*h, block ? PCOR_BLOCK : PCOR_NONBLOCK);
	if (rc == PCOR_INPROGRESS)
		return false;
	*h = -1;
	if (rc && !*rc_p)
		*rc_p = rc;
	return true;
}

/* Advance r; true when its outcome is in r (kind R_DONE). */
static bool req_progress(req_t *r, bool block)
{
	int rc = PCOR_OK, err = MPI_SUCCESS;
	comm_t *c = pcori_mpi_comm(r->comm);
	switch (r->kind) {
	case R_DONE:
		return true;
	case R_IDLE:
	case R_NULL:
		pcori_mpi_status_set(&r->st, NULL, NULL, MPI_SUCCESS, true);
		break;
	case R_SEND:
	case R_SSEND:
		if (!handle_done(&r->h, block, &r->err) ||
		    !handle_done(&r->ack, block, &r->err))
			return false;
		err = pcori_mpi_class(r->err);
		pcori_mpi_status_set(&r->st, NULL, NULL, err, true);
		break;
	case R_RECV:
		if (!handle_done(&r->h, block, &rc))
			return false;
		if (rc == PCOR_ERR_CANCELED) {
			pcori_mpi_status_set(&r->st, NULL, NULL, MPI_SUCCESS,
					     true);
			r->st.pcor_cancelled_ = 1;
			break;
		}
		err = pcori_mpi_class(rc);
		if (rc != PCOR_OK && rc != PCOR_ERR_TRUNCATE) {
			pcori_mpi_status_set(&r->st, NULL, NULL, err, true);
			break;
		}
		if (r->tmp) {
			size_t got =
			    r->info.size < (size_t)r->ucount *
					       pcori_mpi_type(r->utype)->size
				? r->info.size
				: (size_t)r->ucount *
				      pcori_mpi_type(r->utype)->size;
			pcori_mpi_unpack(r->tmp, got, r->ubuf, r->ucount,
					 pcori_mpi_type(r->utype));
		}
		if (c)
			pcori_mpi_sync_ack(c, &r->info);
		pcori_mpi_status_set(&r->st, c, &r->info, err, false);
		break;
	case R_COLL:
		err = pcori_mpi_sched_progress(r->sched, block);
		if (err < 0)
			return false;
		pcori_mpi_status_set(&r->st, NULL, NULL, err, true);
		break;
	}
	r->err = err;
	r->kind = R_DONE;
	return true;
}

/*
 * Hand a finished request's outcome over and release it; a persistent
 * one goes back to idle, its handle kept.
 */
static int req_reap(MPI_Request *q, req_t *r, MPI_Status *st)
{
	int err = r->err;
	if (st) {
		*st = r->st;
		st->MPI_ERROR = err;
	}
	if (r->persistent) {
		free(r->tmp);
		r->tmp = NULL;
		r->kind = R_IDLE;
		return err;
	}
	pcori_mpi_req_free(*q);
	*q = MPI_REQUEST_NULL;
	return err;
}

int pcori_mpi_req_run(req_t *r, MPI_Status *st)
{
	req_progress(r, true);
	if (st) {
		*st = r->st;
		st->MPI_ERROR = r->err;
	}
	free(r->tmp);
	r->tmp = NULL;
	return r->err;
}

static void status_empty(MPI_Status *st)
{
	pcori_mpi_status_set(st, NULL, NULL, MPI_SUCCESS, true);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	CHECK_INIT("MPI_Wait");
	if (!request)
		return FAIL(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_ARG);
	if (pcori_mpi_req_idle(*request)) {
		status_empty(status);
		return MPI_SUCCESS;
	}
	req_t *r = pcori_mpi_req_get(*request);
	if (!r)
		return FAIL(MPI_COMM_WORLD, "MPI_Wait", MPI_ERR_REQUEST);
	MPI_Comm comm = r->comm;
	req_progress(r, true);
	RETURN(comm, "MPI_Wait", req_reap(request, r, status));
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	CHECK_INIT("MPI_Test");
	if (!request || !flag)
		return FAIL(MPI_COMM_WORLD, "MPI_Test", MPI_ERR_ARG);
	*flag = 1;
	if (pcori_mpi_req_idle(*request)) {
		status_empty(status);
		return MPI_SUCCESS;
	}
	req_t *r = pcori_mpi_req_get(*request);
	if (!r)
		return FAIL(MPI_COMM_WORLD, "MPI_Test", MPI_ERR_REQUEST);
	MPI_Comm comm = r->comm;
	if (!req_progress(r, false)) {
		*flag = 0;
		return MPI_SUCCESS;
	}
	RETURN(comm, "MPI_Test", req_reap(request, r, status));
}

/* Check an array of requests; the communicator for errors in *comm_p. */
static int check_array(int count, MPI_Request reqv[], MPI_Comm *comm_p)
{
	*comm_p = MPI_COMM_WORLD;
	if (count < 0 || (count && !reqv))
		return MPI_ERR_ARG;
	for (int i = 0; i < count; i++) {
		if (reqv[i] == MPI_REQUEST_NULL)
			continue;
		req_t *r = pcori_mpi_req_get(reqv[i]);
		if (!r)
			return MPI_ERR_REQUEST;
		*comm_p = r->comm;
	}
	return MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	CHECK_INIT("MPI_Waitall");
	MPI_Comm comm;
	int err = check_array(count, requests, &comm);
	if (err)
		return FAIL(comm, "MPI_Waitall", err);
	for (int i = 0; i < count; i++) {
		MPI_Status *st = statuses ? &statuses[i] : NULL;
		req_t *r = pcori_mpi_req_get(requests[i]);
		if (!r || r->kind == R_IDLE) {
			status_empty(st);
			continue;
		}
		req_progress(r, true);
		if (req_reap(&requests[i], r, st))
			err = MPI_ERR_IN_STATUS;
	}
	RETURN(comm, "MPI_Waitall", err);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag,
		MPI_Status statuses[])
{
	CHECK_INIT("MPI_Testall");
	MPI_Comm comm;
	int err = check_array(count, requests, &comm);
	if (!err && !flag)
		err = MPI_ERR_ARG;
	if (err)
		return FAIL(comm, "MPI_Testall", err);
	/* All or nothing: the finished keep their outcome meanwhile. */
	bool all = true;
	for (int i = 0; i < count; i++)
		if (!pcori_mpi_req_idle(requests[i]) &&
		    !req_progress(pcori_mpi_req_get(requests[i]), false))
			all = false;
	*flag = all;
	if (!all)
		return MPI_SUCCESS;
	for (int i = 0; i < count; i++) {
		MPI_Status *st = statuses ? &statuses[i] : NULL;
		if (pcori_mpi_req_idle(requests[i]))
			status_empty(st);
		else if (req_reap(&requests[i], pcori_mpi_req_get(requests[i]),
				  st))
			err = MPI_ERR_IN_STATUS;
	}
	RETURN(comm, "MPI_Testall", err);
}

/*
 * Waitany/Testany: the first finished request, *index; MPI_UNDEFINED if
 * none is active.  *found 0 when testing and none has finished.
 */
static int any(int count, MPI_Request reqv[], int *index, MPI_Status *st,
	       bool block, int *found, const char *fn)
{
	CHECK_INIT(fn);
	MPI_Comm comm;
	int err = check_array(count, reqv, &comm);
	if (!err && !index)
		err = MPI_ERR_ARG;
	if (err)
		return FAIL(comm, fn, err);
	for (;;) {
		bool active = false;
		for (int i = 0; i < count; i++) {
			if (pcori_mpi_req_idle(reqv[i]))
				continue;
			active = true;
			req_t *r = pcori_mpi_req_get(reqv[i]);
			if (req_progress(r, false)) {
				MPI_Comm rc = r->comm;
				*index = i;
				*found = 1;
				RETURN(rc, fn, req_reap(&reqv[i], r, st));
			}
		}
		if (!active) {
			*index = MPI_UNDEFINED;
			*found = 1;
			status_empty(st);
			return MPI_SUCCESS;
		}
		if (!block) {
			*found = 0;
			return MPI_SUCCESS;
		}
		/* Peers drive the progress: poll until one finishes. */
		sched_yield();
	}
}

int MPI_Waitany(int count, MPI_Request requests[], int *index,
		MPI_Status *status)
{
	int found;
	return any(count, requests, index, status, true, &found, "MPI_Waitany");
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
		MPI_Status *status)
{
	if (!flag)
		return FAIL(MPI_COMM_WORLD, "MPI_Testany", MPI_ERR_ARG);
	int rc =
	    any(count, requests, index, status, false, flag, "MPI_Testany");
	if (!*flag && index)
		*index = MPI_UNDEFINED;
	return rc;
}

/* Waitsome/Testsome: every finished request at once. */
static int some(int incount, MPI_Request reqv[], int *outcount, int indices[],
		MPI_Status statuses[], bool block, const char *fn)
{
	CHECK_INIT(fn);
	MPI_Comm comm;
	int err = check_array(incount, reqv, &comm);
	if (!err && (!outcount || (incount && !indices)))
		err = MPI_ERR_ARG;
	if (err)
		return FAIL(comm, fn, err);
	for (;;) {
		int n = 0;
		bool active = false;
		for (int i = 0; i < incount; i++) {
			if (pcori_mpi_req_idle(reqv[i]))
				continue;
			active = true;
			req_t *r = pcori_mpi_req_get(reqv[i]);
			if (!req_progress(r, false))
				continue;
			indices[n] = i;
			if (req_reap(&reqv[i], r,
				     statuses ? &statuses[n] : NULL))
				err = MPI_ERR_IN_STATUS;
			n++;
		}
		if (!active) {
			*outcount = MPI_UNDEFINED;
			return MPI_SUCCESS;
		}
		if (n || !block) {
			*outcount = n;
			RETURN(comm, fn, err);
		}
		sched_yield();
	}
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount,
		 int indices[], MPI_Status statuses[])
{
	return some(incount, requests, outcount, indices, statuses, true,
		    "MPI_Waitsome");
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount,
		 int indices[], MPI_Status statuses[])
{
	return some(incount, requests, outcount, indices, statuses, false,
		    "MPI_Testsome");
}

int MPI_Request_free(MPI_Request *request)
{
	CHECK_INIT("MPI_Request_free");
	req_t *r = request ? pcori_mpi_req_get(*request) : NULL;
	if (!r)
		return FAIL(MPI_COMM_WORLD, "MPI_Request_free",
			    MPI_ERR_REQUEST);
	/* Nothing here advances a forgotten request: finish it now. */
	req_progress(r, true);
	req_reap(request, r, NULL);
	if (*request != MPI_REQUEST_NULL) { /* persistent */
		pcori_mpi_req_free(*request);
		*request = MPI_REQUEST_NULL;
	}
	return MPI_SUCCESS;
}

int MPI_Cancel(MPI_Request *request)
{
	CHECK_INIT("MPI_Cancel");
	req_t *r = request ? pcori_mpi_req_get(*request) : NULL;
	if (!r)
		return FAIL(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST);
	/*
	 * Only a receive nothing has matched can be withdrawn; any other
	 * operation runs to its end and Test_cancelled says false.
	 */
	if (r->kind == R_RECV && r->h >= 0)
		pcori_ctx_cancel(r->h);
	return MPI_SUCCESS;
}

int MPI_Test_cancelled(const MPI_Status *status, int *flag)
{
	if (!status || !flag)
		return FAIL(MPI_COMM_WORLD, "MPI_Test_cancelled", MPI_ERR_ARG);
	*flag = status->pcor_cancelled_;
	return MPI_SUCCESS;
}
