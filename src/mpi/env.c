/*
 * env.c -- MPI environment: init and finalize, errors and their handlers,
 * version strings, clocks and memory.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpii.h"

mpi_global_t pcori_mpi = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const err_names[] = {
    [MPI_SUCCESS] = "MPI_SUCCESS: no error",
    [MPI_ERR_BUFFER] = "MPI_ERR_BUFFER: invalid buffer pointer",
    [MPI_ERR_COUNT] = "MPI_ERR_COUNT: invalid count argument",
    [MPI_ERR_TYPE] = "MPI_ERR_TYPE: invalid datatype",
    [MPI_ERR_TAG] = "MPI_ERR_TAG: invalid tag",
    [MPI_ERR_COMM] = "MPI_ERR_COMM: invalid communicator",
    [MPI_ERR_RANK] = "MPI_ERR_RANK: invalid rank",
    [MPI_ERR_ROOT] = "MPI_ERR_ROOT: invalid root",
    [MPI_ERR_GROUP] = "MPI_ERR_GROUP: invalid group",
    [MPI_ERR_OP] = "MPI_ERR_OP: invalid reduce operation",
    [MPI_ERR_ARG] = "MPI_ERR_ARG: invalid argument",
    [MPI_ERR_UNKNOWN] = "MPI_ERR_UNKNOWN: unknown error",
    [MPI_ERR_TRUNCATE] = "MPI_ERR_TRUNCATE: message truncated",
    [MPI_ERR_OTHER] = "MPI_ERR_OTHER: other error",
    [MPI_ERR_INTERN] = "MPI_ERR_INTERN: internal error",
    [MPI_ERR_IN_STATUS] = "MPI_ERR_IN_STATUS: error code is in status",
    [MPI_ERR_PENDING] = "MPI_ERR_PENDING: pending request",
    [MPI_ERR_REQUEST] = "MPI_ERR_REQUEST: invalid request",
    [MPI_ERR_INFO_KEY] = "MPI_ERR_INFO_KEY: invalid info key",
    [MPI_ERR_INFO_VALUE] = "MPI_ERR_INFO_VALUE: invalid info value",
    [MPI_ERR_INFO_NOKEY] = "MPI_ERR_INFO_NOKEY: no such info key",
    [MPI_ERR_INFO] = "MPI_ERR_INFO: invalid info object",
    [MPI_ERR_TOPOLOGY] = "MPI_ERR_TOPOLOGY: invalid topology",
    [MPI_ERR_DIMS] = "MPI_ERR_DIMS: invalid dimension argument",
    [MPI_ERR_WIN] = "MPI_ERR_WIN: invalid window",
    [MPI_ERR_KEYVAL] = "MPI_ERR_KEYVAL: invalid attribute key",
};
#define NERR ((int)(sizeof(err_names) / sizeof(err_names[0])))

int pcori_mpi_fail(MPI_Comm c, const char *fn, int err)
{
	comm_t *cm = pcori_mpi_comm(c);
	if (!cm)
		cm = pcori_mpi_comm(MPI_COMM_WORLD);
	MPI_Errhandler eh = cm ? cm->eh : MPI_ERRORS_ARE_FATAL;
	if (eh == MPI_ERRORS_RETURN)
		return err;
	fprintf(stderr, "pcor MPI: fatal error in %s on rank %d: %s\n", fn,
		pcori_mpi.pid,
		err >= 0 && err < NERR && err_names[err] ? err_names[err]
							 : "unknown error");
	fflush(stderr);
	_exit(1);
}

int pcori_mpi_class(int rc)
{
	switch (rc) {
	case PCOR_OK:
		return MPI_SUCCESS;
	case PCOR_ERR_TRUNCATE:
		return MPI_ERR_TRUNCATE;
	case PCOR_ERR_BADBUF:
		return MPI_ERR_BUFFER;
	case PCOR_ERR_BADSIZE:
		return MPI_ERR_COUNT;
	case PCOR_ERR_BADTAG:
		return MPI_ERR_TAG;
	case PCOR_ERR_BADPID:
	case PCOR_ERR_NOPEER:
		return MPI_ERR_RANK;
	case PCOR_ERR_NOMEM:
	case PCOR_ERR_AGAIN:
	case PCOR_ERR_PEER_LOST:
		return MPI_ERR_OTHER;
	default:
		return MPI_ERR_INTERN;
	}
}

static pthread_key_t detach_key;

/* A thread the shim attached leaves pcor when it ends. */
static void detach_at_exit(void *arg)
{
	(void)arg;
	pcor_thread_detach();
}

void pcori_mpi_check_init(const char *fn)
{
	if (__builtin_expect(pcori_mpi.state == 1 && pcor_self_thid() >= 0, 1))
		return;
	if (pcori_mpi.state != 1) {
		fprintf(stderr, "pcor MPI: %s called %s\n", fn,
			pcori_mpi.state ? "after MPI_Finalize"
					: "before MPI_Init");
		_exit(1);
	}
	/* A thread of the program's own: it becomes a pcor thread. */
	int thid, rc = pcor_thread_attach(&thid);
	if (rc) {
		fprintf(stderr, "pcor MPI: %s on rank %d: thread attach: %s\n",
			fn, pcori_mpi.pid, pcor_strerror(rc));
		_exit(1);
	}
	pthread_setspecific(detach_key, &detach_key);
}

void pcori_mpi_status_set(MPI_Status *st, const comm_t *c,
			  const pcor_msginfo_t *in, int err, bool null)
{
	if (!st)
		return;
	if (null) {
		st->MPI_SOURCE = MPI_PROC_NULL;
		st->MPI_TAG = MPI_ANY_TAG;
		st->pcor_bytes_ = 0;
	} else {
		st->MPI_SOURCE = c->rank_of[in->pid];
		st->MPI_TAG = in->tag;
		st->pcor_bytes_ = in->size;
	}
	st->MPI_ERROR = err;
	st->pcor_cancelled_ = 0;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	if (pcori_mpi.state) {
		fprintf(stderr, "pcor MPI: MPI_Init called twice\n");
		_exit(1);
	}
	int rc = pcor_init(argc, argv);
	if (rc) {
		fprintf(stderr, "pcor MPI: MPI_Init: pcor_init: %s\n",
			pcor_strerror(rc));
		_exit(1);
	}
	int64_t v;
	pcori_mpi.bcast_large = pcori_ctx_knob("MPI_BCAST_LARGE", &v) == PCOR_OK
				    ? (size_t)v
				    : SIZE_MAX;
	pcori_mpi.allreduce_large =
	    pcori_ctx_knob("MPI_ALLREDUCE_LARGE", &v) == PCOR_OK ? (size_t)v
								 : SIZE_MAX;
	pcori_mpi.nprocs = pcor_nprocs();
	pcori_mpi.pid = pcor_self_pid();
	pcori_mpi.main_thread = pthread_self();
	pcori_mpi.state = 1;
	pcori_mpi.thread_level =
	    required < MPI_THREAD_SINGLE     ? MPI_THREAD_SINGLE
	    : required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE
					     : required;
	if (pthread_key_create(&detach_key, detach_at_exit)) {
		fprintf(stderr, "pcor MPI: MPI_Init: no thread key\n");
		_exit(1);
	}
	if (provided)
		*provided = pcori_mpi.thread_level;
	pcori_mpi_types_init();
	int *w = malloc(pcori_mpi.nprocs * sizeof(int));
	int *s = malloc(sizeof(int));
	if (!w || !s) {
		fprintf(stderr, "pcor MPI: MPI_Init: out of memory\n");
		_exit(1);
	}
	for (int p = 0; p < pcori_mpi.nprocs; p++)
		w[p] = p;
	s[0] = pcori_mpi.pid;
	MPI_Comm world, self;
	if (pcori_mpi_comm_make(w, pcori_mpi.nprocs, 1, MPI_ERRORS_ARE_FATAL,
				&world) ||
	    pcori_mpi_comm_make(s, 1, 2, MPI_ERRORS_ARE_FATAL, &self) ||
	    world != MPI_COMM_WORLD || self != MPI_COMM_SELF) {
		fprintf(stderr, "pcor MPI: MPI_Init: no communicators\n");
		_exit(1);
	}
	snprintf(pcori_mpi_comm(world)->name, MPI_MAX_OBJECT_NAME,
		 "MPI_COMM_WORLD");
	snprintf(pcori_mpi_comm(self)->name, MPI_MAX_OBJECT_NAME,
		 "MPI_COMM_SELF");
	pcori_mpi.next_ctx = 3;
	return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
	return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

int MPI_Finalize(void)
{
	CHECK_INIT("MPI_Finalize");
	/* First, as if MPI_COMM_SELF were freed: its attributes go. */
	int err = pcori_mpi_attr_delete_all(MPI_COMM_SELF,
					    pcori_mpi_comm(MPI_COMM_SELF));
	if (err)
		return FAIL(MPI_COMM_SELF, "MPI_Finalize", err);
	pcori_mpi_bsend_fini();
	/* Nobody leaves while a peer may still send to it. */
	MPI_Barrier(MPI_COMM_WORLD);
	pcori_mpi_reqs_fini();
	pcori_mpi_comms_fini();
	pcori_mpi_attr_fini();
	pcori_mpi_types_fini();
	pcori_mpi.state = 2;
	int rc = pcor_finalize();
	return rc ? MPI_ERR_INTERN : MPI_SUCCESS;
}

int MPI_Initialized(int *flag)
{
	if (!flag)
		return MPI_ERR_ARG;
	*flag = pcori_mpi.state != 0;
	return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
	if (!flag)
		return MPI_ERR_ARG;
	*flag = pcori_mpi.state == 2;
	return MPI_SUCCESS;
}

int MPI_Query_thread(int *provided)
{
	CHECK_INIT("MPI_Query_thread");
	if (!provided)
		return FAIL(MPI_COMM_WORLD, "MPI_Query_thread", MPI_ERR_ARG);
	*provided = pcori_mpi.thread_level;
	return MPI_SUCCESS;
}

int MPI_Is_thread_main(int *flag)
{
	CHECK_INIT("MPI_Is_thread_main");
	if (!flag)
		return FAIL(MPI_COMM_WORLD, "MPI_Is_thread_main", MPI_ERR_ARG);
	*flag = pthread_equal(pthread_self(), pcori_mpi.main_thread) != 0;
	return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
	(void)comm;
	fprintf(stderr, "pcor MPI: MPI_Abort(%d) on rank %d\n", errorcode,
		pcori_mpi.pid);
	fflush(stderr);
	/* pcorrun ends the whole job when one process exits non-zero. */
	_exit(errorcode & 0xff ? errorcode & 0xff : 1);
}

int MPI_Get_version(int *version, int *subversion)
{
	if (!version || !subversion)
		return MPI_ERR_ARG;
	*version = MPI_VERSION;
	*subversion = MPI_SUBVERSION;
	return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen)
{
	if (!version || !resultlen)
		return MPI_ERR_ARG;
	int n = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
			 "pcor MPI shim %d.%d (MPI %d.%d subset)",
			 PCOR_VERSION_MAJOR, PCOR_VERSION_MINOR, MPI_VERSION,
			 MPI_SUBVERSION);
	*resultlen = n;
	return MPI_SUCCESS;
}

int MPI_Get_processor_name(char *name, int *resultlen)
{
	if (!name || !resultlen)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_processor_name",
			    MPI_ERR_ARG);
	if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0)
		snprintf(name, MPI_MAX_PROCESSOR_NAME, "unknown");
	name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
	*resultlen = (int)strlen(name);
	return MPI_SUCCESS;
}

int MPI_Pcontrol(const int level, ...)
{
	(void)level; /* no profiling layer to control */
	return MPI_SUCCESS;
}

double MPI_Wtime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double MPI_Wtick(void)
{
	struct timespec ts;
	clock_getres(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- errors */

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
	CHECK_INIT("MPI_Comm_set_errhandler");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_set_errhandler", MPI_ERR_COMM);
	if (errhandler != MPI_ERRORS_RETURN &&
	    errhandler != MPI_ERRORS_ARE_FATAL)
		return FAIL(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG);
	c->eh = errhandler;
	return MPI_SUCCESS;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
	CHECK_INIT("MPI_Comm_get_errhandler");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_get_errhandler", MPI_ERR_COMM);
	if (!errhandler)
		return FAIL(comm, "MPI_Comm_get_errhandler", MPI_ERR_ARG);
	*errhandler = c->eh;
	return MPI_SUCCESS;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen)
{
	const char *s =
	    errorcode >= 0 && errorcode < NERR && err_names[errorcode]
		? err_names[errorcode]
		: NULL;
	if (!s || !string || !resultlen)
		return MPI_ERR_ARG;
	snprintf(string, MPI_MAX_ERROR_STRING, "%s", s);
	*resultlen = (int)strlen(string);
	return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int *errorclass)
{
	if (errorcode < 0 || errorcode >= NERR || !err_names[errorcode] ||
	    !errorclass)
		return MPI_ERR_ARG;
	*errorclass = errorcode; /* codes are their classes here */
	return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- memory */

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
	(void)info;
	if (size < 0 || !baseptr)
		return FAIL(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_ARG);
	void *p = malloc(size ? (size_t)size : 1);
	if (!p)
		return FAIL(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_OTHER);
	*(void **)baseptr = p;
	return MPI_SUCCESS;
}

int MPI_Free_mem(void *base)
{
	free(base);
	return MPI_SUCCESS;
}
