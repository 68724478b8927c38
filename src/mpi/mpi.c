/*
 * mpi.c -- libpcor_mpi: MPI on top of pcor (see include/pcor/mpi.h).
 *
 * A rank is pcor process <rank of MPI_COMM_WORLD>, thread 0.  Every
 * communicator owns two matching contexts: 2*id for point to point and
 * 2*id+1 for its collectives, so collective traffic never enters the
 * point-to-point unexpected queue and communicators never match each
 * other's messages.  Context 0 stays pcor's own.  Context ids are agreed
 * on by a max-reduction over the parent communicator.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include <pcor/mpi.h>
#include <pcor/pcor.h>

#include "../api/ctx.h"

#define HKIND(h) ((unsigned)(h) & 0xff000000u)
#define COMM_KIND 0x44000000u
#define REQ_KIND 0x2c000000u
#define TAG_UB 0x3fffffff

/* Tags of the collectives on a communicator's collective context. */
enum { T_BARRIER = 1, T_BCAST, T_REDUCE, T_GATHER, T_SCATTER, T_ALLTOALL,
       T_SPLIT };

typedef struct comm {
	bool used;
	int size, rank;
	int *pids;    /* comm rank -> pcor pid */
	int *rank_of; /* pcor pid -> comm rank, or -1 */
	uint32_t ctx; /* p2p context; ctx + 1 for collectives */
	MPI_Errhandler eh;
} comm_t;

typedef struct req {
	bool used, recv, null;
	pcor_handle_t h;
	int comm;
	pcor_msginfo_t info;
} req_t;

static struct {
	int state; /* 0 before init, 1 running, 2 finalised */
	int thread_level;
	int nprocs, pid;
	comm_t *comms;
	int ncomms;
	req_t *reqs;
	int nreqs;
	uint32_t next_ctx; /* lowest context id not yet used here */
} g;

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
};
#define NERR ((int)(sizeof(err_names) / sizeof(err_names[0])))

/* ---------------------------------------------------------------- errors */

static comm_t *comm_get(MPI_Comm c)
{
	if (HKIND(c) != COMM_KIND)
		return NULL;
	int i = c & 0xffffff;
	if (i >= g.ncomms || !g.comms[i].used)
		return NULL;
	return &g.comms[i];
}

/*
 * Report error class err of call fn on communicator c (its handler, or
 * MPI_COMM_WORLD's when c is not valid): fatal ends the job, else return.
 */
static int fail(MPI_Comm c, const char *fn, int err)
{
	comm_t *cm = comm_get(c);
	MPI_Errhandler eh = cm ? cm->eh :
		(g.ncomms ? g.comms[0].eh : MPI_ERRORS_ARE_FATAL);
	if (eh == MPI_ERRORS_RETURN)
		return err;
	fprintf(stderr, "pcor MPI: fatal error in %s on rank %d: %s\n", fn,
		g.pid, err >= 0 && err < NERR && err_names[err] ?
		err_names[err] : "unknown error");
	fflush(stderr);
	_exit(1);
}

static int pcor_class(int rc)
{
	switch (rc) {
	case PCOR_OK:
		return MPI_SUCCESS;
	case PCOR_ERR_TRUNCATE:
		return MPI_ERR_TRUNCATE;
	case PCOR_ERR_NOMEM:
	case PCOR_ERR_AGAIN:
		return MPI_ERR_OTHER;
	default:
		return MPI_ERR_INTERN;
	}
}

#define CHECK_INIT(fn)                                                   \
	do {                                                             \
		if (g.state != 1) {                                      \
			fprintf(stderr, "pcor MPI: %s called %s\n", fn,  \
				g.state ? "after MPI_Finalize"           \
					: "before MPI_Init");             \
			_exit(1);                                        \
		}                                                        \
	} while (0)

/* ------------------------------------------------------------- datatypes */

static bool type_ok(MPI_Datatype t)
{
	unsigned u = (unsigned)t;
	return (u & 0xffff0000u) == 0x4c000000u && (u & 0xff) >= 1 &&
	       (u & 0xff) <= 0x1c && ((u >> 8) & 0xff) != 0;
}

static size_t type_size(MPI_Datatype t)
{
	return ((unsigned)t >> 8) & 0xff;
}

/* ------------------------------------------------------------ operations */

#define FOR_INT(X)                                                        \
	X(MPI_CHAR, char) X(MPI_SIGNED_CHAR, signed char)                 \
	X(MPI_UNSIGNED_CHAR, unsigned char) X(MPI_SHORT, short)           \
	X(MPI_UNSIGNED_SHORT, unsigned short) X(MPI_INT, int)             \
	X(MPI_UNSIGNED, unsigned) X(MPI_LONG, long)                       \
	X(MPI_UNSIGNED_LONG, unsigned long) X(MPI_LONG_LONG, long long)   \
	X(MPI_UNSIGNED_LONG_LONG, unsigned long long)                     \
	X(MPI_INT8_T, int8_t) X(MPI_UINT8_T, uint8_t)                     \
	X(MPI_INT16_T, int16_t) X(MPI_UINT16_T, uint16_t)                 \
	X(MPI_INT32_T, int32_t) X(MPI_UINT32_T, uint32_t)                 \
	X(MPI_INT64_T, int64_t) X(MPI_UINT64_T, uint64_t)                 \
	X(MPI_AINT, MPI_Aint)
#define FOR_FLOAT(X) X(MPI_FLOAT, float) X(MPI_DOUBLE, double)

typedef struct { int v, i; } pair_ii;
typedef struct { float v; int i; } pair_fi;
typedef struct { double v; int i; } pair_di;
typedef struct { long v; int i; } pair_li;

#define LOOP(T, EXPR)                                                     \
	do {                                                              \
		const T *a = in;                                          \
		T *b = inout;                                             \
		for (size_t k = 0; k < n; k++)                            \
			b[k] = (EXPR);                                    \
	} while (0)

#define LOC(T, CMP)                                                       \
	do {                                                              \
		const T *a = in;                                          \
		T *b = inout;                                             \
		for (size_t k = 0; k < n; k++)                            \
			if (a[k].v CMP b[k].v ||                          \
			    (a[k].v == b[k].v && a[k].i < b[k].i))        \
				b[k] = a[k];                              \
	} while (0)

/* User operations: 0x58000100 + index. */
#define USER_OP0 0x58000100
#define MAX_USER_OPS 64
static MPI_User_function *user_ops[MAX_USER_OPS];

/* inout[k] = in[k] op inout[k]; in is the lower rank's contribution. */
static int op_apply(MPI_Op op, MPI_Datatype t, const void *in, void *inout,
		    size_t n)
{
	if (op >= USER_OP0 && op < USER_OP0 + MAX_USER_OPS) {
		int len = (int)n;
		user_ops[op - USER_OP0]((void *)in, inout, &len, &t);
		return MPI_SUCCESS;
	}
	if (op == MPI_MAXLOC || op == MPI_MINLOC) {
		bool mx = op == MPI_MAXLOC;
		switch (t) {
		case MPI_2INT:
			if (mx) LOC(pair_ii, >); else LOC(pair_ii, <);
			return MPI_SUCCESS;
		case MPI_FLOAT_INT:
			if (mx) LOC(pair_fi, >); else LOC(pair_fi, <);
			return MPI_SUCCESS;
		case MPI_DOUBLE_INT:
			if (mx) LOC(pair_di, >); else LOC(pair_di, <);
			return MPI_SUCCESS;
		case MPI_LONG_INT:
			if (mx) LOC(pair_li, >); else LOC(pair_li, <);
			return MPI_SUCCESS;
		default:
			return MPI_ERR_OP;
		}
	}
	switch (t) {
#define INT_CASE(H, T)                                                    \
	case H:                                                           \
		switch (op) {                                             \
		case MPI_SUM: LOOP(T, a[k] + b[k]); break;                \
		case MPI_PROD: LOOP(T, a[k] * b[k]); break;               \
		case MPI_MAX: LOOP(T, a[k] > b[k] ? a[k] : b[k]); break;  \
		case MPI_MIN: LOOP(T, a[k] < b[k] ? a[k] : b[k]); break;  \
		case MPI_LAND: LOOP(T, a[k] && b[k]); break;              \
		case MPI_LOR: LOOP(T, a[k] || b[k]); break;               \
		case MPI_LXOR: LOOP(T, !a[k] != !b[k]); break;            \
		case MPI_BAND: LOOP(T, a[k] & b[k]); break;               \
		case MPI_BOR: LOOP(T, a[k] | b[k]); break;                \
		case MPI_BXOR: LOOP(T, a[k] ^ b[k]); break;               \
		default: return MPI_ERR_OP;                               \
		}                                                         \
		return MPI_SUCCESS;
	FOR_INT(INT_CASE)
#define FLT_CASE(H, T)                                                    \
	case H:                                                           \
		switch (op) {                                             \
		case MPI_SUM: LOOP(T, a[k] + b[k]); break;                \
		case MPI_PROD: LOOP(T, a[k] * b[k]); break;               \
		case MPI_MAX: LOOP(T, a[k] > b[k] ? a[k] : b[k]); break;  \
		case MPI_MIN: LOOP(T, a[k] < b[k] ? a[k] : b[k]); break;  \
		case MPI_LAND: LOOP(T, a[k] && b[k]); break;              \
		case MPI_LOR: LOOP(T, a[k] || b[k]); break;               \
		case MPI_LXOR: LOOP(T, !a[k] != !b[k]); break;            \
		default: return MPI_ERR_OP;                               \
		}                                                         \
		return MPI_SUCCESS;
	FOR_FLOAT(FLT_CASE)
	case MPI_C_BOOL:
		switch (op) {
		case MPI_LAND: LOOP(_Bool, a[k] && b[k]); break;
		case MPI_LOR: LOOP(_Bool, a[k] || b[k]); break;
		case MPI_LXOR: LOOP(_Bool, a[k] != b[k]); break;
		default: return MPI_ERR_OP;
		}
		return MPI_SUCCESS;
	case MPI_BYTE:
		switch (op) {
		case MPI_BAND: LOOP(unsigned char, a[k] & b[k]); break;
		case MPI_BOR: LOOP(unsigned char, a[k] | b[k]); break;
		case MPI_BXOR: LOOP(unsigned char, a[k] ^ b[k]); break;
		default: return MPI_ERR_OP;
		}
		return MPI_SUCCESS;
	default:
		return MPI_ERR_OP;
	}
}

static bool op_ok(MPI_Op op)
{
	if (op >= MPI_MAX && op <= MPI_MAXLOC)
		return true;
	return op >= USER_OP0 && op < USER_OP0 + MAX_USER_OPS &&
	       user_ops[op - USER_OP0];
}

/* --------------------------------------------------- pcor send / receive */

/* Send and wait until the receiver took it (retrying under backpressure). */
static int raw_send(comm_t *c, uint32_t ctx, int dst, int tag,
		    const void *buf, size_t len)
{
	pcor_handle_t h;
	int rc;
	do
		rc = pcori_ctx_send(c->pids[dst], 0, tag, ctx, buf, len, &h);
	while (rc == PCOR_ERR_AGAIN);
	if (rc == PCOR_OK)
		rc = pcor_handle_test(h, PCOR_BLOCK);
	return rc;
}

static int raw_recv(comm_t *c, uint32_t ctx, int src, int tag, void *buf,
		    size_t cap, pcor_msginfo_t *info)
{
	pcor_handle_t h;
	int rc;
	do
		rc = pcori_ctx_recv(src < 0 ? PCOR_ANY_PID : c->pids[src],
				    src < 0 ? PCOR_ANY_THID : 0, tag, ctx,
				    buf, cap, info, &h);
	while (rc == PCOR_ERR_AGAIN);
	if (rc == PCOR_OK)
		rc = pcor_handle_test(h, PCOR_BLOCK);
	return rc;
}

/* Exchange with two peers at once (no deadlock whatever the order). */
static int raw_sendrecv(comm_t *c, uint32_t ctx, int dst, int tag,
			const void *sbuf, size_t slen, int src, void *rbuf,
			size_t rcap)
{
	pcor_handle_t hs, hr;
	int rc;
	do
		rc = pcori_ctx_recv(c->pids[src], 0, tag, ctx, rbuf, rcap,
				    NULL, &hr);
	while (rc == PCOR_ERR_AGAIN);
	if (rc)
		return rc;
	do
		rc = pcori_ctx_send(c->pids[dst], 0, tag, ctx, sbuf, slen,
				    &hs);
	while (rc == PCOR_ERR_AGAIN);
	if (rc == PCOR_OK)
		rc = pcor_handle_test(hs, PCOR_BLOCK);
	int rc2 = pcor_handle_test(hr, PCOR_BLOCK);
	return rc ? rc : rc2;
}

/* ----------------------------------------------------------- environment */

static void bsend_fini(void);

static int comm_new(void)
{
	for (int i = 0; i < g.ncomms; i++)
		if (!g.comms[i].used)
			return i;
	int n = g.ncomms ? 2 * g.ncomms : 8;
	comm_t *c = realloc(g.comms, n * sizeof(*c));
	if (!c)
		return -1;
	memset(c + g.ncomms, 0, (n - g.ncomms) * sizeof(*c));
	g.comms = c;
	int i = g.ncomms;
	g.ncomms = n;
	return i;
}

/* Fill comm i with the given world pids (taken over), rank of self. */
static void comm_fill(int i, int *pids, int size, uint32_t id,
		      MPI_Errhandler eh)
{
	comm_t *c = &g.comms[i];
	c->used = true;
	c->size = size;
	c->pids = pids;
	c->rank_of = malloc(g.nprocs * sizeof(int));
	for (int p = 0; p < g.nprocs; p++)
		c->rank_of[p] = -1;
	c->rank = -1;
	for (int r = 0; r < size; r++) {
		c->rank_of[pids[r]] = r;
		if (pids[r] == g.pid)
			c->rank = r;
	}
	c->ctx = 2 * id;
	c->eh = eh;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	if (g.state) {
		fprintf(stderr, "pcor MPI: MPI_Init called twice\n");
		_exit(1);
	}
	int rc = pcor_init(argc, argv);
	if (rc) {
		fprintf(stderr, "pcor MPI: MPI_Init: pcor_init: %s\n",
			pcor_strerror(rc));
		_exit(1);
	}
	g.nprocs = pcor_nprocs();
	g.pid = pcor_self_pid();
	g.state = 1;
	g.thread_level = required < MPI_THREAD_FUNNELED ? required
							: MPI_THREAD_FUNNELED;
	if (provided)
		*provided = g.thread_level;
	comm_new();
	comm_new();
	int *w = malloc(g.nprocs * sizeof(int));
	int *s = malloc(sizeof(int));
	for (int p = 0; p < g.nprocs; p++)
		w[p] = p;
	s[0] = g.pid;
	comm_fill(0, w, g.nprocs, 1, MPI_ERRORS_ARE_FATAL);
	comm_fill(1, s, 1, 2, MPI_ERRORS_ARE_FATAL);
	g.next_ctx = 3;
	return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
	return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, NULL);
}

int MPI_Finalize(void)
{
	CHECK_INIT("MPI_Finalize");
	bsend_fini();
	/* Nobody leaves while a peer may still send to it. */
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = 0; i < g.ncomms; i++) {
		free(g.comms[i].pids);
		free(g.comms[i].rank_of);
	}
	free(g.comms);
	free(g.reqs);
	g.comms = NULL;
	g.reqs = NULL;
	g.ncomms = g.nreqs = 0;
	g.state = 2;
	int rc = pcor_finalize();
	return rc ? MPI_ERR_INTERN : MPI_SUCCESS;
}

int MPI_Initialized(int *flag)
{
	*flag = g.state != 0;
	return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
	*flag = g.state == 2;
	return MPI_SUCCESS;
}

int MPI_Query_thread(int *provided)
{
	*provided = g.thread_level;
	return MPI_SUCCESS;
}

int MPI_Is_thread_main(int *flag)
{
	*flag = pcor_self_thid() == 0;
	return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
	(void)comm;
	fprintf(stderr, "pcor MPI: MPI_Abort(%d) on rank %d\n", errorcode,
		g.pid);
	fflush(stderr);
	/* pcorrun ends the whole job when one process exits non-zero. */
	_exit(errorcode ? errorcode & 0xff ? errorcode & 0xff : 1 : 1);
}

int MPI_Get_version(int *version, int *subversion)
{
	*version = MPI_VERSION;
	*subversion = MPI_SUBVERSION;
	return MPI_SUCCESS;
}

int MPI_Get_library_version(char *version, int *resultlen)
{
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
		return fail(MPI_COMM_WORLD, "MPI_Get_processor_name",
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
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_set_errhandler", MPI_ERR_COMM);
	if (errhandler != MPI_ERRORS_RETURN &&
	    errhandler != MPI_ERRORS_ARE_FATAL)
		return fail(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG);
	c->eh = errhandler;
	return MPI_SUCCESS;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
	CHECK_INIT("MPI_Comm_get_errhandler");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_get_errhandler", MPI_ERR_COMM);
	*errhandler = c->eh;
	return MPI_SUCCESS;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen)
{
	const char *s = errorcode >= 0 && errorcode < NERR &&
			err_names[errorcode] ? err_names[errorcode] : NULL;
	if (!s)
		return MPI_ERR_ARG;
	snprintf(string, MPI_MAX_ERROR_STRING, "%s", s);
	*resultlen = (int)strlen(string);
	return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int *errorclass)
{
	if (errorcode < 0 || errorcode >= NERR || !err_names[errorcode])
		return MPI_ERR_ARG;
	*errorclass = errorcode; /* codes are their classes here */
	return MPI_SUCCESS;
}

/* ------------------------------------------------------- communicators */

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
	CHECK_INIT("MPI_Comm_rank");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_rank", MPI_ERR_COMM);
	*rank = c->rank;
	return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
	CHECK_INIT("MPI_Comm_size");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_size", MPI_ERR_COMM);
	*size = c->size;
	return MPI_SUCCESS;
}

static int allreduce_c(comm_t *c, const void *sbuf, void *rbuf, int count,
		       MPI_Datatype t, MPI_Op op);
static int allgather_c(comm_t *c, const void *sbuf, void *rbuf,
		       size_t len);

/* Agree on a context id fresh on every member of c. */
static int agree_ctx(comm_t *c, uint32_t *id)
{
	unsigned mine = g.next_ctx, all;
	int rc = allreduce_c(c, &mine, &all, 1, MPI_UNSIGNED, MPI_MAX);
	if (rc)
		return rc;
	g.next_ctx = all + 1;
	*id = all;
	return MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_dup");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_dup", MPI_ERR_COMM);
	uint32_t id;
	int rc = agree_ctx(c, &id);
	if (rc)
		return fail(comm, "MPI_Comm_dup", rc);
	int i = comm_new();
	c = comm_get(comm); /* comm_new may move the table */
	int *pids = malloc(c->size * sizeof(int));
	if (i < 0 || !pids)
		return fail(comm, "MPI_Comm_dup", MPI_ERR_OTHER);
	memcpy(pids, c->pids, c->size * sizeof(int));
	comm_fill(i, pids, c->size, id, c->eh);
	*newcomm = (MPI_Comm)(COMM_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

typedef struct { int color, key, rank; } split_t;

static int split_cmp(const void *a, const void *b)
{
	const split_t *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_split");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_split", MPI_ERR_COMM);
	if (color < 0 && color != MPI_UNDEFINED)
		return fail(comm, "MPI_Comm_split", MPI_ERR_ARG);
	split_t mine = {color, key, c->rank};
	split_t *all = malloc(c->size * sizeof(*all));
	if (!all)
		return fail(comm, "MPI_Comm_split", MPI_ERR_OTHER);
	int rc = allgather_c(c, &mine, all, sizeof(mine));
	uint32_t id = 0;
	if (!rc)
		rc = agree_ctx(c, &id);
	if (rc) {
		free(all);
		return fail(comm, "MPI_Comm_split", rc);
	}
	if (color == MPI_UNDEFINED) {
		free(all);
		*newcomm = MPI_COMM_NULL;
		return MPI_SUCCESS;
	}
	int n = 0;
	for (int r = 0; r < c->size; r++)
		if (all[r].color == color)
			all[n++] = all[r];
	qsort(all, n, sizeof(*all), split_cmp);
	int *pids = malloc(n * sizeof(int));
	for (int r = 0; r < n && pids; r++)
		pids[r] = c->pids[all[r].rank];
	free(all);
	MPI_Errhandler eh = c->eh;
	int i = comm_new();
	if (i < 0 || !pids) {
		free(pids);
		return fail(comm, "MPI_Comm_split", MPI_ERR_OTHER);
	}
	/* Groups of one split share the id: their members never overlap. */
	comm_fill(i, pids, n, id, eh);
	*newcomm = (MPI_Comm)(COMM_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
	CHECK_INIT("MPI_Comm_compare");
	comm_t *a = comm_get(comm1), *b = comm_get(comm2);
	if (!a || !b)
		return fail(a ? comm2 : comm1, "MPI_Comm_compare",
			    MPI_ERR_COMM);
	if (a == b) {
		*result = MPI_IDENT;
		return MPI_SUCCESS;
	}
	if (a->size != b->size) {
		*result = MPI_UNEQUAL;
		return MPI_SUCCESS;
	}
	bool same_order = true, same_set = true;
	for (int r = 0; r < a->size; r++) {
		if (a->pids[r] != b->pids[r])
			same_order = false;
		if (b->rank_of[a->pids[r]] < 0)
			same_set = false;
	}
	*result = same_order ? MPI_CONGRUENT :
		  same_set ? MPI_SIMILAR : MPI_UNEQUAL;
	return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
	CHECK_INIT("MPI_Comm_free");
	comm_t *c = comm ? comm_get(*comm) : NULL;
	if (!c || *comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
		return fail(comm ? *comm : MPI_COMM_NULL, "MPI_Comm_free",
			    MPI_ERR_COMM);
	free(c->pids);
	free(c->rank_of);
	memset(c, 0, sizeof(*c));
	*comm = MPI_COMM_NULL;
	return MPI_SUCCESS;
}

/* ------------------------------------------------------------- datatypes */

int MPI_Type_size(MPI_Datatype datatype, int *size)
{
	if (!type_ok(datatype))
		return fail(MPI_COMM_WORLD, "MPI_Type_size", MPI_ERR_TYPE);
	*size = (int)type_size(datatype);
	return MPI_SUCCESS;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype,
		  int *count)
{
	if (!type_ok(datatype))
		return fail(MPI_COMM_WORLD, "MPI_Get_count", MPI_ERR_TYPE);
	size_t sz = type_size(datatype);
	*count = status->pcor_bytes_ % sz ? MPI_UNDEFINED
					   : (int)(status->pcor_bytes_ / sz);
	return MPI_SUCCESS;
}

/* --------------------------------------------------------- point to point */

static int check_p2p(comm_t *c, int count, MPI_Datatype t, int peer,
		     int tag, bool recv)
{
	if (!c)
		return MPI_ERR_COMM;
	if (count < 0)
		return MPI_ERR_COUNT;
	if (!type_ok(t))
		return MPI_ERR_TYPE;
	if (recv ? tag < MPI_ANY_TAG || tag > TAG_UB : tag < 0 || tag > TAG_UB)
		return MPI_ERR_TAG;
	if (peer == MPI_PROC_NULL || (recv && peer == MPI_ANY_SOURCE))
		return MPI_SUCCESS;
	if (peer < 0 || peer >= c->size)
		return MPI_ERR_RANK;
	return MPI_SUCCESS;
}

static void status_set(MPI_Status *st, comm_t *c, const pcor_msginfo_t *in,
		       int err, bool null)
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

static int req_new(void)
{
	for (int i = 0; i < g.nreqs; i++)
		if (!g.reqs[i].used)
			return i;
	int n = g.nreqs ? 2 * g.nreqs : 64;
	req_t *r = realloc(g.reqs, n * sizeof(*r));
	if (!r)
		return -1;
	memset(r + g.nreqs, 0, (n - g.nreqs) * sizeof(*r));
	g.reqs = r;
	int i = g.nreqs;
	g.nreqs = n;
	return i;
}

static req_t *req_get(MPI_Request q)
{
	if (HKIND(q) != REQ_KIND)
		return NULL;
	int i = (q & 0xffffff) - 1;
	if (i < 0 || i >= g.nreqs || !g.reqs[i].used)
		return NULL;
	return &g.reqs[i];
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
	     int tag, MPI_Comm comm)
{
	CHECK_INIT("MPI_Send");
	comm_t *c = comm_get(comm);
	int rc = check_p2p(c, count, datatype, dest, tag, false);
	if (rc)
		return fail(comm, "MPI_Send", rc);
	if (dest == MPI_PROC_NULL)
		return MPI_SUCCESS;
	rc = raw_send(c, c->ctx, dest, tag, buf,
		      (size_t)count * type_size(datatype));
	return rc ? fail(comm, "MPI_Send", pcor_class(rc)) : MPI_SUCCESS;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source,
	     int tag, MPI_Comm comm, MPI_Status *status)
{
	CHECK_INIT("MPI_Recv");
	comm_t *c = comm_get(comm);
	int rc = check_p2p(c, count, datatype, source, tag, true);
	if (rc)
		return fail(comm, "MPI_Recv", rc);
	if (source == MPI_PROC_NULL) {
		status_set(status, c, NULL, MPI_SUCCESS, true);
		return MPI_SUCCESS;
	}
	pcor_msginfo_t info;
	rc = raw_recv(c, c->ctx, source == MPI_ANY_SOURCE ? -1 : source, tag,
		      buf, (size_t)count * type_size(datatype), &info);
	int err = pcor_class(rc);
	if (rc == PCOR_OK || rc == PCOR_ERR_TRUNCATE)
		status_set(status, c, &info, err, false);
	return err ? fail(comm, "MPI_Recv", err) : MPI_SUCCESS;
}

static int start(bool recv, void *buf, int count, MPI_Datatype t, int peer,
		 int tag, MPI_Comm comm, MPI_Request *request, const char *fn)
{
	CHECK_INIT(fn);
	comm_t *c = comm_get(comm);
	int rc = check_p2p(c, count, t, peer, tag, recv);
	if (rc)
		return fail(comm, fn, rc);
	if (!request)
		return fail(comm, fn, MPI_ERR_ARG);
	int i = req_new();
	if (i < 0)
		return fail(comm, fn, MPI_ERR_OTHER);
	req_t *r = &g.reqs[i];
	memset(r, 0, sizeof(*r));
	r->used = true;
	r->recv = recv;
	r->comm = comm;
	r->null = peer == MPI_PROC_NULL;
	if (!r->null) {
		size_t len = (size_t)count * type_size(t);
		do
			rc = recv ? pcori_ctx_recv(
					    peer == MPI_ANY_SOURCE ?
						    PCOR_ANY_PID :
						    c->pids[peer],
					    peer == MPI_ANY_SOURCE ?
						    PCOR_ANY_THID : 0,
					    tag, c->ctx, buf, len, &r->info,
					    &r->h)
				  : pcori_ctx_send(c->pids[peer], 0, tag,
						   c->ctx, buf, len, &r->h);
		while (rc == PCOR_ERR_AGAIN);
		if (rc) {
			r->used = false;
			return fail(comm, fn, pcor_class(rc));
		}
	}
	*request = (MPI_Request)(REQ_KIND | (unsigned)(i + 1));
	return MPI_SUCCESS;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm, MPI_Request *request)
{
	return start(false, (void *)buf, count, datatype, dest, tag, comm,
		     request, "MPI_Isend");
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source,
	      int tag, MPI_Comm comm, MPI_Request *request)
{
	return start(true, buf, count, datatype, source, tag, comm, request,
		     "MPI_Irecv");
}

/*
 * Test (block false) or wait for request *q.  Returns the error class of
 * the completed operation, with *done; frees the request when done.
 */
static int complete(MPI_Request *q, bool block, int *done, MPI_Status *st)
{
	if (*q == MPI_REQUEST_NULL) {
		*done = 1;
		status_set(st, NULL, NULL, MPI_SUCCESS, true);
		return MPI_SUCCESS;
	}
	req_t *r = req_get(*q);
	if (!r)
		return MPI_ERR_REQUEST;
	int err = MPI_SUCCESS;
	if (r->null) {
		status_set(st, NULL, NULL, MPI_SUCCESS, true);
	} else {
		int rc = pcor_handle_test(r->h, block ? PCOR_BLOCK
						       : PCOR_NONBLOCK);
		if (rc == PCOR_INPROGRESS) {
			*done = 0;
			return MPI_SUCCESS;
		}
		err = pcor_class(rc);
		if (r->recv && (rc == PCOR_OK || rc == PCOR_ERR_TRUNCATE))
			status_set(st, comm_get(r->comm), &r->info, err,
				   false);
		else if (st)
			st->MPI_ERROR = err;
	}
	r->used = false;
	*q = MPI_REQUEST_NULL;
	*done = 1;
	return err;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	CHECK_INIT("MPI_Wait");
	int done;
	req_t *r = request ? req_get(*request) : NULL;
	MPI_Comm comm = r ? r->comm : MPI_COMM_WORLD;
	if (!request)
		return fail(comm, "MPI_Wait", MPI_ERR_REQUEST);
	int err = complete(request, true, &done, status);
	return err ? fail(comm, "MPI_Wait", err) : MPI_SUCCESS;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	CHECK_INIT("MPI_Test");
	req_t *r = request ? req_get(*request) : NULL;
	MPI_Comm comm = r ? r->comm : MPI_COMM_WORLD;
	if (!request || !flag)
		return fail(comm, "MPI_Test", MPI_ERR_ARG);
	int err = complete(request, false, flag, status);
	return err ? fail(comm, "MPI_Test", err) : MPI_SUCCESS;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	CHECK_INIT("MPI_Waitall");
	int any = MPI_SUCCESS, done;
	MPI_Comm comm = MPI_COMM_WORLD;
	for (int i = 0; i < count; i++) {
		req_t *r = req_get(requests[i]);
		if (r)
			comm = r->comm;
		int err = complete(&requests[i], true, &done,
				   statuses ? &statuses[i] : NULL);
		if (err)
			any = MPI_ERR_IN_STATUS;
	}
	return any ? fail(comm, "MPI_Waitall", any) : MPI_SUCCESS;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag,
		MPI_Status statuses[])
{
	CHECK_INIT("MPI_Testall");
	/* All or nothing: complete only when every request has. */
	for (int i = 0; i < count; i++) {
		req_t *r = req_get(requests[i]);
		if (r && !r->null) {
			/* Peek without releasing: a wait of 0 keeps it. */
			int rc = pcor_handle_wait(r->h, 0);
			if (rc == PCOR_ERR_TIMEDOUT) {
				*flag = 0;
				return MPI_SUCCESS;
			}
			/* Completed and released by the wait: record it. */
			int err = pcor_class(rc);
			r->null = true;
			if (statuses) {
				if (r->recv)
					status_set(&statuses[i],
						   comm_get(r->comm), &r->info,
						   err, false);
				else
					statuses[i].MPI_ERROR = err;
			}
		}
	}
	*flag = 1;
	for (int i = 0; i < count; i++) {
		req_t *r = req_get(requests[i]);
		if (r)
			r->used = false;
		requests[i] = MPI_REQUEST_NULL;
	}
	return MPI_SUCCESS;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index,
		MPI_Status *status)
{
	CHECK_INIT("MPI_Waitany");
	/* Bounded only by the peers: poll until one completes. */
	for (;;) {
		bool active = false;
		for (int i = 0; i < count; i++) {
			if (requests[i] == MPI_REQUEST_NULL)
				continue;
			active = true;
			int done;
			int err = complete(&requests[i], false, &done, status);
			if (err || done) {
				*index = i;
				return err ? fail(MPI_COMM_WORLD,
						  "MPI_Waitany", err)
					   : MPI_SUCCESS;
			}
		}
		if (!active) {
			*index = MPI_UNDEFINED;
			status_set(status, NULL, NULL, MPI_SUCCESS, true);
			return MPI_SUCCESS;
		}
		sched_yield();
	}
}

int MPI_Request_free(MPI_Request *request)
{
	CHECK_INIT("MPI_Request_free");
	req_t *r = request ? req_get(*request) : NULL;
	if (!r)
		return fail(MPI_COMM_WORLD, "MPI_Request_free",
			    MPI_ERR_REQUEST);
	/* The operation still completes; its outcome is simply dropped. */
	int done;
	complete(request, true, &done, NULL);
	return MPI_SUCCESS;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 int dest, int sendtag, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int source, int recvtag,
		 MPI_Comm comm, MPI_Status *status)
{
	MPI_Request q;
	int rc = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag,
			   comm, &q);
	if (rc)
		return rc;
	rc = MPI_Send(sendbuf, sendcount, sendtype, dest, sendtag, comm);
	int rc2 = MPI_Wait(&q, status);
	return rc ? rc : rc2;
}

/* ------------------------------------------------------------ collectives */

static int check_coll(comm_t *c, int count, MPI_Datatype t)
{
	if (!c)
		return MPI_ERR_COMM;
	if (count < 0)
		return MPI_ERR_COUNT;
	if (!type_ok(t))
		return MPI_ERR_TYPE;
	return MPI_SUCCESS;
}

static int barrier_c(comm_t *c)
{
	/* Dissemination: ceil(log2 n) rounds of one exchange each. */
	int round = 0;
	for (int k = 1; k < c->size; k <<= 1, round++) {
		int rc = raw_sendrecv(c, c->ctx + 1, (c->rank + k) % c->size,
				      T_BARRIER * 64 + round, NULL, 0,
				      (c->rank - k + c->size) % c->size, NULL,
				      0);
		if (rc)
			return pcor_class(rc);
	}
	return MPI_SUCCESS;
}

static int bcast_c(comm_t *c, void *buf, size_t len, int root)
{
	/* Binomial tree over ranks relative to the root. */
	int n = c->size, v = (c->rank - root + n) % n, mask = 1, rc;
	while (mask < n) {
		if (v & mask) {
			rc = raw_recv(c, c->ctx + 1, (v - mask + root) % n,
				      T_BCAST, buf, len, NULL);
			if (rc)
				return pcor_class(rc);
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; mask > 0; mask >>= 1) {
		if (v + mask < n) {
			rc = raw_send(c, c->ctx + 1, (v + mask + root) % n,
				      T_BCAST, buf, len);
			if (rc)
				return pcor_class(rc);
		}
	}
	return MPI_SUCCESS;
}

/*
 * Reduce to root: the root collects every contribution, then folds them
 * from the highest rank down so the result is s0 op s1 op ... in rank
 * order whatever op.
 */
static int reduce_c(comm_t *c, const void *sbuf, void *rbuf, int count,
		    MPI_Datatype t, MPI_Op op, int root)
{
	size_t len = (size_t)count * type_size(t);
	if (sbuf == MPI_IN_PLACE) /* allreduce: every rank's data is in rbuf */
		sbuf = rbuf;
	if (c->rank != root) {
		int rc = raw_send(c, c->ctx + 1, root, T_REDUCE, sbuf, len);
		return pcor_class(rc);
	}
	const void *mine = sbuf;
	char *all = malloc(len * c->size + 1);
	if (!all)
		return MPI_ERR_OTHER;
	for (int r = 0; r < c->size; r++) {
		int rc = PCOR_OK;
		if (r == root)
			memcpy(all + r * len, mine, len);
		else
			rc = raw_recv(c, c->ctx + 1, r, T_REDUCE,
				      all + r * len, len, NULL);
		if (rc) {
			free(all);
			return pcor_class(rc);
		}
	}
	char *acc = all + (c->size - 1) * len;
	int err = MPI_SUCCESS;
	for (int r = c->size - 2; r >= 0 && !err; r--)
		err = op_apply(op, t, all + r * len, acc, count);
	if (!err)
		memcpy(rbuf, acc, len);
	free(all);
	return err;
}

static int allreduce_c(comm_t *c, const void *sbuf, void *rbuf, int count,
		       MPI_Datatype t, MPI_Op op)
{
	int err = reduce_c(c, sbuf, rbuf, count, t, op, 0);
	if (!err)
		err = bcast_c(c, rbuf, (size_t)count * type_size(t), 0);
	return err;
}

/* Gather len bytes of every rank into rbuf at root (IN_PLACE at root). */
static int gather_c(comm_t *c, const void *sbuf, void *rbuf, size_t len,
		    int root)
{
	if (c->rank != root)
		return pcor_class(raw_send(c, c->ctx + 1, root, T_GATHER,
					   sbuf, len));
	for (int r = 0; r < c->size; r++) {
		char *dst = (char *)rbuf + r * len;
		if (r == root) {
			if (sbuf != MPI_IN_PLACE)
				memmove(dst, sbuf, len);
			continue;
		}
		int rc = raw_recv(c, c->ctx + 1, r, T_GATHER, dst, len, NULL);
		if (rc)
			return pcor_class(rc);
	}
	return MPI_SUCCESS;
}

static int allgather_c(comm_t *c, const void *sbuf, void *rbuf, size_t len)
{
	if (sbuf == MPI_IN_PLACE)
		sbuf = (char *)rbuf + c->rank * len;
	int err = gather_c(c, c->rank == 0 ? (const void *)MPI_IN_PLACE : sbuf,
			   rbuf, len, 0);
	if (c->rank == 0 && sbuf != rbuf)
		memmove(rbuf, sbuf, len);
	if (!err)
		err = bcast_c(c, rbuf, len * c->size, 0);
	return err;
}

int MPI_Barrier(MPI_Comm comm)
{
	CHECK_INIT("MPI_Barrier");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Barrier", MPI_ERR_COMM);
	int err = barrier_c(c);
	return err ? fail(comm, "MPI_Barrier", err) : MPI_SUCCESS;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
	      MPI_Comm comm)
{
	CHECK_INIT("MPI_Bcast");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, count, datatype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err)
		err = bcast_c(c, buffer, (size_t)count * type_size(datatype),
			      root);
	return err ? fail(comm, "MPI_Bcast", err) : MPI_SUCCESS;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, count, datatype);
	if (!err && !op_ok(op))
		err = MPI_ERR_OP;
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err)
		err = reduce_c(c, sendbuf, recvbuf, count, datatype, op, root);
	return err ? fail(comm, "MPI_Reduce", err) : MPI_SUCCESS;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
		  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Allreduce");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, count, datatype);
	if (!err && !op_ok(op))
		err = MPI_ERR_OP;
	if (!err)
		err = allreduce_c(c, sendbuf, recvbuf, count, datatype, op);
	return err ? fail(comm, "MPI_Allreduce", err) : MPI_SUCCESS;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
	       void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
	       MPI_Comm comm)
{
	CHECK_INIT("MPI_Gather");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, sendcount, sendtype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root)
		err = check_coll(c, recvcount, recvtype);
	size_t len = (size_t)sendcount * type_size(sendtype);
	if (!err && c->rank == root &&
	    (size_t)recvcount * type_size(recvtype) != len &&
	    sendbuf != MPI_IN_PLACE)
		err = MPI_ERR_TRUNCATE;
	if (!err && c->rank == root)
		len = (size_t)recvcount * type_size(recvtype);
	if (!err)
		err = gather_c(c, sendbuf, recvbuf, len, root);
	return err ? fail(comm, "MPI_Gather", err) : MPI_SUCCESS;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		MPI_Comm comm)
{
	CHECK_INIT("MPI_Scatter");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, recvcount, recvtype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root)
		err = check_coll(c, sendcount, sendtype);
	if (err)
		return fail(comm, "MPI_Scatter", err);
	size_t len = (size_t)recvcount * type_size(recvtype);
	if (c->rank != root) {
		int rc = raw_recv(c, c->ctx + 1, root, T_SCATTER, recvbuf, len,
				  NULL);
		err = pcor_class(rc);
		return err ? fail(comm, "MPI_Scatter", err) : MPI_SUCCESS;
	}
	size_t slen = (size_t)sendcount * type_size(sendtype);
	for (int r = 0; r < c->size && !err; r++) {
		const char *src = (const char *)sendbuf + r * slen;
		if (r == root) {
			if (recvbuf != MPI_IN_PLACE)
				memmove(recvbuf, src, slen < len ? slen : len);
			continue;
		}
		err = pcor_class(raw_send(c, c->ctx + 1, r, T_SCATTER, src,
					  slen));
	}
	return err ? fail(comm, "MPI_Scatter", err) : MPI_SUCCESS;
}

int MPI_Allgather(const void *sendbuf, int sendcount,
		  MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm)
{
	CHECK_INIT("MPI_Allgather");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, recvcount, recvtype);
	if (!err && sendbuf != MPI_IN_PLACE)
		err = check_coll(c, sendcount, sendtype);
	if (!err)
		err = allgather_c(c, sendbuf, recvbuf,
				  (size_t)recvcount * type_size(recvtype));
	return err ? fail(comm, "MPI_Allgather", err) : MPI_SUCCESS;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype,
		 MPI_Comm comm)
{
	CHECK_INIT("MPI_Alltoall");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, recvcount, recvtype);
	if (!err)
		err = check_coll(c, sendcount, sendtype);
	if (err)
		return fail(comm, "MPI_Alltoall", err);
	size_t len = (size_t)recvcount * type_size(recvtype);
	size_t slen = (size_t)sendcount * type_size(sendtype);
	int n = c->size;
	pcor_handle_t *h = calloc((unsigned)n, sizeof(*h));
	if (!h)
		return fail(comm, "MPI_Alltoall", MPI_ERR_OTHER);
	int rc = PCOR_OK;
	/* Post every receive first, then send in a staggered order. */
	for (int k = 1; k < n && !rc; k++) {
		int r = (c->rank - k + n) % n;
		do
			rc = pcori_ctx_recv(c->pids[r], 0, T_ALLTOALL,
					    c->ctx + 1, (char *)recvbuf + r * len,
					    len, NULL, &h[r]);
		while (rc == PCOR_ERR_AGAIN);
	}
	memmove((char *)recvbuf + c->rank * len,
		(const char *)sendbuf + c->rank * slen, slen < len ? slen : len);
	for (int k = 1; k < n && !rc; k++) {
		int r = (c->rank + k) % n;
		rc = raw_send(c, c->ctx + 1, r, T_ALLTOALL,
			      (const char *)sendbuf + r * slen, slen);
	}
	for (int k = 1; k < n; k++) {
		int r2 = pcor_handle_test(h[(c->rank - k + n) % n], PCOR_BLOCK);
		if (!rc)
			rc = r2;
	}
	free(h);
	err = pcor_class(rc);
	return err ? fail(comm, "MPI_Alltoall", err) : MPI_SUCCESS;
}

/* ------------------------------------------------- probe, buffered sends */

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
	       MPI_Status *status)
{
	CHECK_INIT("MPI_Iprobe");
	comm_t *c = comm_get(comm);
	int err = check_p2p(c, 0, MPI_BYTE, source, tag, true);
	if (!err && !flag)
		err = MPI_ERR_ARG;
	if (err)
		return fail(comm, "MPI_Iprobe", err);
	if (source == MPI_PROC_NULL) {
		*flag = 1;
		status_set(status, c, NULL, MPI_SUCCESS, true);
		return MPI_SUCCESS;
	}
	pcor_msginfo_t info;
	int rc = pcori_ctx_probe(source == MPI_ANY_SOURCE ? PCOR_ANY_PID
							  : c->pids[source],
				 source == MPI_ANY_SOURCE ? PCOR_ANY_THID : 0,
				 tag, c->ctx, &info);
	if (rc < 0)
		return fail(comm, "MPI_Iprobe", pcor_class(rc));
	*flag = rc;
	if (rc)
		status_set(status, c, &info, MPI_SUCCESS, false);
	return MPI_SUCCESS;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	int flag = 0, rc;
	/* Messages arrive through pcor's dispatchers: look until one is in. */
	while ((rc = MPI_Iprobe(source, tag, comm, &flag, status)) ==
		       MPI_SUCCESS && !flag)
		sched_yield();
	return rc;
}

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

static void bsend_fini(void)
{
	bsend_reap(true);
	free(bs.pending);
	memset(&bs, 0, sizeof(bs));
}

int MPI_Buffer_attach(void *buffer, int size)
{
	CHECK_INIT("MPI_Buffer_attach");
	if (bs.buf || size < 0 || (!buffer && size))
		return fail(MPI_COMM_WORLD, "MPI_Buffer_attach",
			    bs.buf ? MPI_ERR_BUFFER : MPI_ERR_ARG);
	bs.buf = buffer;
	bs.size = size;
	return MPI_SUCCESS;
}

int MPI_Buffer_detach(void *buffer_addr, int *size)
{
	CHECK_INIT("MPI_Buffer_detach");
	bsend_reap(true);
	*(void **)buffer_addr = bs.buf;
	*size = bs.size;
	bs.buf = NULL;
	bs.size = 0;
	return MPI_SUCCESS;
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm)
{
	CHECK_INIT("MPI_Bsend");
	comm_t *c = comm_get(comm);
	int err = check_p2p(c, count, datatype, dest, tag, false);
	size_t len = err ? 0 : (size_t)count * type_size(datatype);
	if (!err && (!bs.buf || len > (size_t)bs.size))
		err = MPI_ERR_BUFFER; /* the standard asks for room */
	if (err)
		return fail(comm, "MPI_Bsend", err);
	if (dest == MPI_PROC_NULL)
		return MPI_SUCCESS;
	bsend_reap(false);
	if (bs.npending == bs.cap) {
		int n = bs.cap ? 2 * bs.cap : 16;
		pcor_handle_t *p = realloc(bs.pending, n * sizeof(*p));
		if (!p)
			return fail(comm, "MPI_Bsend", MPI_ERR_OTHER);
		bs.pending = p;
		bs.cap = n;
	}
	int rc;
	do
		rc = pcori_ctx_send(c->pids[dest], 0, tag, c->ctx, buf, len,
				    &bs.pending[bs.npending]);
	while (rc == PCOR_ERR_AGAIN);
	if (rc)
		return fail(comm, "MPI_Bsend", pcor_class(rc));
	bs.npending++;
	return MPI_SUCCESS;
}

/* --------------------------------------- split_type, attributes, memory */

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key,
			MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_split_type");
	comm_t *c = comm_get(comm);
	if (!c)
		return fail(comm, "MPI_Comm_split_type", MPI_ERR_COMM);
	if (split_type == MPI_UNDEFINED)
		return MPI_Comm_split(comm, MPI_UNDEFINED, key, newcomm);
	if (split_type != MPI_COMM_TYPE_SHARED)
		return fail(comm, "MPI_Comm_split_type", MPI_ERR_ARG);
	/* Colour: the lowest world pid of this communicator on our host. */
	pcor_proc_info_t me, other;
	if (pcor_proc_info(g.pid, &me) != PCOR_OK)
		return fail(comm, "MPI_Comm_split_type", MPI_ERR_INTERN);
	int color = g.pid;
	for (int r = 0; r < c->size; r++) {
		int rc = pcor_proc_info(c->pids[r], &other);
		if (rc == PCOR_OK && !strcmp(other.host, me.host)) {
			color = c->pids[r] < color ? c->pids[r] : color;
			break;
		}
	}
	return MPI_Comm_split(comm, color, key, newcomm);
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
		      int *flag)
{
	CHECK_INIT("MPI_Comm_get_attr");
	static int tag_ub = TAG_UB, wtime_global = 0;
	if (!comm_get(comm))
		return fail(comm, "MPI_Comm_get_attr", MPI_ERR_COMM);
	*flag = 1;
	switch (comm_keyval) {
	case MPI_TAG_UB:
		*(int **)attribute_val = &tag_ub;
		break;
	case MPI_WTIME_IS_GLOBAL:
		*(int **)attribute_val = &wtime_global;
		break;
	default:
		*flag = 0;
	}
	return MPI_SUCCESS;
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
	(void)info;
	if (size < 0)
		return fail(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_ARG);
	void *p = malloc(size ? (size_t)size : 1);
	if (!p)
		return fail(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_OTHER);
	*(void **)baseptr = p;
	return MPI_SUCCESS;
}

int MPI_Free_mem(void *base)
{
	free(base);
	return MPI_SUCCESS;
}

/* ------------------------------------------- v-collectives, scans, ops */

int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op)
{
	(void)commute; /* every reduction here folds in rank order */
	for (int i = 0; i < MAX_USER_OPS; i++)
		if (!user_ops[i]) {
			user_ops[i] = user_fn;
			*op = USER_OP0 + i;
			return MPI_SUCCESS;
		}
	return fail(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_OTHER);
}

int MPI_Op_free(MPI_Op *op)
{
	if (!op || *op < USER_OP0 || *op >= USER_OP0 + MAX_USER_OPS ||
	    !user_ops[*op - USER_OP0])
		return fail(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP);
	user_ops[*op - USER_OP0] = NULL;
	*op = MPI_OP_NULL;
	return MPI_SUCCESS;
}

static int check_counts(comm_t *c, const int *counts, const int *displs)
{
	if (!counts || !displs)
		return MPI_ERR_ARG;
	for (int r = 0; r < c->size; r++)
		if (counts[r] < 0)
			return MPI_ERR_COUNT;
	return MPI_SUCCESS;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, const int recvcounts[], const int displs[],
		MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	CHECK_INIT("MPI_Gatherv");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, sendbuf == MPI_IN_PLACE ? 0 : sendcount,
			     sendbuf == MPI_IN_PLACE ? MPI_BYTE : sendtype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root) {
		err = check_coll(c, 0, recvtype);
		if (!err)
			err = check_counts(c, recvcounts, displs);
	}
	if (err)
		return fail(comm, "MPI_Gatherv", err);
	if (c->rank != root) {
		err = pcor_class(raw_send(c, c->ctx + 1, root, T_GATHER,
					  sendbuf, (size_t)sendcount *
						   type_size(sendtype)));
		return err ? fail(comm, "MPI_Gatherv", err) : MPI_SUCCESS;
	}
	size_t ts = type_size(recvtype);
	for (int r = 0; r < c->size && !err; r++) {
		char *dst = (char *)recvbuf + (size_t)displs[r] * ts;
		size_t len = (size_t)recvcounts[r] * ts;
		if (r == root) {
			if (sendbuf != MPI_IN_PLACE)
				memmove(dst, sendbuf, len);
			continue;
		}
		err = pcor_class(raw_recv(c, c->ctx + 1, r, T_GATHER, dst, len,
					  NULL));
	}
	return err ? fail(comm, "MPI_Gatherv", err) : MPI_SUCCESS;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
		 const int displs[], MPI_Datatype sendtype, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, int root,
		 MPI_Comm comm)
{
	CHECK_INIT("MPI_Scatterv");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, recvbuf == MPI_IN_PLACE ? 0 : recvcount,
			     recvbuf == MPI_IN_PLACE ? MPI_BYTE : recvtype);
	if (!err && (root < 0 || root >= c->size))
		err = MPI_ERR_ROOT;
	if (!err && c->rank == root) {
		err = check_coll(c, 0, sendtype);
		if (!err)
			err = check_counts(c, sendcounts, displs);
	}
	if (err)
		return fail(comm, "MPI_Scatterv", err);
	if (c->rank != root) {
		err = pcor_class(raw_recv(c, c->ctx + 1, root, T_SCATTER,
					  recvbuf, (size_t)recvcount *
						   type_size(recvtype), NULL));
		return err ? fail(comm, "MPI_Scatterv", err) : MPI_SUCCESS;
	}
	size_t ts = type_size(sendtype);
	for (int r = 0; r < c->size && !err; r++) {
		const char *src = (const char *)sendbuf + (size_t)displs[r] * ts;
		size_t len = (size_t)sendcounts[r] * ts;
		if (r == root) {
			if (recvbuf != MPI_IN_PLACE)
				memmove(recvbuf, src, len);
			continue;
		}
		err = pcor_class(raw_send(c, c->ctx + 1, r, T_SCATTER, src,
					  len));
	}
	return err ? fail(comm, "MPI_Scatterv", err) : MPI_SUCCESS;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount,
		   MPI_Datatype sendtype, void *recvbuf,
		   const int recvcounts[], const int displs[],
		   MPI_Datatype recvtype, MPI_Comm comm)
{
	CHECK_INIT("MPI_Allgatherv");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, 0, recvtype);
	if (!err)
		err = check_counts(c, recvcounts, displs);
	if (err)
		return fail(comm, "MPI_Allgatherv", err);
	size_t ts = type_size(recvtype);
	const void *mine = sendbuf;
	if (sendbuf == MPI_IN_PLACE)
		mine = (char *)recvbuf + (size_t)displs[c->rank] * ts;
	/* Everyone gathers to 0, then 0 sends each block to all. */
	int rc = MPI_Gatherv(c->rank == 0 ? MPI_IN_PLACE : mine,
			     c->rank == 0 ? 0 : recvcounts[c->rank], recvtype,
			     recvbuf, recvcounts, displs, recvtype, 0, comm);
	if (rc)
		return rc;
	if (c->rank == 0 && mine != (char *)recvbuf + (size_t)displs[0] * ts)
		memmove((char *)recvbuf + (size_t)displs[0] * ts, mine,
			(size_t)recvcounts[0] * ts);
	for (int r = 0; r < c->size && !err; r++)
		err = bcast_c(c, (char *)recvbuf + (size_t)displs[r] * ts,
			      (size_t)recvcounts[r] * ts, 0);
	(void)sendcount;
	(void)sendtype;
	return err ? fail(comm, "MPI_Allgatherv", err) : MPI_SUCCESS;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
		  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
		  const int recvcounts[], const int rdispls[],
		  MPI_Datatype recvtype, MPI_Comm comm)
{
	CHECK_INIT("MPI_Alltoallv");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, 0, recvtype);
	if (!err)
		err = check_coll(c, 0, sendtype);
	if (!err)
		err = check_counts(c, recvcounts, rdispls);
	if (!err)
		err = check_counts(c, sendcounts, sdispls);
	if (err)
		return fail(comm, "MPI_Alltoallv", err);
	size_t rs = type_size(recvtype), ss = type_size(sendtype);
	int n = c->size, rc = PCOR_OK;
	pcor_handle_t *h = calloc((unsigned)n, sizeof(*h));
	if (!h)
		return fail(comm, "MPI_Alltoallv", MPI_ERR_OTHER);
	for (int k = 1; k < n && !rc; k++) {
		int r = (c->rank - k + n) % n;
		do
			rc = pcori_ctx_recv(c->pids[r], 0, T_ALLTOALL,
					    c->ctx + 1,
					    (char *)recvbuf +
						    (size_t)rdispls[r] * rs,
					    (size_t)recvcounts[r] * rs, NULL,
					    &h[r]);
		while (rc == PCOR_ERR_AGAIN);
	}
	memmove((char *)recvbuf + (size_t)rdispls[c->rank] * rs,
		(const char *)sendbuf + (size_t)sdispls[c->rank] * ss,
		(size_t)sendcounts[c->rank] * ss);
	for (int k = 1; k < n && !rc; k++) {
		int r = (c->rank + k) % n;
		rc = raw_send(c, c->ctx + 1, r, T_ALLTOALL,
			      (const char *)sendbuf + (size_t)sdispls[r] * ss,
			      (size_t)sendcounts[r] * ss);
	}
	for (int k = 1; k < n; k++) {
		int r2 = pcor_handle_test(h[(c->rank - k + n) % n], PCOR_BLOCK);
		if (!rc)
			rc = r2;
	}
	free(h);
	err = pcor_class(rc);
	return err ? fail(comm, "MPI_Alltoallv", err) : MPI_SUCCESS;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
			     int recvcount, MPI_Datatype datatype, MPI_Op op,
			     MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce_scatter_block");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, recvcount, datatype);
	if (!err && !op_ok(op))
		err = MPI_ERR_OP;
	if (err)
		return fail(comm, "MPI_Reduce_scatter_block", err);
	size_t len = (size_t)recvcount * type_size(datatype);
	char *full = malloc(len * c->size + 1);
	if (!full)
		return fail(comm, "MPI_Reduce_scatter_block", MPI_ERR_OTHER);
	const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	err = reduce_c(c, in, full, recvcount * c->size, datatype, op, 0);
	if (!err)
		err = MPI_Scatter(full, recvcount, datatype, recvbuf, recvcount,
				  datatype, 0, comm);
	free(full);
	return err ? fail(comm, "MPI_Reduce_scatter_block", err)
		   : MPI_SUCCESS;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
		       const int recvcounts[], MPI_Datatype datatype,
		       MPI_Op op, MPI_Comm comm)
{
	CHECK_INIT("MPI_Reduce_scatter");
	comm_t *c = comm_get(comm);
	int err = check_coll(c, 0, datatype);
	if (!err && !op_ok(op))
		err = MPI_ERR_OP;
	int *displs = err ? NULL : malloc(c->size * sizeof(int));
	if (!err && !displs)
		err = MPI_ERR_OTHER;
	int total = 0;
	for (int r = 0; !err && r < c->size; r++) {
		if (recvcounts[r] < 0)
			err = MPI_ERR_COUNT;
		displs[r] = total;
		total += recvcounts[r];
	}
	if (err) {
		free(displs);
		return fail(comm, "MPI_Reduce_scatter", err);
	}
	size_t ts = type_size(datatype);
	char *full = malloc((size_t)total * ts + 1);
	const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	err = full ? reduce_c(c, in, full, total, datatype, op, 0)
		   : MPI_ERR_OTHER;
	if (!err)
		err = MPI_Scatterv(full, recvcounts, displs, datatype, recvbuf,
				   recvcounts[c->rank], datatype, 0, comm);
	free(full);
	free(displs);
	return err ? fail(comm, "MPI_Reduce_scatter", err) : MPI_SUCCESS;
}

/*
 * Inclusive (Scan) or exclusive (Exscan) prefix reduction along a chain:
 * rank r gets the prefix of ranks < r from r - 1 and passes its own on.
 */
static int scan_c(const char *fn, const void *sendbuf, void *recvbuf,
		  int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
		  bool excl)
{
	CHECK_INIT(fn);
	comm_t *c = comm_get(comm);
	int err = check_coll(c, count, t);
	if (!err && !op_ok(op))
		err = MPI_ERR_OP;
	if (err)
		return fail(comm, fn, err);
	size_t len = (size_t)count * type_size(t);
	char *acc = malloc(len + 1), *prev = malloc(len + 1);
	if (!acc || !prev) {
		free(acc);
		free(prev);
		return fail(comm, fn, MPI_ERR_OTHER);
	}
	memcpy(acc, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, len);
	int rc = PCOR_OK;
	if (c->rank > 0) {
		rc = raw_recv(c, c->ctx + 1, c->rank - 1, T_REDUCE + 16, prev,
			      len, NULL);
		if (!rc)
			err = op_apply(op, t, prev, acc, count);
	}
	if (!rc && !err && c->rank + 1 < c->size)
		rc = raw_send(c, c->ctx + 1, c->rank + 1, T_REDUCE + 16, acc,
			      len);
	if (!rc && !err) {
		if (!excl)
			memcpy(recvbuf, acc, len);
		else if (c->rank > 0)
			memcpy(recvbuf, prev, len);
	}
	free(acc);
	free(prev);
	if (!err)
		err = pcor_class(rc);
	return err ? fail(comm, fn, err) : MPI_SUCCESS;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
	     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	return scan_c("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm,
		      false);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	return scan_c("MPI_Exscan", sendbuf, recvbuf, count, datatype, op,
		      comm, true);
}
