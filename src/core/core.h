/*
 * core.h -- private interface of src/core: the pieces every other module
 * of pcor stands on (compiler helpers, lists, locks, knobs, logging,
 * wait/wake, the request/handle table, the thread registry, DMA memory).
 *
 * Nothing here knows about message matching, fabrics or the directory;
 * those modules depend on core, never the reverse.
 */
#ifndef PCOR_CORE_H
#define PCOR_CORE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <pcor/pcor.h>

#include "hop.h"

#include <limits.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ compiler */

#define PCORI_CACHELINE 64
#define PCORI_LIKELY(x) __builtin_expect(!!(x), 1)
#define PCORI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PCORI_UNUSED __attribute__((unused))
#define PCORI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PCORI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PCORI_CONTAINER_OF(ptr, type, member)                                  \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define PCORI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PCORI_MAX(a, b) ((a) > (b) ? (a) : (b))

/* CPU hint inside spin loops. */
static inline void pcori_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * Copy n bytes that do not overlap.  The few bytes of a small message
 * go by overlapping word moves rather than a call to memcpy, whose
 * call and size dispatch cost more than the copy at these sizes.
 */
static inline void pcori_copy_short(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 32) {
		memcpy(d, s, n);
	} else if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8)
			memcpy(d + i, s + i, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n) {
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}

/*
 * Hint: fetch the line holding p for writing.  For data another core wrote
 * last that we are about to read and then write (a posted receive taken
 * by a sender, a queue lock), one exclusive fetch replaces a shared fetch
 * followed by an upgrade: one coherence round trip instead of two.  On
 * x86-64 only where the CPU has PREFETCHW (checked once, in sync.c).
 */
extern bool pcori_have_prefetchw;
static inline void pcori_prefetchw(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (PCORI_LIKELY(pcori_have_prefetchw))
		__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* Programming bugs only -- never a peer, the network or memory running out. */
#define PCORI_ASSERT(cond)                                                     \
	do {                                                                   \
		if (PCORI_UNLIKELY(!(cond)))                                   \
			pcori_panic(__FILE__, __LINE__, #cond);                \
	} while (0)
_Noreturn void pcori_panic(const char *file, int line, const char *what);

/* Monotonic time in nanoseconds. */
uint64_t pcori_now_ns(void);
/*
 * How long a wait until deadline (UINT64_MAX: none) may sleep: *left_p is
 * the nanoseconds left, -1 for no bound.  PCOR_ERR_TIMEDOUT once passed.
 */
static inline int pcori_wait_left(uint64_t deadline, int64_t *left_p)
{
	*left_p = -1;
	if (deadline == UINT64_MAX)
		return PCOR_OK;
	uint64_t now = pcori_now_ns();
	if (now >= deadline)
		return PCOR_ERR_TIMEDOUT;
	*left_p = (int64_t)(deadline - now);
	return PCOR_OK;
}

/* ---------------------------------------------------------------- lists */

/* Intrusive circular doubly-linked list; the head is a sentinel node. */
typedef struct pcori_list {
	struct pcori_list *next, *prev;
} pcori_list_t;

static inline void pcori_list_init(pcori_list_t *h)
{
	h->next = h->prev = h;
}
static inline bool pcori_list_empty(const pcori_list_t *h)
{
	return h->next == h;
}
static inline void pcori_list_push_back(pcori_list_t *h, pcori_list_t *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}
static inline void pcori_list_remove(pcori_list_t *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
#define pcori_list_foreach(pos, head)                                          \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)
#define pcori_list_foreach_safe(pos, tmp, head)                                \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);       \
	     (pos) = (tmp), (tmp) = (pos)->next)

/* ---------------------------------------------------------- futex, lock */

/* Thin futex wrappers on a 32-bit word (process-private). */
int pcori_futex_wait(_Atomic uint32_t *word, uint32_t expect,
		     int64_t timeout_ns);
void pcori_futex_wake(_Atomic uint32_t *word, int n);
/* Wake on a word in memory shared between processes (no PRIVATE flag). */
void pcori_futex_wake_shared(_Atomic uint32_t *word, int n);

/*
 * Asymmetric fences (membarrier(2)).  A store-then-load pair of threads
 * (Dekker's: one stores A then loads B, the other stores B then loads A)
 * needs a full fence on each side, a locked instruction on x86.  Where one
 * side runs on every message and the other only when it is about to
 * sleep, the hot side's fence can be a compiler barrier
 * (pcori_fence_light_local) if the sleeping side makes every running
 * thread execute a full barrier (pcori_fence_heavy_*, a system call
 * sending IPIs).  _local pairs threads of this process; _global threads
 * of any pcor process on the host (registered for it at load:
 * pcori_asym_global; pcor-shm segments say which side fences, see
 * port/shm.h).  Where the kernel refuses membarrier, both sides are plain
 * full fences.  Outside the C11 model: the pairing is the kernel's
 * guarantee.
 */
extern bool pcori_asym_local, pcori_asym_global;

/*
 * A full fence, as a locked add of 0 to a word of this thread's (what
 * Linux uses for smp_mb on x86: no slower than mfence), fenced for the
 * compiler on both sides.  ThreadSanitizer does not support
 * atomic_thread_fence; an atomic add it does.
 */
extern _Thread_local _Atomic uint32_t pcori_fence_word
	__attribute__((tls_model("initial-exec")));
static inline void pcori_fence_full(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	atomic_fetch_add_explicit(&pcori_fence_word, 0, memory_order_seq_cst);
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void pcori_fence_light_local(void)
{
	/*
	 * Read after the caller's store, not hoisted above it: a process
	 * that sleeps often switches to real fences while its threads run
	 * (sync.c, fence_go_real).
	 */
	atomic_signal_fence(memory_order_seq_cst);
	if (PCORI_LIKELY(__atomic_load_n(&pcori_asym_local, __ATOMIC_RELAXED)))
		atomic_signal_fence(memory_order_seq_cst);
	else
		pcori_fence_full();
}

/*
 * Whether this process's threads pair up asymmetrically (light: the
 * default) or both fence for real: a thread that sleeps on most waits
 * would pay an IPI-sending system call each time for a few nanoseconds
 * saved per message.  Only while no other pcor thread runs (pcor_init).
 * A light process whose sleepers keep calling membarrier more than a
 * thousand times a second (five seconds in a row) switches to real
 * fences by itself, for good.
 */
void pcori_fence_choose(bool light);
/* That rule's figures (tests): calls per window, its length, in a row. */
void pcori_fence_auto_set(uint32_t calls, uint64_t window_ns,
			  uint32_t windows);

/* false: the barrier could not be had (a waiter then sleeps bounded). */
bool pcori_fence_heavy_local(void);
bool pcori_fence_heavy_global(void);

/*
 * The sleeping side of such a pair: count ourselves in *count, fence
 * (heavy, local), and sleep on word while it holds value, up to
 * timeout_ns (< 0: no limit; a millisecond if the fence failed).  The
 * waking side stores word, fences light and wakes if *count is not zero.
 * Returns on any change, wake-up or timeout: the caller looks again.
 */
void pcori_sleep_counted(_Atomic uint32_t *count, _Atomic uint32_t *word,
			 uint32_t value, int64_t timeout_ns);

/*
 * A mutex that spins briefly, then sleeps on a futex, and that a thread
 * taking it many times in a row comes to own (biased locking).  word: 0
 * free, 1 held; sleepers: threads asleep (or about to be) on word.
 * Unlock is a plain store and a load (no locked instruction: it is on
 * every message's path); a thread that goes to sleep pays the asymmetric
 * fence instead (sync.c).  Never held across a blocking wait for a
 * message.
 *
 * Bias: most locks on the message path are taken by one thread at a time
 * for long stretches (the thread that sends, or that waits and drives
 * progress, while its dispatcher is parked).  After PCORI_BIAS_STREAK
 * takes in a row by one thread, bias names it and it enters without word:
 * it notes the lock in its own owner record (pcori_lock_owner_t, a line
 * only it writes), fences for the compiler and checks that bias still
 * names it (Dekker's pairing, the light side).  Any other thread takes
 * word, clears bias, makes every running thread of the process fence
 * (membarrier) and waits until the owner's record no longer holds the
 * lock: the owner either was seen in or will see the bias gone.  The
 * record is the owner's alone so that a thread that read an old bias and
 * was descheduled before it noted itself cannot disturb what another,
 * later owner noted.  Each revocation doubles the streak the lock needs
 * to be biased again, so a lock shared in turn stops paying for it.  Only
 * with the asymmetric fences on.  Tokens are small per-thread numbers
 * (pcori_lock_me), handed back when a thread ends.
 */
typedef struct pcori_lock {
	_Atomic uint32_t word;
	_Atomic uint32_t sleepers;
	_Atomic uint32_t bias;   /* token of the owning thread, or 0 */
	uint32_t gone;           /* under word: a revoked owner not seen out */
	uint32_t last;           /* under word: who took it last, */
	uint32_t streak;         /* how many times in a row */
	uint32_t revoked;        /* revocations so far (capped) */
#ifdef PCOR_LOCK_DEBUG
	_Atomic pid_t owner;
#endif
} pcori_lock_t;

#define PCORI_LOCK_INITIALIZER {0}
/*
 * Biasing is compiled in only with meson's -Dlock_bias=true (the
 * ThreadSanitizer build of scripts/test.sh has it).  Off by default: the
 * checks it adds to every lock and unlock cost the 8-byte round trip
 * about 10 ns, more than owned locks save on today's message path
 * (docs/BENCHMARKS.md).
 */
#ifndef PCORI_LOCK_BIAS
#define PCORI_LOCK_BIAS 0
#endif
#define PCORI_BIAS_STREAK 64u
#define PCORI_BIAS_DOUBLINGS 16u
/* Biased locks one thread can be in at once; a further one takes word. */
#define PCORI_LOCK_NEST 4
/* Tokens below this can own locks (live threads; tokens are reused). */
#define PCORI_LOCK_OWNERS 4096u

/* The locks a thread is in through its bias: it alone writes them. */
typedef struct pcori_lock_owner {
	alignas(PCORI_CACHELINE) _Atomic(pcori_lock_t *) in[PCORI_LOCK_NEST];
	uint32_t next_free; /* a free token's successor (sync.c) */
} pcori_lock_owner_t;

extern pcori_lock_owner_t pcori_lock_owners[PCORI_LOCK_OWNERS];
/* This thread's token; 0 until it first takes a lock through word. */
extern _Thread_local uint32_t pcori_lock_me
	__attribute__((tls_model("initial-exec")));
/* How many locks this thread is in through its bias. */
extern _Thread_local uint32_t pcori_lock_nbiased
	__attribute__((tls_model("initial-exec")));
uint32_t pcori_lock_me_new(void);

void pcori_lock_slow(pcori_lock_t *l);
/* Bias l to me (holding word). */
void pcori_lock_bias(pcori_lock_t *l, uint32_t me);
/*
 * Holding word, l is biased to another thread or a revoked owner may
 * still be in: revoke the bias and wait for it to leave.  !wait
 * (trylock): do not wait; let go of word and return false if it is in.
 */
bool pcori_lock_revoke(pcori_lock_t *l, uint32_t me, bool wait);

static inline void pcori_lock_init(pcori_lock_t *l)
{
	memset(l, 0, sizeof(*l));
}

/* The slot of token t's record that holds l, or -1. */
static inline int pcori_lock_slot(uint32_t t, const pcori_lock_t *l,
				  memory_order mo)
{
	pcori_lock_owner_t *o = &pcori_lock_owners[t];
	for (int k = 0; k < PCORI_LOCK_NEST; k++)
		if (atomic_load_explicit(&o->in[k], mo) == l)
			return k;
	return -1;
}

/* Is this thread in l through its bias? */
static inline bool pcori_lock_in_biased(const pcori_lock_t *l)
{
	return PCORI_LOCK_BIAS && pcori_lock_nbiased &&
	       pcori_lock_slot(pcori_lock_me, l, memory_order_relaxed) >= 0;
}

#ifdef PCOR_LOCK_DEBUG
pid_t pcori_gettid(void);
#define PCORI_LOCK_SET_OWNER_(l, v)                                            \
	atomic_store_explicit(&(l)->owner, (v), memory_order_relaxed)
/* Functions that require the lock held say so with this. */
#define PCORI_ASSERT_LOCKED(l)                                                 \
	PCORI_ASSERT(atomic_load_explicit(&(l)->owner,                         \
					  memory_order_relaxed) == pcori_gettid())
#else
#define PCORI_LOCK_SET_OWNER_(l, v) ((void)0)
#define PCORI_ASSERT_LOCKED(l)                                                 \
	PCORI_ASSERT(                                                          \
	    atomic_load_explicit(&(l)->word, memory_order_relaxed) != 0 ||     \
	    pcori_lock_in_biased(l))
#endif

/* The owner's way in (b: its token, which bias named): true if in. */
static inline bool pcori_lock_enter_biased(pcori_lock_t *l, uint32_t b)
{
	pcori_lock_owner_t *o = &pcori_lock_owners[b];
	int k = pcori_lock_slot(b, NULL, memory_order_relaxed);
	if (k < 0)
		return false; /* nested too deep: through word */
	atomic_store_explicit(&o->in[k], l, memory_order_relaxed);
	/* The store before the load: pcori_lock_revoke fences heavy. */
	pcori_fence_light_local();
	if (PCORI_LIKELY(atomic_load_explicit(&l->bias, memory_order_relaxed) ==
			 b)) {
		pcori_lock_nbiased++;
		PCORI_LOCK_SET_OWNER_(l, pcori_gettid());
		return true;
	}
	atomic_store_explicit(&o->in[k], NULL, memory_order_release);
	return false;
}

/*
 * Just took word: revoke another thread's bias, or count the streak that
 * earns one.  false: trylock's bail-out (word let go).
 */
static inline bool pcori_lock_settle(pcori_lock_t *l, bool wait)
{
	if (!PCORI_LOCK_BIAS)
		return true;
	uint32_t me = pcori_lock_me;
	if (PCORI_UNLIKELY(!me))
		me = pcori_lock_me_new();
	uint32_t b = atomic_load_explicit(&l->bias, memory_order_relaxed);
	if (PCORI_UNLIKELY((b && b != me) || l->gone))
		return pcori_lock_revoke(l, me, wait);
	if (l->last != me) {
		l->last = me;
		l->streak = 0;
	} else if (PCORI_UNLIKELY(++l->streak >= PCORI_BIAS_STREAK
						       << l->revoked) &&
		   !b) {
		pcori_lock_bias(l, me);
	}
	return true;
}

static inline void pcori_lock(pcori_lock_t *l)
{
	PCORI_HOP_LOCK();
	if (PCORI_LOCK_BIAS) {
		uint32_t b = atomic_load_explicit(&l->bias,
						  memory_order_relaxed);
		if (b && b == pcori_lock_me && pcori_lock_enter_biased(l, b))
			return;
	}
	uint32_t zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&l->word, &zero, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		pcori_lock_slow(l);
	pcori_lock_settle(l, true);
	PCORI_LOCK_SET_OWNER_(l, pcori_gettid());
}

/* Let go of word (the way in of everyone but a biased owner). */
static inline void pcori_unlock_word(pcori_lock_t *l)
{
	atomic_store_explicit(&l->word, 0, memory_order_release);
	/* The store before the load: the sleeper's side of pcori_lock_slow. */
	pcori_fence_light_local();
	if (PCORI_UNLIKELY(
		atomic_load_explicit(&l->sleepers, memory_order_relaxed)))
		pcori_futex_wake(&l->word, 1);
}

static inline bool pcori_trylock(pcori_lock_t *l)
{
	PCORI_HOP_LOCK();
	uint32_t b = PCORI_LOCK_BIAS ? atomic_load_explicit(
					       &l->bias, memory_order_relaxed)
				     : 0;
	if (b && b == pcori_lock_me) {
		/* In already, or a taker about to revoke: busy. */
		if (atomic_load_explicit(&l->word, memory_order_relaxed) ||
		    pcori_lock_in_biased(l))
			return false;
		if (pcori_lock_enter_biased(l, b))
			return true;
	}
	uint32_t zero = 0;
	if (!atomic_compare_exchange_strong_explicit(&l->word, &zero, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return false;
	if (!pcori_lock_settle(l, false))
		return false;
	PCORI_LOCK_SET_OWNER_(l, pcori_gettid());
	return true;
}

static inline void pcori_unlock(pcori_lock_t *l)
{
	PCORI_LOCK_SET_OWNER_(l, 0);
	if (PCORI_LOCK_BIAS && pcori_lock_nbiased) {
		int k = pcori_lock_slot(pcori_lock_me, l, memory_order_relaxed);
		if (k >= 0) {
			/* Release: a revoker that sees it out sees our writes. */
			atomic_store_explicit(
				&pcori_lock_owners[pcori_lock_me].in[k], NULL,
				memory_order_release);
			pcori_lock_nbiased--;
			return;
		}
	}
	pcori_unlock_word(l);
}

/* ---------------------------------------------------------------- knobs */

/*
 * Every environment variable pcor reads, declared once:
 * X(NAME, field, type, default, min, max, help).  The variable is
 * PCOR_<NAME>; numeric knobs are range-checked at pcor_init; SIZE knobs
 * take k/m/g suffixes (powers of 1024).  tools/pcor_info prints them.
 */
#define PCORI_KNOBS(X)                                                         \
	X(ACK_DELAY_NS, ack_delay_ns, INT, "20000", 0, 1000000000,             \
	  "how long a receiver may hold back an acknowledgement hoping to "    \
	  "piggyback it on a message going the other way (ns)")                \
	X(AFFINITY, affinity, STRING, "off", 0, 0,                             \
	  "pin each process's main thread, its dispatchers and the threads "   \
	  "it starts to one CPU: off, auto (the pid-th CPU allowed) or a "     \
	  "list of CPUs picked by pid, e.g. 0,1")                              \
	X(AGENT_ADDR, agent_addr, STRING, "", 0, 0,                            \
	  "launcher agents to bootstrap from, ip:port[,ip:port...] (set by "   \
	  "pcorrun)")                                                          \
	X(AGENT_IF, agent_if, STRING, "", 0, 0,                                \
	  "IPv4 address the directory agent listens on; empty: loopback when " \
	  "the job is on one host, else the address that reached the "         \
	  "launcher")                                                          \
	X(AGENT_PORTS, agent_ports, STRING, "0", 0, 0,                         \
	  "TCP port or range lo-hi for the directory agent; 0: any")           \
	X(AUTH_TIMEOUT_MS, auth_timeout_ms, INT, "2000", 10, 600000,           \
	  "time a control connection has to authenticate and say hello")       \
	X(BACKPRESSURE_MS, backpressure_ms, INT, "1000", 0, 3600000,           \
	  "how long a send waits for room in a full receiver pool, or in "    \
	  "this process's send budget (PCOR_SEND_BYTES), before returning "    \
	  "PCOR_ERR_AGAIN")                                                    \
	X(BLOCK_POLL_NS, block_poll_ns, INT, "50000", 1000, 999999999,         \
	  "a blocked dispatcher of a port without a wait descriptor (shm, "    \
	  "udp) polls this often (ns)")                                        \
	X(DISPATCH, dispatch, STRING, "adaptive", 0, 0,                        \
	  "dispatcher mode of every port: poll, block or adaptive")            \
	X(DISPATCH_SPIN_NS, dispatch_spin_ns, INT, "200000", 0, 10000000000LL, \
	  "adaptive dispatchers (and poll ones while a thread drives another " \
	  "port) spin this long after the last event before they block (ns)")  \
	X(DMA_RESERVE, dma_reserve, SIZE, "64g", 64 << 20, (1LL << 46),        \
	  "virtual address space reserved for DMA memory (only touched pages " \
	  "use memory)")                                                       \
	X(DROP_EVERY, drop_every, INT, "0", 0, 1000000000,                     \
	  "testing: every Nth frame arriving at a port is dropped, as a "      \
	  "lossy fabric would (0: none)")                                      \
	X(EAGER_MAX, eager_max, SIZE, "64k", 0, 2 << 20,                       \
	  "messages up to this size are sent eagerly; larger ones by "         \
	  "rendezvous (at most 32 fragments)")                                 \
	X(FAULT_CONNECT_PCT, fault_connect_pct, INT, "0", 0, 100,              \
	  "testing: this percentage of the directory agent's connection "     \
	  "attempts to other agents fail on purpose (fault injection)")        \
	X(FAULT_CONNECT_TO, fault_connect_to, INT, "-1", -1, INT32_MAX,       \
	  "testing: every attempt of the directory agent to connect to this " \
	  "process fails on purpose (-1: none)")                              \
	X(FRAG_SIZE, frag_size, SIZE, "64k", 1024, 16 << 20,                   \
	  "largest fragment a port sends; messages are cut into fragments "    \
	  "of this size")                                                      \
	X(IFACES, ifaces, STRING, "", 0, 0,                                    \
	  "comma-separated fabric domains (network interfaces for tcp/udp) "   \
	  "to open data ports on; empty: all")                                 \
	X(JOB_KEY, job_key, STRING, "", 0, 0,                                  \
	  "job key, 64 hex digits (set by pcorrun; keep it secret)")           \
	X(JOB_PID, job_pid, INT, "-1", -1, INT_MAX - 1,                        \
	  "this process's id (set by pcorrun)")                                \
	X(JOB_SIZE, job_size, INT, "0", 0, INT_MAX - 1,                        \
	  "number of processes started together (set by pcorrun; 0: not "      \
	  "started by pcorrun)")                                               \
	X(JOIN_TIMEOUT_MS, join_timeout_ms, INT, "60000", 100, 86400000,       \
	  "how long pcor_init waits for the other processes, and pcor_spawn "  \
	  "for the new one")                                                   \
	X(LINGER_MS, linger_ms, INT, "10000", 0, 3600000,                      \
	  "how long pcor_finalize waits for live peers to take what was sent " \
	  "to them (acks, rendezvous data)")                                   \
	X(LOG_FILE, log_file, STRING, "", 0, 0,                                \
	  "append log lines to this file instead of stderr")                   \
	X(LOG_LEVEL, log_level, STRING, "warn", 0, 0,                          \
	  "least severe level logged: error, warn, info, debug, trace")        \
	X(LOG_SUBSYS, log_subsys, STRING, "all", 0, 0,                         \
	  "comma-separated subsystems to log: core, frag, dispatch, naming, "  \
	  "route, mpi, app, or all")                                           \
	X(MAX_HANDLES, max_handles, INT, "1048576", 1024, 1048576,             \
	  "handles (sends and receives in progress) per process")              \
	X(MAX_THREADS, max_threads, INT, "4096", 1, 65536,                     \
	  "thread ids per process (ids are 0 .. MAX_THREADS-1)")               \
	X(MCB_POOL, mcb_pool, INT, "65536", 16, 16777216,                      \
	  "message control blocks per process: bounds the unexpected "         \
	  "messages held at once (fast messages, which cannot be refused, "    \
	  "may add up to 256 per sending thread)")                             \
	X(MEMBARRIER, membarrier, INT, "1", 0, 1,                              \
	  "1: where the kernel allows and waiters spin (PCOR_SPIN_NS > 0, "    \
	  "dispatch not block), threads on the message path fence only for "  \
	  "the compiler and a thread about to sleep calls membarrier(2), "    \
	  "until sleeps stay frequent (1000/s for 5 s: real fences from "    \
	  "then on); 0: real fences on both sides (read at load)")            \
	X(MPI_ALLREDUCE_LARGE, mpi_allreduce_large, SIZE, "64k", 0,            \
	  (1LL << 46),                                                         \
	  "MPI shim: allreduces of at least this many bytes with a "           \
	  "predefined operation use reduce-scatter + allgather "               \
	  "(Rabenseifner) instead of recursive doubling")                      \
	X(MPI_BCAST_LARGE, mpi_bcast_large, SIZE, "8m", 0, (1LL << 46),        \
	  "MPI shim: broadcasts of at least this many bytes among 3 or more "  \
	  "ranks use scatter + allgather instead of a binomial tree")          \
	X(NAMING_TIMEOUT_MS, naming_timeout_ms, INT, "10000", 10, 3600000,     \
	  "how long a directory request waits for another agent's answer")     \
	X(PEER_TIMEOUT_MS, peer_timeout_ms, INT, "1500", 100, 3600000,         \
	  "a process that cannot be reached for this long, despite retries, " \
	  "is declared lost")                                                  \
	X(PMIX, pmix, STRING, "auto", 0, 0,                                    \
	  "bootstrap through PMIx: auto (when a PMIx server started us), on, " \
	  "off")                                                               \
	X(PROVIDERS, providers, STRING, "pcor-shm,net", 0, 0,                  \
	  "comma-separated port kinds to open, in order of preference: "      \
	  "pcor-shm (pcor's shared memory, same host) or libfabric providers " \
	  "(net, shm, tcp;ofi_rxm, verbs;ofi_rxm...)")                         \
	X(RNDV, rndv, STRING, "read", 0, 0,                                    \
	  "rendezvous data movement: read (remote read where the provider "    \
	  "can) or stream (windows of fragments)")                             \
	X(RTO_MS, rto_ms, INT, "1000", 1, 600000,                               \
	  "a message unacknowledged this long is sent again (doubling up to "  \
	  "25x); guards against fabrics that lose or corrupt a message")       \
	X(RXD_WINDOW, rxd_window, INT, "32", 0, 65536,                        \
	  "udp;ofi_rxd: packets in flight per peer (sets "                    \
	  "FI_OFI_RXD_MAX_UNACKED unless that is set); rxd's own 128 stalls "  \
	  "under two-way load; 0: leave rxd's default")                        \
	X(SEND_BYTES, send_bytes, SIZE, "64m", 0, (1LL << 46),                 \
	  "bytes held at once per process for messages to other processes "   \
	  "until they are acknowledged: copies plus a record of 412 bytes "    \
	  "per small message, 4.5 KiB per rendezvous (a sendDMA counts its "   \
	  "record only; one copy larger than the budget may go past it); "     \
	  "past it a send waits PCOR_BACKPRESSURE_MS, then returns "           \
	  "PCOR_ERR_AGAIN")                                                    \
	X(SHM_CELLS, shm_cells, INT, "256", 1, 65536,                          \
	  "pcor-shm: cells in each process's send pool (medium messages)")     \
	X(SHM_CELL_SIZE, shm_cell_size, SIZE, "8k", 1024, 16 << 20,            \
	  "pcor-shm: bytes per send cell (a multiple of 64)")                  \
	X(SHM_CMA, shm_cma, STRING, "auto", 0, 0,                              \
	  "pcor-shm: single-copy large messages with process_vm_readv: auto "  \
	  "(where the kernel permits) or off (stream them through cells)")     \
	X(SHM_EAGER_MAX, shm_eager_max, SIZE, "64k", 0, 2 << 20,               \
	  "pcor-shm with single copy on: larger messages go by rendezvous "   \
	  "(one copy, straight from the sender's memory) instead of cells")    \
	X(SHM_NT_STORES, shm_nt_stores, STRING, "auto", 0, 0,                 \
	  "pcor-shm: copy messages of 8 KiB or more into cells with "          \
	  "non-temporal stores: auto (while measured cheaper), on or off")     \
	X(SHM_PEERS, shm_peers, INT, "256", 1, 4096,                           \
	  "pcor-shm: processes of one host that can send to one process")      \
	X(SHM_RING_SIZE, shm_ring_size, SIZE, "32k", 4096, 16 << 20,           \
	  "pcor-shm: bytes of each per-pair receive ring (a power of two)")    \
	X(SPIN_NS, spin_ns, INT, "20000", 0, 10000000000LL,                    \
	  "how long a blocking wait spins before it sleeps (ns); a wait on "   \
	  "another process spins up to twice as long as its thread's "         \
	  "recent waits took, if that is under 0.5 ms; 0: never spins")        \
	X(STATS, stats, INT, "0", 0, 1,                                        \
	  "1: at finalize, print each port's counters on stderr, one line "    \
	  "per port (pcor-stats,key=value,...)")                               \
	X(UNAUTH_MAX, unauth_max, INT, "256", 1, 65536,                        \
	  "directory agent: connections still authenticating, in total; "     \
	  "past it the oldest is closed (members are never counted)")         \
	X(UNAUTH_PER_ADDR, unauth_per_addr, INT, "64", 1, 65536,               \
	  "directory agent: connections still authenticating from one IP "     \
	  "address; past it that address's oldest is closed")                 \
	X(UNEXP_BYTES, unexp_bytes, SIZE, "1g", 0, (1LL << 46),                \
	  "bytes of unexpected message data held at once per process")

typedef enum pcori_knob_type {
	PCORI_KNOB_INT,
	PCORI_KNOB_SIZE,
	PCORI_KNOB_STRING,
} pcori_knob_type_t;

typedef struct pcori_config {
#define PCORI_KNOB_FIELD_INT(f) int64_t f;
#define PCORI_KNOB_FIELD_SIZE(f) int64_t f;
#define PCORI_KNOB_FIELD_STRING(f) char f[256];
#define PCORI_KNOB_FIELD_(N, f, t, d, mn, mx, h) PCORI_KNOB_FIELD_##t(f)
	PCORI_KNOBS(PCORI_KNOB_FIELD_)
#undef PCORI_KNOB_FIELD_
} pcori_config_t;

/* One row of the knob table, for pcor_info and the parser. */
typedef struct pcori_knob {
	const char *name; /* without the PCOR_ prefix */
	pcori_knob_type_t type;
	const char *defval;
	int64_t min, max;
	const char *help;
	size_t offset; /* of the field in pcori_config_t */
} pcori_knob_t;

extern const pcori_knob_t pcori_knobs[];
extern const size_t pcori_nknobs;

/*
 * Fill cfg from the environment (defaults where unset).  On a malformed
 * or out-of-range value, logs the knob and returns PCOR_ERR_INVAL.
 */
int pcori_config_load(pcori_config_t *cfg);

/* Format a knob's current value from cfg into buf. */
void pcori_config_format(const pcori_config_t *cfg, const pcori_knob_t *k,
			 char *buf, size_t len);

/* Parse "12", "64k", "2m", "1g" into *out.  Returns 0 or -1. */
int pcori_parse_size(const char *s, int64_t *out);

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
	_Atomic uint32_t hgen;  /* the generation handles carry; handle.c */
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
#if PCORI_LOCK_BIAS
	/*
	 * line 4: the releasers' lock (handle.c).  Its own line: the thread
	 * that keeps testing this slot soon holds its bias, and line 1 is
	 * the completer's.
	 */
	alignas(PCORI_CACHELINE) pcori_lock_t rel;
#endif
} pcori_req_t;

_Static_assert(offsetof(pcori_req_t, gen) == PCORI_CACHELINE,
	       "a request's first line overflows");

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
 * The average is kept by pcor_handle_test/wait (handle.c).
 */
#define PCORI_WAIT_SPIN_MAX_NS 500000u
static inline int64_t pcori_wait_spin(void)
{
	int64_t base = pcori_rt.cfg.spin_ns;
	uint64_t avg = pcori_tls.wait_avg_ns;
	if (base <= 0 || avg > PCORI_WAIT_SPIN_MAX_NS / 2 ||
	    (int64_t)(2 * avg) <= base)
		return base;
	return (int64_t)(2 * avg);
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
