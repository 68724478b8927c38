/*
 * pcor.h -- the whole supported API of pcor.
 *
 * pcor moves messages between threads addressed by a global
 * <process id, thread id> pair, whether the peer thread lives in the same
 * process, in another process of the same host, or on another host.
 * Everything a program may rely on is declared in this file; any other
 * header or symbol of the library is private and may change.
 *
 * Conventions used throughout:
 *  - Functions return an int status: PCOR_OK (0) on success, a negative
 *    PCOR_ERR_* code on failure, PCOR_INPROGRESS (> 0) where an operation is
 *    still running.  pcor_strerror() names every code.
 *  - Outputs come last and end in _p; they are written only on success.
 *  - Every function may be called from any pcor thread (a thread created
 *    with pcor_thread_create() or registered with pcor_thread_attach())
 *    unless its comment says otherwise.
 *
 * The pCoR paper's five calls (sendCopy, sendDMA, recvCopy, recvDMA,
 * testHandle) are declared at the end with their original names and
 * argument order; they forward to the pcor_ functions.
 */
#ifndef PCOR_PCOR_H
#define PCOR_PCOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PCOR_API __attribute__((visibility("default")))
#else
#define PCOR_API
#endif

#define PCOR_VERSION_MAJOR 0
#define PCOR_VERSION_MINOR 1
#define PCOR_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

/*
 * X(name, value, description).  The single list from which the enum and
 * pcor_strerror() are generated, so the two cannot drift.
 */
#define PCOR_STATUS_MAP(X)                                                     \
	X(OK, 0, "success")                                                    \
	X(INPROGRESS, 1, "operation still in progress")                        \
	X(ERR_NOTINIT, -1, "pcor_init has not been called")                    \
	X(ERR_FINALIZED, -2, "pcor_finalize has been called")                  \
	X(ERR_INVAL, -3, "invalid argument")                                   \
	X(ERR_BADPID, -4, "process id is not a member of the application")     \
	X(ERR_BADTHID, -5, "thread id outside the process's range")            \
	X(ERR_BADTAG, -6, "tag is negative")                                   \
	X(ERR_BADSIZE, -7, "size is negative or too large")                    \
	X(ERR_BADBUF, -8, "buffer is NULL with a non-zero size")               \
	X(ERR_NOTDMA, -9, "buffer is not DMA memory from pcor_dma_alloc")      \
	X(ERR_BADHANDLE, -10, "unknown, stale or already completed handle")    \
	X(ERR_TRUNCATE, -11, "message longer than the receive buffer")         \
	X(ERR_AGAIN, -12, "resources temporarily exhausted; retry later")      \
	X(ERR_NOMEM, -13, "out of memory")                                     \
	X(ERR_NOTATTACHED, -14, "calling thread is not a pcor thread")         \
	X(ERR_BUSY, -15, "object is still in use")                             \
	X(ERR_CANCELED, -16, "operation was canceled")                         \
	X(ERR_TOOMANY, -17, "no free thread id left in this process")          \
	X(ERR_TIMEDOUT, -18, "timed out")                                      \
	X(ERR_PEER_LOST, -19, "peer process has died")                         \
	X(ERR_NOPEER, -20, "no such peer process")                             \
	X(ERR_UNREACHABLE, -21, "no route to the peer process")                \
	X(ERR_EXISTS, -22, "name is already published")                        \
	X(ERR_NOTFOUND, -23, "name or function not found")                     \
	X(ERR_FABRIC, -24, "fabric (libfabric) error")                         \
	X(ERR_PROTO, -25, "malformed or unexpected protocol data")             \
	X(ERR_AUTH, -26, "authentication failed")                              \
	X(ERR_SYSTEM, -27, "operating system call failed")                     \
	X(ERR_NOSUPPORT, -28, "not supported by this build or platform")

/* Every status pcor returns.  PCOR_OK == 0, errors < 0, PCOR_INPROGRESS > 0. */
typedef enum pcor_status {
#define PCOR_STATUS_ENUM_(name, value, desc) PCOR_##name = (value),
	PCOR_STATUS_MAP(PCOR_STATUS_ENUM_)
#undef PCOR_STATUS_ENUM_
} pcor_status_t;

/*
 * pcor_strerror -- describe a status code.
 * Returns a static string; never NULL ("unknown status" for unknown codes).
 * Thread-safe; may be called before pcor_init.
 */
PCOR_API const char *pcor_strerror(int status);

/*
 * pcor_status_name -- the code's name without prefix, e.g. "ERR_TRUNCATE".
 * Returns a static string; never NULL.  Thread-safe; usable before init.
 */
PCOR_API const char *pcor_status_name(int status);

/* ------------------------------------------------------------- lifecycle */

/*
 * pcor_init -- join the application.
 *
 * Reads the PCOR_* environment knobs, bootstraps this process (pid, number
 * of processes) and registers the calling thread as a pcor thread with
 * thread id 0.  argc/argv may be NULL; pcor removes no arguments today.
 * Call once per process, from the thread that will call pcor_finalize.
 *
 * Returns PCOR_OK; PCOR_ERR_BUSY if already initialised;
 * PCOR_ERR_FINALIZED after pcor_finalize (a process joins once);
 * PCOR_ERR_INVAL if a knob has a malformed value (the log names it);
 * PCOR_ERR_NOMEM, PCOR_ERR_SYSTEM if resources cannot be set up.
 */
PCOR_API int pcor_init(int *argc, char ***argv);

/*
 * pcor_finalize -- leave the application and release every resource.
 *
 * Every other pcor thread must have ended or detached first; threads that
 * peers started here (pcor_thread_spawn) are given PCOR_LINGER_MS to end.
 * Handles not
 * yet completed are dropped, and unexpected messages never received are
 * discarded with a warning in the log.  Afterwards every pcor call returns
 * PCOR_ERR_FINALIZED.
 *
 * Returns PCOR_OK; PCOR_ERR_NOTINIT; PCOR_ERR_FINALIZED if called twice;
 * PCOR_ERR_BUSY if other pcor threads are still attached (nothing is
 * released then; retry after joining them).
 */
PCOR_API int pcor_finalize(void);

/* This process's id (>= 0), or PCOR_ERR_NOTINIT / PCOR_ERR_FINALIZED. */
PCOR_API int pcor_self_pid(void);

/*
 * The calling thread's id (>= 0) in this process, or PCOR_ERR_NOTATTACHED,
 * PCOR_ERR_NOTINIT, PCOR_ERR_FINALIZED.
 */
PCOR_API int pcor_self_thid(void);

/* Number of processes in the application (>= 1), or a negative status. */
PCOR_API int pcor_nprocs(void);

/* Highest thread id plus one that a process of this application accepts. */
PCOR_API int pcor_max_threads(void);

/* --------------------------------------------------------------- threads */

/* Entry point of a thread started by pcor_thread_create. */
typedef void *(*pcor_thread_fn)(void *arg);

/*
 * pcor_thread_create -- start a pcor thread.
 *
 * The new thread's id is chosen and reserved before the thread starts, so
 * messages may be sent to *thid_p at once; they wait as unexpected until
 * the thread receives them.  The thread is registered for its whole life
 * and its id is released when fn returns.  Join it with pcor_thread_join.
 * Callable from any thread (pcor or not) after pcor_init.
 *
 * Returns PCOR_OK; PCOR_ERR_INVAL (fn or thid_p NULL); PCOR_ERR_TOOMANY
 * (all thread ids in use); PCOR_ERR_SYSTEM (pthread_create failed).
 */
PCOR_API int pcor_thread_create(pcor_thread_fn fn, void *arg, int *thid_p);

/*
 * pcor_thread_join -- wait for a thread started by pcor_thread_create and
 * collect fn's return value (ret_p may be NULL).  Each such thread must be
 * joined exactly once.
 *
 * Returns PCOR_OK; PCOR_ERR_BADTHID (not a joinable thread of this
 * process, or already joined); PCOR_ERR_INVAL (joining oneself).
 */
PCOR_API int pcor_thread_join(int thid, void **ret_p);

/*
 * pcor_thread_attach -- register the calling thread (one not started by
 * pcor_thread_create) and give it a thread id.
 *
 * Returns PCOR_OK; PCOR_ERR_BUSY if the thread is already registered
 * (*thid_p is left alone); PCOR_ERR_TOOMANY; PCOR_ERR_INVAL.
 */
PCOR_API int pcor_thread_attach(int *thid_p);

/*
 * pcor_thread_detach -- unregister the calling thread.
 *
 * Receives it posted and has not completed are canceled: their handles
 * complete with PCOR_ERR_CANCELED and stay testable by any thread.
 * Unexpected messages for its id stay queued for the next thread that gets
 * the id.  A thread from pcor_thread_create is detached automatically when
 * its function returns.
 *
 * Returns PCOR_OK; PCOR_ERR_NOTATTACHED.
 */
PCOR_API int pcor_thread_detach(void);

/* ------------------------------------------------------------ DMA memory */

/*
 * pcor_dma_alloc -- allocate DMA-able memory: memory registered with every
 * port, so it can be sent with sendDMA without a copy on the send side.
 * The block is 64-byte aligned; it belongs to the caller until passed to
 * pcor_dma_free or handed over with PCOR_SEND_HANDOVER.  size may be 0.
 * Blocks of 64 KiB and more are backed by transparent huge pages where the
 * kernel offers them (a peer on the same host reads them several times
 * faster); their memory is then committed 2 MiB at a time as it is first
 * touched.  Thread-safe.
 *
 * Returns PCOR_OK; PCOR_ERR_INVAL (buf_p NULL); PCOR_ERR_BADSIZE (larger
 * than the DMA reservation); PCOR_ERR_NOMEM.
 */
PCOR_API int pcor_dma_alloc(size_t size, void **buf_p);

/*
 * pcor_dma_free -- give DMA memory back.  NULL is accepted and ignored.
 * Returns PCOR_OK; PCOR_ERR_NOTDMA if buf was not returned by
 * pcor_dma_alloc or recvDMA, or was already freed.
 */
PCOR_API int pcor_dma_free(void *buf);

/*
 * pcor_dma_size -- usable size of a DMA block (at least what was asked).
 * Returns PCOR_OK; PCOR_ERR_NOTDMA; PCOR_ERR_INVAL.
 */
PCOR_API int pcor_dma_size(const void *buf, size_t *size_p);

/* ------------------------------------------------------------- messaging */

/* Wildcards for receives. */
#define PCOR_ANY_PID (-1)
#define PCOR_ANY_THID (-1)
#define PCOR_ANY_TAG (-1)

/* Modes of pcor_handle_test / testHandle. */
#define PCOR_NONBLOCK 0
#define PCOR_BLOCK 1

/*
 * Flags of pcor_send_dma.
 * PCOR_SEND_HANDOVER: the DMA buffer is given to pcor at the call; the
 * sender must not touch or free it again.  The receiver of a recvDMA gets
 * this very buffer when the peer is in the same process (no byte moves);
 * otherwise pcor frees it once sent.
 */
#define PCOR_SEND_HANDOVER 0x1u

/*
 * A handle names one send or receive in progress.  It is a positive int,
 * valid until the test that reports its completion; values carry a
 * generation, so a handle tested after that is PCOR_ERR_BADHANDLE.
 */
typedef int pcor_handle_t;

/* What a completed receive got. */
typedef struct pcor_msginfo {
	int pid;     /* sender's process id */
	int thid;    /* sender's thread id */
	int tag;     /* message tag */
	size_t size; /* full message size, even when truncated */
} pcor_msginfo_t;

/*
 * pcor_send_copy -- send len bytes of buf to thread thid of process pid.
 *
 * buf may be reused as soon as the call returns: pcor has copied what it
 * still needs (or delivered it straight into a posted receive).  The
 * handle completes when the receiving process has accepted the message
 * (into a posted receive or its unexpected queue), or with
 * PCOR_ERR_PEER_LOST if that process dies first; it must be tested to
 * completion (or it holds a handle slot).  Exception, the fast path: a
 * message of at most one fragment (PCOR_FRAG_SIZE, PCOR_EAGER_MAX; on a
 * libfabric port, up to 960 bytes) to a process one lossless hop away
 * (pcor-shm; libfabric's reliable endpoints: rxm, shm, net) completes as
 * soon as it is in the channel, which cannot lose it; a receiver that
 * dies later is reported to the calls that follow (PCOR_ERR_PEER_LOST),
 * as MPI does.  pcor_finalize still waits (up to PCOR_LINGER_MS) until
 * live receivers have taken such messages.
 * tag must be >= 0.  Messages between one sender thread and one receiver
 * thread are matched in the order they were sent.
 *
 * Memory.  Until a message to another process is accepted, the sending
 * process holds it: its copy of the data plus a record (412 bytes for a
 * message of one fragment, 4.5 KiB for a rendezvous).  All such messages
 * together are bounded by PCOR_SEND_BYTES (64 MiB); a send that does not
 * fit waits, making progress, until acceptances free room.  A message
 * larger than the whole budget is let past it, one at a time.  Fast-path
 * messages hold nothing.
 *
 * Returns PCOR_OK and *h_p; PCOR_ERR_BADPID, PCOR_ERR_BADTHID,
 * PCOR_ERR_BADTAG, PCOR_ERR_BADSIZE, PCOR_ERR_BADBUF, PCOR_ERR_INVAL
 * (h_p NULL), PCOR_ERR_NOTATTACHED; PCOR_ERR_AGAIN when the receiver's
 * message pool (same process) or this process's send budget (another
 * process) stayed full for PCOR_BACKPRESSURE_MS: nothing was sent, no
 * handle was made; retry, ideally after receiving what peers sent.
 */
PCOR_API int pcor_send_copy(int pid, int thid, int tag, const void *buf,
			    size_t len, pcor_handle_t *h_p);

/*
 * pcor_send_dma -- send from DMA memory without copying on the send side.
 *
 * buf must lie in one block from pcor_dma_alloc and [buf, buf+len) inside
 * it.  Without PCOR_SEND_HANDOVER the buffer stays the sender's and must
 * not change until the handle completes (when the data has been taken).
 * With it, ownership passes to pcor at once (see PCOR_SEND_HANDOVER) and
 * the handle completes as for pcor_send_copy.  Either way only the
 * message's record counts against PCOR_SEND_BYTES, not its data.
 *
 * Returns as pcor_send_copy, plus PCOR_ERR_NOTDMA and PCOR_ERR_INVAL
 * (unknown flags).
 */
PCOR_API int pcor_send_dma(int pid, int thid, int tag, void *buf,
			   size_t len, unsigned flags, pcor_handle_t *h_p);

/*
 * pcor_recv_copy -- post a receive into buf (capacity cap) for the
 * calling thread.  pid, thid and tag may be wildcards.
 *
 * buf and *info_p (may be NULL) belong to pcor until the handle completes;
 * they are filled by then.  A longer message fills buf and completes with
 * PCOR_ERR_TRUNCATE, info_p->size giving the full size.  If the sender
 * dies, the handle completes with PCOR_ERR_PEER_LOST once the fabric can
 * no longer write into buf.
 *
 * Returns PCOR_OK and *h_p; PCOR_ERR_BADPID, PCOR_ERR_BADTHID,
 * PCOR_ERR_BADTAG (below PCOR_ANY_TAG), PCOR_ERR_BADBUF, PCOR_ERR_INVAL,
 * PCOR_ERR_NOTATTACHED, PCOR_ERR_AGAIN (no free handle).
 */
PCOR_API int pcor_recv_copy(int pid, int thid, int tag, void *buf,
			    size_t cap, pcor_msginfo_t *info_p,
			    pcor_handle_t *h_p);

/*
 * pcor_recv_dma -- post a receive whose data arrives in DMA memory that
 * pcor allocates.  When the handle completes, *buf_p points to a block the
 * caller owns and frees with pcor_dma_free (NULL for an empty message).
 * buf_p and info_p belong to pcor until then.
 *
 * Returns as pcor_recv_copy.  A receive that cannot get DMA memory for
 * its message completes with PCOR_ERR_NOMEM and *buf_p NULL.
 */
PCOR_API int pcor_recv_dma(int pid, int thid, int tag, void **buf_p,
			   pcor_msginfo_t *info_p, pcor_handle_t *h_p);

/*
 * pcor_handle_test -- test (PCOR_NONBLOCK) or wait for (PCOR_BLOCK) a
 * handle.  Any thread may test any handle.
 *
 * Returns PCOR_INPROGRESS if not complete (PCOR_NONBLOCK only; the handle
 * stays valid).  Otherwise the handle is released and the call returns
 * the operation's status: PCOR_OK, PCOR_ERR_TRUNCATE, PCOR_ERR_CANCELED,
 * PCOR_ERR_PEER_LOST, PCOR_ERR_NOMEM...  PCOR_ERR_BADHANDLE for a handle
 * that is unknown, stale or already released; PCOR_ERR_INVAL for another
 * mode.  PCOR_BLOCK spins for PCOR_SPIN_NS, then sleeps until woken; a
 * wait on another process spins longer when the calling thread's recent
 * waits suggest its answer is near (see PCOR_SPIN_NS: pcor_info -k).
 */
PCOR_API int pcor_handle_test(pcor_handle_t h, int mode);

/*
 * pcor_handle_wait -- like PCOR_BLOCK, but gives up after timeout_ns and
 * returns PCOR_ERR_TIMEDOUT with the handle still valid.  timeout_ns < 0
 * waits without limit.
 */
PCOR_API int pcor_handle_wait(pcor_handle_t h, int64_t timeout_ns);

/* ------------------------------------------- processes, names, events */

/*
 * The directory service.  Every process runs an agent of it; together
 * they know each process's host and ports, keep published names and tell
 * everyone when a process joins or leaves.  The calls below may block for
 * a round trip to another process's agent (bounded by PCOR_NAMING_TIMEOUT_MS
 * unless a timeout says otherwise); they may be called from any thread,
 * pcor thread or not, after pcor_init.
 */

#define PCOR_NAME_MAX 255  /* bytes of a published name, without the NUL */
#define PCOR_HOST_MAX 96   /* host identity, with the NUL */
#define PCOR_AGENT_MAX 64  /* agent address "a.b.c.d:port", with the NUL */

/* What became of a process. */
typedef enum pcor_proc_state {
	PCOR_PROC_ALIVE = 1, /* a member of the application */
	PCOR_PROC_EXITED,    /* left through pcor_finalize */
	PCOR_PROC_FAILED,    /* died without pcor_finalize */
} pcor_proc_state_t;

/* One process as the directory knows it (a copy: the caller owns it). */
typedef struct pcor_proc_info {
	int pid;
	int state;                 /* pcor_proc_state_t */
	int nports;                /* fabric ports it registered */
	char host[PCOR_HOST_MAX];  /* host identity: equal strings share a
				      machine and its network namespace */
	char agent[PCOR_AGENT_MAX]; /* its directory agent */
} pcor_proc_info_t;

/*
 * pcor_proc_info -- resolve a process id.
 *
 * Fills *info_p from the local cache, or from the entry's home agent.
 * Returns PCOR_OK; PCOR_ERR_PEER_LOST when the process has exited or
 * failed (*info_p is filled all the same, with its state); PCOR_ERR_NOPEER
 * for a pid that is not (or not yet) a member; PCOR_ERR_INVAL (info_p
 * NULL); PCOR_ERR_TIMEDOUT when its home agent did not answer.
 */
PCOR_API int pcor_proc_info(int pid, pcor_proc_info_t *info_p);

/*
 * pcor_name_publish -- bind name to <pid, thid> for the whole application.
 *
 * name is copied; it is 1..PCOR_NAME_MAX bytes.  pid may be this process
 * or any living member.  The name belongs to the calling process: only it
 * may unpublish it, and it disappears when this process leaves or fails.
 *
 * Returns PCOR_OK; PCOR_ERR_EXISTS if the name is already published (by
 * anyone, this process included); PCOR_ERR_INVAL (bad name);
 * PCOR_ERR_NOPEER, PCOR_ERR_PEER_LOST (pid); PCOR_ERR_BADTHID;
 * PCOR_ERR_TIMEDOUT.
 */
PCOR_API int pcor_name_publish(const char *name, int pid, int thid);

/*
 * pcor_name_lookup -- find who published name.
 *
 * timeout_ns 0 answers at once; > 0 waits up to that long for the name to
 * be published; < 0 waits without limit.  thid_p may be NULL.
 *
 * Returns PCOR_OK and *pid_p, *thid_p; PCOR_ERR_NOTFOUND (not published,
 * timeout 0); PCOR_ERR_TIMEDOUT (not published within the timeout);
 * PCOR_ERR_PEER_LOST (published for a process that has since died);
 * PCOR_ERR_INVAL (bad name, pid_p NULL).
 */
PCOR_API int pcor_name_lookup(const char *name, int64_t timeout_ns,
			      int *pid_p, int *thid_p);

/*
 * pcor_name_unpublish -- withdraw a name this process published.
 * Returns PCOR_OK; PCOR_ERR_NOTFOUND (this process did not publish it);
 * PCOR_ERR_INVAL.
 */
PCOR_API int pcor_name_unpublish(const char *name);

/*
 * pcor_spawn -- start one more process of this application.
 *
 * The launcher (pcorrun) starts argv[0] with argv on host (NULL: the
 * launcher's choice; "localhost": the launcher's machine; otherwise
 * through its remote-shell command).  argv and its strings are copied.
 * Returns once the new process has joined, i.e. passed pcor_init: every
 * process then sees a PCOR_MEMBER_STARTUP event for it and can resolve
 * *pid_p.  New pids are never reused and pcor_nprocs() grows to cover
 * them.  Bounded by PCOR_JOIN_TIMEOUT_MS.
 *
 * Returns PCOR_OK and *pid_p; PCOR_ERR_INVAL; PCOR_ERR_NOTFOUND (no such
 * program); PCOR_ERR_UNREACHABLE (host cannot be reached);
 * PCOR_ERR_PEER_LOST (it died before joining); PCOR_ERR_TIMEDOUT;
 * PCOR_ERR_NOSUPPORT when this process was not started by pcorrun (alone,
 * or under a PMIx resource manager).
 */
PCOR_API int pcor_spawn(const char *host, char *const argv[], int *pid_p);

/* Membership events. */
typedef enum pcor_member_event {
	PCOR_MEMBER_STARTUP = 1, /* a process joined: it can be resolved */
	PCOR_MEMBER_EXIT,        /* a process left through pcor_finalize */
	PCOR_MEMBER_FAILURE,     /* a process died (its control connection
				    closed without a goodbye) */
} pcor_member_event_t;

/*
 * A membership callback.  Runs on pcor's event thread, one event at a
 * time, in the order this process learned of them; no pcor lock is held,
 * so it may call any pcor function but pcor_finalize.
 */
typedef void (*pcor_member_fn)(int pid, pcor_member_event_t ev, void *arg);

/*
 * pcor_member_callback -- deliver membership events to fn (with arg)
 * from now on; NULL stops them (events not yet delivered are dropped).
 * Events of processes other than the caller only; start-up events of the
 * initial processes happened during pcor_init.  Failures reach the
 * callback well within a second or two of the death.
 * Returns PCOR_OK; PCOR_ERR_SYSTEM (the event thread could not start).
 */
PCOR_API int pcor_member_callback(pcor_member_fn fn, void *arg);

/* ------------------------------------------------ remote thread creation */

/*
 * A function other processes may start as a new thread here.  arg points
 * to a private copy of what the spawner passed (len bytes), valid until
 * the function returns; the thread's id is released then.
 */
typedef void (*pcor_remote_fn)(void *arg, size_t len);

/*
 * pcor_function_register -- make fn startable by name (at most 63 bytes)
 * from any process.  Thread-safe.
 * Returns PCOR_OK; PCOR_ERR_INVAL; PCOR_ERR_EXISTS (name taken).
 */
PCOR_API int pcor_function_register(const char *name, pcor_remote_fn fn);

/*
 * pcor_thread_spawn -- start the function registered as name in process
 * pid as a new pcor thread, passing a copy of len bytes at arg (at most
 * PCOR_FRAG_SIZE - 84).  Waits for the answer; *thid_p is the new
 * thread's id.  Thread-safe.
 *
 * Returns PCOR_OK; PCOR_ERR_NOTFOUND (no such function there);
 * PCOR_ERR_TOOMANY (no thread id left there); PCOR_ERR_BADPID;
 * PCOR_ERR_BADSIZE; PCOR_ERR_INVAL; PCOR_ERR_PEER_LOST;
 * PCOR_ERR_UNREACHABLE.
 */
PCOR_API int pcor_thread_spawn(int pid, const char *name, const void *arg,
			       size_t len, int *thid_p);

/* ---------------------------------------------------------------- routes */

/*
 * Every process keeps a route table: for each other process, the port it
 * sends on and the next hop, the cheapest path over "both processes have
 * a port on this network" links.  A process with no network in common
 * with the destination reaches it through gateways that forward its
 * messages.  Tables are rebuilt on every start-up, exit and failure.
 */

/* Link classes, cheapest first (routing weighs links in this order). */
typedef enum pcor_link_class {
	PCOR_LINK_SELF = 0, /* the same process */
	PCOR_LINK_SHM,      /* shared memory on one host */
	PCOR_LINK_RDMA,     /* RDMA fabrics: verbs, efa, psm3, cxi ... */
	PCOR_LINK_TCP,
	PCOR_LINK_UDP,
} pcor_link_class_t;

#define PCOR_PROVIDER_MAX 32 /* provider name, with the NUL */
#define PCOR_NETWORK_MAX 96  /* network identity, with the NUL */

/* How this process reaches one process (a copy: the caller owns it). */
typedef struct pcor_route_info {
	int pid;        /* the destination */
	int port;       /* index of our port the route leaves by; -1: self */
	int next_hop;   /* first process on the path (pid itself: direct) */
	int hops;       /* links on the path: 0 self, 1 direct, 2+ forwarded */
	int link_class; /* pcor_link_class_t of the first link */
	char provider[PCOR_PROVIDER_MAX]; /* e.g. "tcp;ofi_rxm"; "" for self */
	char network[PCOR_NETWORK_MAX];   /* e.g. "tcp;ofi_rxm/10.1.0.0/24" */
} pcor_route_info_t;

/*
 * pcor_route_info -- the route messages to pid take now.
 *
 * Sets up the route if pid was not talked to yet (as a first send would).
 * The answer may change at the next membership event.  Thread-safe; any
 * thread after pcor_init.
 *
 * Returns PCOR_OK and *info_p; PCOR_ERR_INVAL (info_p NULL);
 * PCOR_ERR_BADPID (pid negative or never a member); PCOR_ERR_NOPEER (not
 * yet known here); PCOR_ERR_PEER_LOST (it exited or failed);
 * PCOR_ERR_UNREACHABLE (alive, but no path to it over our networks);
 * PCOR_ERR_NOMEM.
 */
PCOR_API int pcor_route_info(int pid, pcor_route_info_t *info_p);

/*
 * pcor_route_dump -- write this process's route table to file descriptor
 * fd (e.g. 2 for stderr), one line per
 * pid: "route <pid>: port <i> <network>, next hop <h>, <n> hops, class
 * <c>", or "self" / "unreachable".  Debug output; the format may change.
 * Thread-safe.  The same table is logged at every rebuild with
 * PCOR_LOG_LEVEL=info PCOR_LOG_SUBSYS=route.
 *
 * Returns PCOR_OK; PCOR_ERR_INVAL (fd negative); PCOR_ERR_SYSTEM (write
 * failed: errno tells why); PCOR_ERR_NOMEM.
 */
PCOR_API int pcor_route_dump(int fd);

/*
 * pcor_place_best -- which of the candidate processes have the best link
 * to pid: the cheapest path (by link class, then hops), the way routes
 * are chosen.  Used to start the threads that talk most to pid where
 * their messages travel fastest.
 *
 * cand holds ncand pids (duplicates allowed); best_p must have room for
 * ncand and receives the best of them, in cand's order, *nbest_p of them
 * (>= 1).  *class_p (may be NULL) is the pcor_link_class_t of the first
 * link of their path from pid (PCOR_LINK_SELF when pid is among them).
 * Reads the directory; may block for a round trip to another agent.
 * Thread-safe.
 *
 * Returns PCOR_OK; PCOR_ERR_INVAL (NULL pointer, ncand < 1);
 * PCOR_ERR_BADPID (pid or a candidate negative or never a member);
 * PCOR_ERR_NOPEER (pid not known here yet); PCOR_ERR_PEER_LOST (pid is
 * gone); PCOR_ERR_TIMEDOUT (its home agent did not answer);
 * PCOR_ERR_UNREACHABLE (no candidate can reach pid); PCOR_ERR_NOMEM.
 */
PCOR_API int pcor_place_best(int pid, const int *cand, int ncand,
			     int *best_p, int *nbest_p, int *class_p);

/*
 * pcor_thread_spawn_near -- pcor_thread_spawn in the first of the
 * candidate processes that pcor_place_best picks for pid.  *pid_p is
 * where the thread runs.  Waits as pcor_thread_spawn.  Thread-safe.
 *
 * Returns as pcor_place_best (a candidate chosen), then as
 * pcor_thread_spawn.
 */
PCOR_API int pcor_thread_spawn_near(int pid, const int *cand, int ncand,
				    const char *name, const void *arg,
				    size_t len, int *pid_p, int *thid_p);

/*
 * pcor_spawn_near -- pcor_spawn on the host best linked to pid.
 *
 * hosts[i] is a launcher host name (as for pcor_spawn) on which process
 * host_pids[i] runs; that process's links stand for the host's.  The new
 * process is started on the first host whose process pcor_place_best
 * picks.  *pid_p is the new process.  Bounded as pcor_spawn.
 *
 * Returns as pcor_place_best (a host chosen: PCOR_ERR_INVAL also for a
 * NULL or empty host name), then as pcor_spawn.
 */
PCOR_API int pcor_spawn_near(int pid, const char *const *hosts,
			     const int *host_pids, int nhosts,
			     char *const argv[], int *pid_p);

/* ---------------------------------------------------- the paper's API */

/*
 * The pCoR calls.  Each is a real exported function that forwards to the
 * pcor_ call named beside it; sizes are ints as in the paper (negative
 * sizes are PCOR_ERR_BADSIZE).  A send or receive returns its handle
 * (> 0) or a negative status.
 */

/*
 * pcor_send_copy(trgt_pid, trgt_thid, tag, data, size); PCOR_ERR_AGAIN
 * and the send budget as there.
 */
PCOR_API int sendCopy(int trgt_pid, int trgt_thid, int tag, void *data,
		      int size);

/* pcor_send_dma(trgt_pid, trgt_thid, tag, data, size, 0); likewise. */
PCOR_API int sendDMA(int trgt_pid, int trgt_thid, int tag, void *data,
		     int size);

/*
 * pcor_recv_copy; apid, athid, atag, asize (each may be NULL) are written
 * when the handle completes; asize is the full message size, clamped to
 * INT_MAX.
 */
PCOR_API int recvCopy(int src_pid, int src_thid, int tag, void *data,
		      int size, int *apid, int *athid, int *atag, int *asize);

/* pcor_recv_dma; *data is set when the handle completes. */
PCOR_API int recvDMA(int src_pid, int src_thid, int tag, void **data,
		     int *apid, int *athid, int *atag, int *asize);

/* pcor_handle_test(handle, mode). */
PCOR_API int testHandle(int handle, int mode);

#ifdef __cplusplus
}
#endif

#endif /* PCOR_PCOR_H */
