/*
 * core.h -- private interface of src/core: the pieces every other module
 * of pcor stands on.  Compiler helpers and lists are in base.h, futexes,
 * fences and locks in sync.h, the knobs in knobs.h; this file adds
 * logging, wait/wake, the request/handle table, the thread registry and
 * DMA memory.
 *
 * Nothing here knows about message matching, fabrics or the directory;
 * those modules depend on core, never the reverse.
 */
#ifndef PCOR_CORE_H
#define PCOR_CORE_H

/* First: it defines _GNU_SOURCE before any system header. */
#include "base.h"
#include "hop.h"
#include "knobs.h"
#include "sync.h"

#include <sys/types.h>

/* -------------------------------------------------------------- logging */

typedef enum pcori_log_level {
	PCORI_LOG_ERROR,
	PCORI_LOG_WARN,
	PCORI_LOG_INFO,
	PCORI_LOG_DEBUG,
	PCORI_LOG_TRACE,
} pcori_log_level_t;

typedef enum pcori_subsys {
	PCORI_SUB_CORE,
	PCORI_SUB_FRAG,
	PCORI_SUB_DISPATCH,
	PCORI_SUB_NAMING,
	PCORI_SUB_ROUTE,
	PCORI_SUB_MPI,
	PCORI_SUB_APP,
	PCORI_SUB_COUNT_
} pcori_subsys_t;

/* Configure from the knobs; PCOR_ERR_INVAL on a bad level or subsystem. */
int pcori_log_init(const pcori_config_t *cfg);
void pcori_log_fini(void);
bool pcori_log_enabled(pcori_log_level_t lvl, pcori_subsys_t sub);
void pcori_log(pcori_log_level_t lvl, pcori_subsys_t sub, const char *fmt,
	       ...) PCORI_PRINTF(3, 4);

#define PCORI_LOG_(lvl, sub, ...)                                              \
	do {                                                                   \
		if (pcori_log_enabled(lvl, sub))                               \
			pcori_log(lvl, sub, __VA_ARGS__);                      \
	} while (0)
#define PCORI_ERROR(sub, ...) PCORI_LOG_(PCORI_LOG_ERROR, sub, __VA_ARGS__)
#define PCORI_WARN(sub, ...) PCORI_LOG_(PCORI_LOG_WARN, sub, __VA_ARGS__)
#define PCORI_INFO(sub, ...) PCORI_LOG_(PCORI_LOG_INFO, sub, __VA_ARGS__)
#ifdef PCOR_ENABLE_DEBUG_LOG
#define PCORI_DEBUG(sub, ...) PCORI_LOG_(PCORI_LOG_DEBUG, sub, __VA_ARGS__)
#define PCORI_TRACE(sub, ...) PCORI_LOG_(PCORI_LOG_TRACE, sub, __VA_ARGS__)
#else
#define PCORI_DEBUG(sub, ...) ((void)0)
#define PCORI_TRACE(sub, ...) ((void)0)
#endif
/* For hot paths: log the first occurrence only. */
#define PCORI_WARN_ONCE(sub, ...)                                              \
	do {                                                                   \
		static atomic_flag once_ = ATOMIC_FLAG_INIT;                   \
		if (!atomic_flag_test_and_set(&once_))                         \
			PCORI_WARN(sub, __VA_ARGS__);                          \
	} while (0)

/* ------------------------------------------------------------ proc.c */

/*
 * A process as the kernel of its host names it.  Process ids are reused
 * and only mean something within one pid namespace of one boot, so boot,
 * pidns, ospid and start together name one process: what a peer tells us
 * of itself may be checked against /proc only where boot and pidns are
 * ours.  netns as well: a process of another network namespace is
 * reached through a network that can fail while it runs, as another
 * host's is (and tests make hosts of namespaces).
 */
typedef struct pcori_os_proc {
	uint8_t boot[16]; /* /proc/sys/kernel/random/boot_id; all 0: unknown */
	uint64_t pidns;   /* inode of its pid namespace */
	uint64_t netns;   /* inode of its network namespace */
	uint64_t start;   /* start time, clock ticks after boot */
	int32_t ospid;    /* its process id there */
} pcori_os_proc_t;

/* This process's name (all 0 where /proc cannot tell).  Any thread. */
void pcori_os_proc_self(pcori_os_proc_t *me);

/*
 * Whether process who runs on this host (exists, is the process named,
 * and is not stopped by a signal or a tracer), with the CPU time all its
 * threads have used so far in *cpu_p (clock ticks, only grows); me is
 * this process's name (pcori_os_proc_self), whose host and namespaces
 * who's must be.  Reads /proc/<ospid>/stat; false when it cannot tell
 * (another host, pid or network namespace, a reused pid).  Any thread;
 * not for hot paths.
 */
bool pcori_os_proc_running(const pcori_os_proc_t *who,
			   const pcori_os_proc_t *me, uint64_t *cpu_p);

/* ------------------------------------------------------------ wait/wake */

/*
 * Waiting for a 32-bit completion word to leave a value.
 *
 * The waiter spins for spin_ns, then advertises itself by setting
 * PCORI_WAIT_SLEEPER in the word and sleeps on it; the completer swaps in
 * the final value and wakes only if that bit was set.  Only threads waiting
 * on that one word are woken: never a broadcast to unrelated threads.
 */
#define PCORI_WAIT_SLEEPER 0x80000000u

/* Wait while (*word & ~SLEEPER) == pending.  PCOR_OK or PCOR_ERR_TIMEDOUT. */
int pcori_wait_word(_Atomic uint32_t *word, uint32_t pending, int64_t spin_ns,
		    int64_t timeout_ns);

/*
 * Its spinning half: true once the word left pending; false when spin_ns
 * ran out first, with *deadline_p set from timeout_ns (< 0: UINT64_MAX)
 * for the sleep that follows.
 */
bool pcori_spin_word(_Atomic uint32_t *word, uint32_t pending, int64_t spin_ns,
		     int64_t timeout_ns, uint64_t *deadline_p);

/* Store value (release) and wake any sleeper. */
static inline void pcori_wake_word(_Atomic uint32_t *word, uint32_t value)
{
	uint32_t old = atomic_exchange_explicit(word, value,
						memory_order_acq_rel);
	if (old & PCORI_WAIT_SLEEPER)
		pcori_futex_wake(word, INT_MAX);
}

/* ----------------------------------------------------- requests/handles */

typedef enum pcori_req_kind {
	PCORI_REQ_SEND_COPY = 1,
	PCORI_REQ_SEND_DMA,
	PCORI_REQ_RECV_COPY,
	PCORI_REQ_RECV_DMA,
} pcori_req_kind_t;

/*
 * Completion word values: PCORI_REQ_DONE once complete; while pending, a
 * value derived from the request's generation (see handle.c), so that
 * waiters notice when the slot is reused.  A request's sleepers are
 * counted beside the word (pcori_req_t.sleepers), not flagged in it.
 */
#define PCORI_REQ_DONE 1u
/*
 * Pending value of completion words that are not requests (no handle
 * and no reuse, so no generation needed): waited with pcori_wait_word.
 */
#define PCORI_WORD_PENDING 0u

/*
 * A receive's inbox: one cache line per receiving thread through which a
 * short message from a thread of the same process travels whole.  The
 * receiver arms it with a posted receive's pattern; a sender whose message
 * the pattern accepts claims it, writes what came and the data, and
 * publishes it, all in the line the receiver spins on.  So a message moves
 * that one line each way, and neither side touches the other's request.
 *
 * word: (seq << 2) | state, plus PCORI_WAIT_SLEEPER while the receiver
 * sleeps on it.  seq counts the armings, so a waiter tells its own receive
 * from the next one.  States:
 *   FREE    nothing armed (a receive moved out leaves its seq here)
 *   ARMED   pattern valid; a sender may claim it (CAS to BUSY)
 *   BUSY    claimed: the one sender writes src..data
 *   FILLED  published; the tester that moves it to FREE delivers it
 * Arming, and moving a receive out, happen under the match queue's lock
 * (src/frag); claiming and harvesting need no lock.  Fields other than
 * word are relaxed atomics: a loser of a race may read them while the
 * next use writes them, and discards what it read.
 */
#define PCORI_INBOX_DATA 32u
#define PCORI_INBOX_FREE 0u
#define PCORI_INBOX_ARMED 1u
#define PCORI_INBOX_BUSY 2u
#define PCORI_INBOX_FILLED 3u
#define PCORI_INBOX_STATE(w) ((w)&3u)
/* The word's seq bits, without state and sleeper. */
#define PCORI_INBOX_SEQ(w) ((w) & ~(PCORI_WAIT_SLEEPER | 3u))

typedef struct pcori_inbox {
	alignas(PCORI_CACHELINE) _Atomic uint32_t word;
	_Atomic int32_t pid, thid, tag; /* the armed receive's pattern */
	_Atomic uint32_t ctx;
	_Atomic int32_t src_thid, src_tag; /* what came (same process) */
	_Atomic uint32_t size;
	_Atomic uint64_t data[PCORI_INBOX_DATA / 8];
} pcori_inbox_t;

/* Where a receive reports its message; either form, chosen by the caller. */
typedef struct pcori_report {
	pcor_msginfo_t *info; /* pcor_ API form */
	int *pid, *thid, *tag, *size; /* paper form: ints */
	void **dma; /* recvDMA: where the buffer pointer goes */
} pcori_report_t;

/*
 * One send or receive in progress.  Lives in the handle table; the
 * handle names it by index and generation.
 *
 * Ownership: allocated by the thread that starts the operation; completed
 * by whichever thread finishes it (a sender, the receiver, a dispatcher);
 * released by the thread whose test observes completion, which also writes
 * the receive's report then.
 *
 * Layout: three cache lines, split by who touches them, because between
 * two threads the cost of a message is the lines it moves.  A sender that
 * matches a posted receive touches only its line 1 (and writes line 3);
 * line 2 stays with the thread that posted and tests the request.
 */
typedef struct pcori_req {
	/* line 1: matching and completion (poster, completer, waiter) */
	alignas(PCORI_CACHELINE) _Atomic uint32_t state; /* the futex word:
						pending or DONE */
	int32_t status;         /* final status, valid once DONE */
	uint16_t kind;          /* pcori_req_kind_t */
	uint16_t flags;         /* PCOR_SEND_* for sends, PCORI_REQF_*; set
				   with pcori_req_flags (a late tester of a
				   reused slot may read them) */
	uint32_t ctx;           /* matching context (0: the pcor API) */
	int32_t pid, thid, tag; /* recv: pattern; send: destination */
	/*
	 * Threads asleep (or about to be) on state, or in a port for it.  A
	 * count beside the word, not a bit in it, so that the completer can
	 * publish DONE with a plain store (handle.c).
	 */
	_Atomic uint32_t sleepers;
	pcori_list_t link;      /* in a posted-receive queue (mq lock) */
	void *buf;              /* recv copy: user buffer; send: data */
	size_t len;             /* recv: capacity; send: length */
	/* line 2: the owner's (allocating, posting, testing thread) */
	alignas(PCORI_CACHELINE) _Atomic uint32_t gen; /* odd while
						allocated; see handle.c */
	uint32_t index;         /* own slot in the handle table */
	int32_t owner_thid;     /* receives: the posting thread */
	_Atomic uint16_t hgen;  /* the generation handles carry; handle.c */
	_Atomic uint16_t maker; /* thread id that allocated it; handle.c */
	pcori_report_t report;  /* receives: where the tester reports */
	/* line 3: what arrived (receives): completer writes, tester reads */
	alignas(PCORI_CACHELINE) pcor_msginfo_t info;
	/*
	 * A waiter that sleeps in a port instead of on `state` (see
	 * pcori_drive_ops_t.sleep) names the port's wake word here, a futex
	 * in shared memory, before it counts itself in `sleepers`; the
	 * completer that finds the count bumps and wakes it too.
	 */
	_Atomic(_Atomic uint32_t *) wake_alt;
	/*
	 * PCORI_REQF_INBOX: the inbox holding this receive and the seq bits
	 * of its arming.  Atomic: a late tester may read them from a reused
	 * slot (it checks the generation again after).
	 */
	_Atomic(pcori_inbox_t *) inbox;
	_Atomic uint32_t inbox_seq;
} pcori_req_t;

_Static_assert(offsetof(pcori_req_t, gen) == PCORI_CACHELINE,
	       "a request's first line overflows");
_Static_assert(offsetof(pcori_req_t, info) == 2 * PCORI_CACHELINE,
	       "a request's second line overflows");

/* Room for max_handles requests in progress, with max_threads threads
 * each caching free slots. */
int pcori_htable_init(uint32_t max_handles, uint32_t max_threads);
void pcori_htable_fini(void);

/* Set a request's flags: relaxed-atomic, as handle_wait may read them
 * from a stale handle while the slot is being reused. */
#define pcori_req_flags(r, v) \
	__atomic_store_n(&(r)->flags, (uint16_t)(v), __ATOMIC_RELAXED)

/* A fresh PENDING request; NULL when the table is full. */
pcori_req_t *pcori_req_alloc(void);
/* Release a request whose handle never reached the user. */
void pcori_req_free(pcori_req_t *req);
/* The handle value naming req. */
pcor_handle_t pcori_req_handle(const pcori_req_t *req);
/*
 * A done token: the handle of a send that completed inside its call, for
 * the calling pcor thread; 0 when none is free (take a request).  Its test
 * returns PCOR_OK once, then PCOR_ERR_BADHANDLE.  undo: the handle never
 * reached the user.
 */
pcor_handle_t pcori_req_done_handle(void);
void pcori_req_done_undo(pcor_handle_t h);
/*
 * How many claims by other threads mark a thread's requests and tokens
 * shared (handle.c: both sides then use a CAS), and whether thid's are;
 * for tests.  The setter unmarks every thread: only while nobody claims.
 */
void pcori_claim_share_set(uint32_t after);
bool pcori_claim_shared(uint32_t thid);
#define PCORI_TOKEN_BIT (1u << 30)
static inline bool pcori_req_is_token(pcor_handle_t h)
{
	return h > 0 && ((uint32_t)h & PCORI_TOKEN_BIT);
}
/* consume: the test that reports it; else whether it is still live. */
int pcori_req_token_test(pcor_handle_t h, bool consume);
/*
 * Look up a live handle; NULL if unknown, stale or released.  *gen_p
 * (may be NULL) receives the generation seen, for a later release.
 */
pcori_req_t *pcori_req_lookup(pcor_handle_t h, uint32_t *gen_p);
/* Return a departing thread's cached free slots to the global stack. */
void pcori_htable_flush_tls(void);

/* Wake whoever sleeps for req (its SLEEPER bit was seen set). */
void pcori_req_wake(pcori_req_t *req);

/*
 * Finish a request: publish status, wake a waiter.  A receive that got a
 * message has its info filled before; the tester that releases the
 * request copies it into the report.  Called exactly once per request, by
 * any thread, holding no pcor lock that the waiter could need.
 */
void pcori_req_complete(pcori_req_t *req, int status);

/*
 * The first half of pcori_req_complete, for a caller that holds a lock:
 * publish status and completion at once, and report whether a sleeper
 * must be woken -- with pcori_req_wake, after unlocking (the word may by
 * then belong to the slot's next request: a spurious wake-up, which
 * waiters tolerate).
 */
static inline bool pcori_req_complete_nowake(pcori_req_t *req, int status)
{
	req->status = status;
	atomic_store_explicit(&req->state, PCORI_REQ_DONE,
			      memory_order_release);
	/* DONE before the count: the sleeper's side is in handle.c. */
	pcori_fence_light_local();
	return atomic_load_explicit(&req->sleepers, memory_order_acquire);
}

/*
 * Complete a request whose handle has not left the calling thread yet, so
 * nobody can be waiting on it: a release store, without the exchange that
 * looks for a sleeper.  (A waiter on an older use of the slot compares
 * against that use's pending value and never sleeps on this one.)
 */
static inline void pcori_req_complete_unseen(pcori_req_t *req, int status)
{
	req->status = status;
	atomic_store_explicit(&req->state, PCORI_REQ_DONE,
			      memory_order_release);
}

/*
 * Deliver the message in inbox b, FILLED with word filled, to r (the
 * receive armed there) and complete r.  Any thread; false if another
 * took it first.  Lock-free: it moves the inbox to FREE, after which its
 * owner may arm it again.
 */
bool pcori_inbox_harvest(pcori_inbox_t *b, uint32_t filled, pcori_req_t *r);

/*
 * Handles allocated and not yet released, counted over the whole table:
 * for tests and diagnostics, not for hot paths.
 */
size_t pcori_htable_live(void);

/* ------------------------------------------------------ thread registry */

/*
 * Free handle indexes a thread keeps (handle.c): room for a window of 64
 * requests in flight (osu_mbw_mr's) and those around it, so that such a
 * window's allocations and releases never reach the shared free list.
 */
#define PCORI_TLS_CACHE 128u

/* Per-OS-thread state, in TLS. */
typedef struct pcori_tls {
	int thid_plus1;   /* 0: not a pcor thread */
	uint32_t ncache;  /* free handle indexes cached here */
	uint32_t cache[PCORI_TLS_CACHE];
	uint64_t wait_avg_ns; /* recent waits on other processes (handle.c) */
	uint32_t tok_next;    /* next done token to try (handle.c) */
} pcori_tls_t;

extern _Thread_local pcori_tls_t pcori_tls;

/* Calling thread's id, or -1 if it is not a pcor thread. */
static inline int pcori_self_thid(void)
{
	return pcori_tls.thid_plus1 - 1;
}

/*
 * Thread registry hooks into higher layers: the message layer wants to
 * know when a thread id stops being used (to cancel its posted receives).
 */
typedef void (*pcori_thread_hook_fn)(int thid);

int pcori_threads_init(int max_threads, pcori_thread_hook_fn on_detach);
void pcori_threads_fini(void);
/* Number of attached threads other than the caller. */
int pcori_threads_others(void);
/* Wait up to timeout_ns for threads started for peers (they have no
 * joiner) to end. */
void pcori_threads_wait_spawned(uint64_t timeout_ns);
/*
 * Start a pcor thread running fn(arg).  autofree: not joinable, its id is
 * released when fn returns (remote spawns).
 */
int pcori_thread_start(pcor_thread_fn fn, void *arg, bool autofree,
		       int *thid_p);
/* Register the calling thread (thid 0 for the main thread at init). */
int pcori_thread_register_self(int *thid_p);

/* -------------------------------------------------------------- DMA pool */

int pcori_dma_init(size_t reserve);
void pcori_dma_fini(void);
/*
 * Is [p, p+len) inside one live DMA block?  PCOR_OK or PCOR_ERR_NOTDMA
 * (PCOR_ERR_BADSIZE if the range runs past the block).  Lock-free: O(1).
 */
int pcori_dma_check(const void *p, size_t len);
/* Is p the first byte of a live DMA block? */
bool pcori_dma_is_block_start(const void *p);
/* Allocate without the runtime check (the message layer, internally). */
static inline int pcori_dma_alloc(size_t size, void **buf_p)
{
	return pcor_dma_alloc(size, buf_p);
}
/* Free a block; PCOR_ERR_NOTDMA if p is not a live block's start. */
int pcori_dma_free(void *p);
/* The reserved range, for ports that register it with a fabric. */
void pcori_dma_range(void **base_p, size_t *len_p);
/* Bytes currently handed out (for tests). */
size_t pcori_dma_in_use(void);

/* ------------------------------------------------------------- driving */

/*
 * A word that waiters in pcori_drive_ops_t.until watch: bumped on every
 * change that may let one through, and a futex only for those asleep on
 * it (pcori_wake_word_bump, core/sync.c).
 */
typedef struct pcori_wake_word {
	_Atomic uint32_t word;
	_Atomic int sleepers; /* threads in futex_wait on word */
} pcori_wake_word_t;

/* Bump ww's word and wake up to n of its sleepers, if any. */
void pcori_wake_word_bump(pcori_wake_word_t *ww, int n);

/*
 * A thread waiting for a request that involves another process may poll
 * the fabric itself instead of sleeping until a dispatcher wakes it: on
 * few cores that saves a thread switch per message.  The message layer
 * installs these; NULL while no port is open.
 */
typedef struct pcori_drive_ops {
	/*
	 * begin/end bracket a spin on r (one at a time per thread); poll is
	 * one round of progress on the ports r's message can come through
	 * (its peer's port; every port for a wildcard or local request).
	 * end takes the clock if the caller read it (0: it did not).
	 */
	void (*begin)(pcori_req_t *r);
	int (*poll)(pcori_req_t *r);
	void (*end)(uint64_t now);
	/*
	 * Sleep as the one sleeper of the port that r's message comes
	 * through, in place of the port's dispatcher: until something
	 * arrives there, r completes or the clock passes deadline (ns); then
	 * poll that port.  The sender wakes us directly, so a message costs
	 * one wake-up.  false: no such port, or it has its sleeper already
	 * (the caller sleeps on r's word and a dispatcher completes it).
	 */
	bool (*sleep)(pcori_req_t *r, uint32_t pending, uint64_t deadline);
	/* A waiter sleeps on its word (+1) or is back (-1): see sleep. */
	void (*word_sleep)(int delta);
	/*
	 * Wait until try_fn(arg) returns true or the clock passes deadline
	 * (ns), making progress meanwhile as a waiter in pcor_handle_test
	 * does: poll every port for PCOR_SPIN_NS, then try again whenever
	 * ww's word moved, and sleep on it while it does not (looking again
	 * every millisecond regardless).  Returns try_fn's last answer.  No
	 * lock held.
	 */
	bool (*until)(bool (*try_fn)(void *), void *arg,
		      pcori_wake_word_t *ww, uint64_t deadline);
} pcori_drive_ops_t;

extern const pcori_drive_ops_t *_Atomic pcori_drive;

/* Request flag (high bits of req->flags): completion may need progress. */
#define PCORI_REQF_REMOTE 0x8000u
/* Request flag: a receive armed in an inbox (see pcori_inbox_t). */
#define PCORI_REQF_INBOX 0x4000u

/* --------------------------------------------------------- the runtime */

typedef enum pcori_rt_state {
	PCORI_RT_NONE = 0,
	PCORI_RT_INITIALIZING,
	PCORI_RT_READY,
	PCORI_RT_FINALIZED,
} pcori_rt_state_t;

/* Process-wide facts; written during pcor_init, read-only afterwards
 * (but nprocs, which grows as processes join). */
typedef struct pcori_rt {
	_Atomic int state;
	int pid;
	/*
	 * Highest pid plus one: grows (atomically, never shrinks) as
	 * processes join, so `pid < nprocs` stays a cheap membership check.
	 */
	_Atomic int nprocs;
	int max_threads;
	char host[96]; /* host identity (see naming.h) */
	pcori_config_t cfg;
} pcori_rt_t;

extern pcori_rt_t pcori_rt;

/*
 * How long a wait on another process spins before it sleeps.  A sleeper
 * costs its peer: a futex wake with the message that ends the wait, and
 * a membarrier interrupting the peer's CPU when it goes to sleep.  Where
 * each wait takes a little longer than PCOR_SPIN_NS (a stream of large
 * messages, one read of tens of microseconds each), those fall on every
 * message, on the side doing the copying.  So a thread whose recent waits
 * ended within PCORI_WAIT_SPIN_MAX_NS / 2 spins twice as long as they
 * took; one whose waits are longer sleeps after PCOR_SPIN_NS as before.
 *
 * A thread whose waits end within a quarter of PCOR_SPIN_NS is in a
 * steady exchange of small messages.  When one of its waits runs long,
 * the peer has most likely lost its CPU for a moment (preempted, or its
 * virtual CPU descheduled by the host), and answers as soon as it runs
 * again.  Sleeping then adds a wake-up to the stall: the futex wake, the
 * restart of a CPU that went idle (on a virtual machine a host round
 * trip of 0.1-1 ms), and often the scheduler moving the woken thread
 * onto its waker's CPU, where the two then share one.  So such a wait
 * spins PCORI_WAIT_STALL_SPINS times PCOR_SPIN_NS (0.2 ms by default, at
 * most PCORI_WAIT_SPIN_MAX_NS) before it sleeps.  The average is kept by
 * pcor_handle_test/wait (handle.c).
 */
#define PCORI_WAIT_SPIN_MAX_NS 500000u
#define PCORI_WAIT_STALL_SPINS 10
static inline int64_t pcori_wait_spin(void)
{
	int64_t base = pcori_rt.cfg.spin_ns;
	uint64_t avg = pcori_tls.wait_avg_ns;
	if (base <= 0 || avg > PCORI_WAIT_SPIN_MAX_NS / 2)
		return base;
	if ((int64_t)(4 * avg) < base)
		return PCORI_MAX(base, PCORI_MIN(PCORI_WAIT_STALL_SPINS * base,
						 (int64_t)PCORI_WAIT_SPIN_MAX_NS));
	return PCORI_MAX(base, (int64_t)(2 * avg));
}

/* A wait of elapsed ns ended: a running average over the last few. */
static inline void pcori_wait_took(uint64_t elapsed)
{
	uint64_t avg = pcori_tls.wait_avg_ns;
	pcori_tls.wait_avg_ns = elapsed >= avg ? avg + (elapsed - avg) / 4
					       : avg - (avg - elapsed) / 4;
}

/* PCOR_OK if the runtime is ready, else NOTINIT or FINALIZED. */
static inline int pcori_rt_check(void)
{
	int s = atomic_load_explicit(&pcori_rt.state, memory_order_acquire);
	if (PCORI_LIKELY(s == PCORI_RT_READY))
		return PCOR_OK;
	return s == PCORI_RT_FINALIZED ? PCOR_ERR_FINALIZED
				       : PCOR_ERR_NOTINIT;
}

#endif /* PCOR_CORE_H */
