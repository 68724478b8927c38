/*
 * mpii.h -- private header of libpcor_mpi, the MPI shim.
 *
 * Design notes.  A rank is pcor process <rank of MPI_COMM_WORLD>.  A
 * communicator's messages go to its "lane" at the destination: a pcor
 * thread id from the top of the range, that no thread attaches to, whose
 * queue any thread of the rank may post receives in (pcori_ctx_recv's
 * qthid).  So every thread can receive every message of the rank, and
 * threads on different communicators match under different queue locks
 * (pcor's per-thread matching) instead of one lock.  Collectives have a
 * second lane of their own, so they never share a queue with point to
 * point traffic.  Every communicator
 * owns four matching contexts (ctx = 4 * id): point to point, its
 * collectives, synchronous-send notices and their acknowledgements, so
 * collective traffic never enters the point-to-point unexpected queue and
 * communicators never match each other's messages.  Context 0 stays
 * pcor's own.  Context ids are agreed on by a max-reduction over the
 * parent communicator.
 *
 * Every collective, blocking or not, is a schedule (sched.c): rounds of
 * sends and receives on the collective context, separated by fences,
 * with local steps (reduce, copy, unpack) between them.  A blocking call
 * runs its schedule to the end; a nonblocking one returns a request whose
 * Test/Wait advance it.  Collective tags carry a per-communicator
 * sequence number and the round, so rounds of consecutive collectives
 * never match each other.
 *
 * Handles are integers in MPICH's style: kind in the top byte, an index
 * below.  Tables grow in chunks that never move, so a looked-up object
 * stays where it is while others are created (lock: g.lock, below).
 */
#ifndef PCOR_MPII_H
#define PCOR_MPII_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pcor/mpi.h>
#include <pcor/pcor.h>

#include "../api/ctx.h"

#define HKIND(h)   ((unsigned)(h)&0xfc000000u)
#define HINDEX(h)  ((int)((unsigned)(h)&0x03ffffffu))
#define COMM_KIND  0x44000000u
#define REQ_KIND   0x2c000000u
#define GROUP_KIND 0x48000000u
#define DTYPE_KIND 0x8c000000u
#define INFO_KIND  0x5c000000u
#define WIN_KIND   0xa0000000u
#define KEYVAL_KIND 0x24000000u
#define TAG_UB	   0x3fffffff

/* Contexts of a communicator, offsets from comm->ctx. */
enum { CTX_P2P = 0, CTX_COLL = 1, CTX_SYNC = 2, CTX_ACK = 3 };

/*
 * Handle tables: slot i holds a pointer to its object; slots come in
 * chunks that never move, so lookups need no lock.  Insertion and
 * removal take pcori_mpi.lock.
 */
#define CHUNK	   256
#define MAX_CHUNKS 4096

typedef struct htable {
	_Atomic(void *) *chunk[MAX_CHUNKS];
	int nslots; /* slots made so far */
	int hint;   /* where to look for a free slot first */
} htable_t;

/* The object at slot i, or NULL. */
void *pcori_mpi_tab_get(htable_t *t, int i);
/* Put obj in a free slot at or above first; its index, or -1. */
int pcori_mpi_tab_add(htable_t *t, void *obj, int first);
void pcori_mpi_tab_del(htable_t *t, int i);

/* ------------------------------------------------------------ datatypes */

typedef struct blk {
	MPI_Aint off; /* from the start of one element */
	size_t len;
} blk_t;

typedef struct dtype {
	int refs; /* handle + users (derived types built on it) */
	bool committed;
	bool predef;
	size_t size; /* bytes of data in one element */
	MPI_Aint lb, extent, true_lb, true_ub;
	MPI_Datatype prim; /* the one predefined type inside, or 0 if mixed */
	size_t nprim;	   /* predefined elements in one element */
	int nblk;	   /* the element's bytes, flattened, in type order */
	blk_t *blk;
	/* What Type_get_envelope/contents report. */
	char name[MPI_MAX_OBJECT_NAME];
	int combiner, ni, na, nt;
	int *ints;
	MPI_Aint *aints;
	MPI_Datatype *types;
} dtype_t;

dtype_t *pcori_mpi_type(MPI_Datatype t);       /* NULL if invalid */
dtype_t *pcori_mpi_type_ready(MPI_Datatype t); /* ... or uncommitted */
/* Whether count elements are one run of bytes; its start in *off_p. */
bool pcori_mpi_type_contig(const dtype_t *d, int count, MPI_Aint *off_p);
void pcori_mpi_pack(const void *buf, int count, const dtype_t *d, void *out);
/* Unpack at most bytes bytes into count elements at buf. */
void pcori_mpi_unpack(const void *in, size_t bytes, void *buf, int count,
		      const dtype_t *d);
void pcori_mpi_types_init(void);
void pcori_mpi_types_fini(void);

/* --------------------------------------------------------------- groups */

typedef struct group {
	int refs;
	int size;
	int *pids; /* group rank -> world pid */
} group_t;

group_t *pcori_mpi_group_new(int size); /* pids to fill */
int pcori_mpi_group_rank_of(const group_t *gr, int pid);

/* -------------------------------------------------------- communicators */

typedef struct comm {
	int size, rank;
	int *pids;     /* comm rank -> pcor pid */
	int *rank_of;  /* pcor pid -> comm rank, or -1 */
	uint32_t ctx;  /* 4 * id: see CTX_* */
	int lane;      /* pcor thread id whose queue takes our messages */
	int coll_lane; /* ... and our collectives' (queues of their own) */
	MPI_Errhandler eh;
	struct topo *topo;	/* Cartesian or graph layout, or NULL */
	struct hier *hier;	/* host layout (tree.c), when hier_state is 2 */
	_Atomic int hier_state; /* 0 not looked at, 1 flat, 2 by host */
	_Atomic uint32_t coll_seq; /* collectives started here */
	char name[MPI_MAX_OBJECT_NAME];
	struct attr *attrs; /* cached attributes (attr.c, under its lock) */
	int nattr, attrcap;
} comm_t;

comm_t *pcori_mpi_comm(MPI_Comm c); /* NULL if invalid */
/* A new communicator over the given world pids (taken over). */
int pcori_mpi_comm_make(int *pids, int size, uint32_t id, MPI_Errhandler eh,
			MPI_Comm *out_p);
/* Agree on a context id fresh on every member of c. */
int pcori_mpi_agree_ctx(comm_t *c, uint32_t *id_p);
/* Blocking collectives for the shim's own use (predefined types). */
int pcori_mpi_allreduce_c(comm_t *c, const void *sbuf, void *rbuf, int count,
			  MPI_Datatype t, MPI_Op op);
int pcori_mpi_allgather_c(comm_t *c, const void *sbuf, void *rbuf, size_t len);
void pcori_mpi_comms_fini(void);
/* attr.c: copy old's attributes to new (MPI_Comm_dup) through the copy
 * callbacks; an error class from one stops the copy. */
int pcori_mpi_attr_copy(MPI_Comm oldh, comm_t *old, comm_t *new);
/* Delete c's attributes, last set first, through the delete callbacks;
 * the first error stops and is returned (the rest stay). */
int pcori_mpi_attr_delete_all(MPI_Comm h, comm_t *c);
/* Forget c's attributes without callbacks. */
void pcori_mpi_attr_drop(comm_t *c);
void pcori_mpi_attr_fini(void);
void pcori_mpi_topo_free(struct topo *t);
void pcori_mpi_hier_free(struct hier *h);
/*
 * The neighbours of c's topology, in the standard's order (for a grid:
 * per dimension the negative side, then the positive; MPI_PROC_NULL off
 * the edge), in arrays for the caller to free; *cart_p for a grid.
 */
int pcori_mpi_topo_nbrs(const comm_t *c, int *nin_p, int **in_p, int *nout_p,
			int **out_p, bool *cart_p);

/* ----------------------------------------------------------- operations */

bool pcori_mpi_op_ok(MPI_Op op);
/* inout[k] = in[k] op inout[k]; in is the lower ranks' contribution. */
int pcori_mpi_op_apply(MPI_Op op, MPI_Datatype t, const void *in, void *inout,
		       size_t n);

/* ------------------------------------------------------------ schedules */

enum { S_SEND, S_RECV, S_FENCE, S_REDUCE, S_COPY, S_UNPACK };

typedef struct sstep {
	uint8_t kind;
	uint8_t round;
	int peer;	 /* comm rank */
	const void *src; /* send, copy, reduce input, unpack input */
	void *dst;	 /* recv, copy, reduce in-out, unpack target */
	size_t len;	 /* bytes (send, recv, copy, unpack) */
	int count;	 /* reduce, unpack */
	MPI_Datatype type;
	MPI_Op op;
	bool hold;	 /* send: read in place until the round's fence */
} sstep_t;

typedef struct sched {
	comm_t *c;
	uint32_t tagbase;
	sstep_t *steps;
	int n, cap, pos;
	sstep_t *post; /* unpacks run after the last round */
	int npost, postcap;
	uint8_t round;	     /* tag round of the steps being added */
	unsigned next_round; /* first round no stage has taken yet */
	pcor_handle_t *h;    /* outstanding handles of the current round */
	int nh, hcap;
	void **mem; /* scratch owned by the schedule */
	int nmem, memcap;
	int err;
	bool oom;
} sched_t;

void pcori_mpi_sched_init(sched_t *s, comm_t *c);
void *pcori_mpi_sched_alloc(sched_t *s, size_t len);
void pcori_mpi_sched_send(sched_t *s, int peer, const void *buf, size_t len);
/*
 * A send whose buffer nothing writes before the round's fence: pcor reads
 * it in place (no copy of a large message).
 */
void pcori_mpi_sched_send_hold(sched_t *s, int peer, const void *buf,
			       size_t len);
void pcori_mpi_sched_recv(sched_t *s, int peer, void *buf, size_t len);
void pcori_mpi_sched_fence(sched_t *s);
/* Reserve n tag rounds for a stage; the first one. */
unsigned pcori_mpi_sched_stage(sched_t *s, unsigned n);
void pcori_mpi_sched_copy(sched_t *s, const void *src, void *dst, size_t len);
void pcori_mpi_sched_reduce(sched_t *s, MPI_Op op, MPI_Datatype t,
			    const void *in, void *inout, int count);
void pcori_mpi_sched_unpack(sched_t *s, const void *in, size_t len, void *buf,
			    int count, MPI_Datatype t);
/* Advance; MPI_SUCCESS or an error class when done, -1 while running. */
int pcori_mpi_sched_progress(sched_t *s, bool block);
/* Release what it holds (after completion or on a build error). */
void pcori_mpi_sched_fini(sched_t *s);

/* Collective building blocks (coll.c). */
typedef struct layout {
	char *base;
	const int *counts, *displs; /* NULL: count each, at r * count */
	int count;
	const dtype_t *d;
	MPI_Datatype t;
} layout_t;

sched_t *pcori_mpi_sched_new(comm_t *c);
/* Run s to its end (request NULL) or hand it to a new request. */
int pcori_mpi_coll_start(sched_t *s, MPI_Comm comm, MPI_Request *request);
const void *pcori_mpi_coll_in(sched_t *s, const void *buf, int count,
			      const dtype_t *d);
void *pcori_mpi_coll_out(sched_t *s, void *buf, int count, MPI_Datatype t);
/* The element type and count a reduction folds, or an error class. */
int pcori_mpi_red_type(MPI_Datatype t, int count, MPI_Op op, MPI_Datatype *pt,
		       int *pn);
/* tree.c: flat, or by host when the communicator spans hosts. */
void pcori_mpi_b_barrier(sched_t *s);
void pcori_mpi_b_bcast(sched_t *s, void *buf, size_t len, int root);
void pcori_mpi_b_reduce(sched_t *s, const void *in, void *out, int count,
			MPI_Datatype t, MPI_Op op, int root);
void pcori_mpi_b_allreduce(sched_t *s, const void *in, void *out, int count,
			   MPI_Datatype t, MPI_Op op);
void pcori_mpi_b_gather(sched_t *s, const void *in, size_t inlen,
			const layout_t *l, int root);
void pcori_mpi_b_scatter(sched_t *s, const layout_t *l, void *out,
			 size_t outlen, int root);
void pcori_mpi_b_allgather(sched_t *s, const void *in, size_t inlen,
			   const layout_t *l);
void pcori_mpi_b_alltoall(sched_t *s, const layout_t *sl, const layout_t *rl);

/* ------------------------------------------------------------- requests */

/* R_IDLE: a persistent request not started (or finished and reaped). */
enum { R_NULL, R_SEND, R_RECV, R_SSEND, R_COLL, R_DONE, R_IDLE };

typedef struct req {
	int kind;
	bool used, persistent;
	struct { /* a persistent request's operation */
		int mode;
		bool recv;
		void *buf;
		int count, peer, tag;
		MPI_Datatype t;
	} p;
	pcor_handle_t h;   /* send or receive */
	pcor_handle_t ack; /* R_SSEND: the receiver's acknowledgement */
	MPI_Comm comm;
	pcor_msginfo_t info;
	/* Receives into a derived type land in tmp, unpacked at the end. */
	void *tmp;
	void *ubuf;
	int ucount;
	MPI_Datatype utype;
	sched_t *sched; /* R_COLL */
	int err;	/* R_DONE: outcome kept for the caller */
	MPI_Status st;
} req_t;

req_t *pcori_mpi_req_get(MPI_Request q);
/* MPI_REQUEST_NULL, or a persistent request not started. */
bool pcori_mpi_req_idle(MPI_Request q);
/* A fresh request (zeroed, used) and its handle; NULL when out of memory. */
req_t *pcori_mpi_req_new(MPI_Request *q_p);
/* Drop request q and what it holds. */
void pcori_mpi_req_free(MPI_Request q);
void pcori_mpi_reqs_fini(void);
/* Run a request that lives outside the table (a blocking call's) to its
 * end; its status in *st (may be NULL), its error class returned. */
int pcori_mpi_req_run(req_t *r, MPI_Status *st);

/* ------------------------------------------------------- environment */

typedef struct mpi_global {
	int state; /* 0 before init, 1 running, 2 finalised */
	int thread_level;
	int nprocs, pid;
	pthread_t main_thread;
	/* Guards the tables' allocation (not lookups) and next_ctx. */
	pthread_mutex_t lock;
	uint32_t next_ctx; /* lowest context id not yet used here */
	/* Size thresholds of the collectives (knobs, read at init). */
	size_t bcast_large;	/* scatter + allgather from here */
	size_t allreduce_large; /* reduce-scatter + allgather from here */
} mpi_global_t;

extern mpi_global_t pcori_mpi;

/*
 * Report error class err of call fn on communicator c (its handler, or
 * MPI_COMM_WORLD's when c is not valid): fatal ends the job, else return.
 */
int pcori_mpi_fail(MPI_Comm c, const char *fn, int err);
int pcori_mpi_class(int pcor_rc); /* pcor status -> MPI error class */
void pcori_mpi_check_init(const char *fn);
void pcori_mpi_status_set(MPI_Status *st, const comm_t *c,
			  const pcor_msginfo_t *in, int err, bool null);
void pcori_mpi_bsend_fini(void);
void pcori_mpi_sync_ack(comm_t *c, const pcor_msginfo_t *info);

/* Send / receive on a communicator's context (retrying backpressure). */
int pcori_mpi_isend(comm_t *c, int off, int dst, int tag, const void *buf,
		    size_t len, pcor_handle_t *h_p);
int pcori_mpi_irecv(comm_t *c, int off, int src, int tag, void *buf, size_t cap,
		    pcor_msginfo_t *info, pcor_handle_t *h_p);

#define CHECK_INIT(fn)	    pcori_mpi_check_init(fn)
#define FAIL(comm, fn, err) pcori_mpi_fail(comm, fn, err)
#define RETURN(comm, fn, err)                                 \
	do {                                                  \
		int e_ = (err);                               \
		return e_ ? FAIL(comm, fn, e_) : MPI_SUCCESS; \
	} while (0)

#endif /* PCOR_MPII_H */
