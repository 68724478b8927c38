/*
 * sync.c -- the low-level primitives: panic, clock, futex, the spinning
 * mutex and the spin-then-sleep wait on a completion word.
 *
 * Design notes: waiting is always on the word that will change (a
 * request's completion word, a lock word), so a wake-up reaches exactly
 * the threads that wait for that event.  The sleeper bit makes the
 * completer pay for a futex_wake only when somebody really sleeps.
 */
#include "core.h"

#include <errno.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Noreturn void pcori_panic(const char *file, int line, const char *what)
{
	fprintf(stderr, "pcor: internal error at %s:%d: %s\n", file, line,
		what);
	fflush(stderr);
	abort();
}

bool pcori_have_prefetchw;

/* Before any pcor call can run: the flag is read-only afterwards. */
__attribute__((constructor)) static void detect_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	unsigned a, b, c, d;
	/* CPUID 0x80000001: ECX bit 8, PREFETCHW (3DNowPrefetch). */
	if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
		pcori_have_prefetchw = (c >> 8) & 1u;
#endif
}

bool pcori_asym_local, pcori_asym_global;
_Thread_local _Atomic uint32_t pcori_fence_word
	__attribute__((tls_model("initial-exec")));
static bool asym_local_ok; /* registered: pcori_fence_choose may use it */

/* A sleeper whose heavy fence failed looks again after this long. */
#define PCORI_NAP_NS 1000000

/*
 * Whether a sleeper must still make every thread fence: true while a
 * thread on the message path may fence only for the compiler.  Cleared
 * only after pcori_asym_local went false and one membarrier followed it
 * (fence_go_real).
 */
static _Atomic bool heavy_needed;

static int membarrier(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

/*
 * At load, while the process has one thread: registering later would
 * cost the kernel an RCU grace period.  A fork keeps the registration;
 * an exec reloads us.
 */
__attribute__((constructor)) static void detect_membarrier(void)
{
	const char *knob = getenv("PCOR_MEMBARRIER");
	int have = membarrier(MEMBARRIER_CMD_QUERY);
	if (have < 0 || (knob && strcmp(knob, "0") == 0))
		return;
	if ((have & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
		pcori_asym_local = asym_local_ok = true;
		atomic_store(&heavy_needed, true);
	}
	/* The sleeper's call needs no registration; our light side does. */
	if ((have & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
	    membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0)
		pcori_asym_global = true;
}

/*
 * A process that keeps sleeping this often pays more in membarrier calls
 * (a system call, and an interrupt for each CPU running one of its
 * threads) than the locked instructions they save on its messages: after
 * `windows` windows in a row with at least `calls` calls each, both sides
 * fence for real.  In a row, so that a burst (a noisy neighbour, a
 * profiler) does not cost a process its light fences for good.
 */
static struct {
	uint32_t calls;
	uint64_t window_ns;
	uint32_t windows;
} fence_auto = {1000, 1000000000u, 5};
static _Atomic uint32_t heavy_calls;  /* membarrier calls in this window */
static _Atomic uint64_t heavy_since;  /* when the window began, ns */
static _Atomic uint32_t busy_windows; /* full windows in a row before it */
static _Atomic bool going_real;       /* fence_go_real is taken, once */

void pcori_fence_auto_set(uint32_t calls, uint64_t window_ns,
			  uint32_t windows)
{
	fence_auto.calls = calls;
	fence_auto.window_ns = window_ns;
	fence_auto.windows = windows;
}

void pcori_fence_choose(bool light)
{
	bool l = asym_local_ok && light;
	__atomic_store_n(&pcori_asym_local, l, __ATOMIC_RELAXED);
	atomic_store(&heavy_needed, l);
	atomic_store(&heavy_calls, 0);
	atomic_store(&heavy_since, pcori_now_ns());
	atomic_store(&busy_windows, 0);
	atomic_store(&going_real, false);
}

/*
 * One way, while threads run.  Every light side reads pcori_asym_local
 * after its store and before its load (pcori_fence_light_local).  One
 * that still read true did so before the flag's store was seen, so the
 * membarrier below interrupts it after that store, or the switch from it
 * drains it: the store is seen by the time heavy_needed goes false, and
 * any sleeper that reads false then loads after it.  One that reads
 * false fences for real itself.
 */
static void fence_go_real(void)
{
	bool no = false;
	if (!atomic_compare_exchange_strong(&going_real, &no, true))
		return;
	__atomic_store_n(&pcori_asym_local, false, __ATOMIC_SEQ_CST);
	/* Should it fail, sleepers keep calling it (and nap if it fails). */
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		atomic_store_explicit(&heavy_needed, false,
				      memory_order_release);
	PCORI_INFO(PCORI_SUB_CORE, "threads sleep often (%u windows of %u "
		   "membarrier calls or more): real fences from now on",
		   fence_auto.windows, fence_auto.calls);
}

static void heavy_counted(void)
{
	atomic_fetch_add_explicit(&heavy_calls, 1, memory_order_relaxed);
	uint64_t now = pcori_now_ns();
	uint64_t since = atomic_load_explicit(&heavy_since,
					      memory_order_relaxed);
	uint64_t elapsed = pcori_elapsed_ns(now, since);
	if (elapsed < fence_auto.window_ns)
		return;
	/* A window ended: busy, and right after the last one?  (Races
	 * between sleepers here only blur one window's count.) */
	atomic_store_explicit(&heavy_since, now, memory_order_relaxed);
	uint32_t n = atomic_exchange_explicit(&heavy_calls, 0,
					      memory_order_relaxed);
	uint32_t busy = 0;
	if (n >= fence_auto.calls && elapsed < 2 * fence_auto.window_ns)
		busy = atomic_fetch_add_explicit(&busy_windows, 1,
						 memory_order_relaxed) + 1;
	else
		atomic_store_explicit(&busy_windows, 0, memory_order_relaxed);
	if (busy >= fence_auto.windows)
		fence_go_real();
}

bool pcori_fence_heavy_local(void)
{
	pcori_fence_full();
	if (!atomic_load_explicit(&heavy_needed, memory_order_acquire))
		return true;
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
		return false;
	heavy_counted();
	return true;
}

void pcori_fence_heavy_local_sure(void)
{
	/*
	 * Should membarrier fail (a child forked without registering), time
	 * stands in for it, as for a sleeper: a nap on, both stores have
	 * long left their store buffers.
	 */
	if (!pcori_fence_heavy_local())
		nanosleep(&(struct timespec){0, PCORI_NAP_NS}, NULL);
}

bool pcori_fence_heavy_global(void)
{
	pcori_fence_full();
	/*
	 * Called even when this process could not register: a sender in
	 * another process may have, and then fences only for the compiler.
	 */
	return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ||
	       !pcori_asym_global;
}

uint64_t pcori_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef PCOR_LOCK_DEBUG
pid_t pcori_gettid(void)
{
	static _Thread_local pid_t tid;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	return tid;
}
#endif

int pcori_futex_wait(_Atomic uint32_t *word, uint32_t expect,
		     int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE,
			  expect, tsp, NULL, 0);
	if (rc == -1 && errno == ETIMEDOUT)
		return PCOR_ERR_TIMEDOUT;
	return PCOR_OK; /* woken, value changed (EAGAIN) or EINTR: recheck */
}

void pcori_futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL,
		0);
}

void pcori_futex_wake_shared(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Spins this many times before sleeping on a contended lock. */
#define PCORI_LOCK_SPINS 200

/* Try for the lock a while, as its holder may let go any moment. */
static bool lock_spin(pcori_lock_t *l)
{
	for (int i = 0; i < PCORI_LOCK_SPINS; i++) {
		uint32_t zero = 0;
		pcori_cpu_relax();
		if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(
			    &l->word, &zero, 1, memory_order_acquire,
			    memory_order_relaxed))
			return true;
	}
	return false;
}

void pcori_sleep_counted(_Atomic uint32_t *count, _Atomic uint32_t *word,
			 uint32_t value, int64_t timeout_ns)
{
	atomic_fetch_add_explicit(count, 1, memory_order_seq_cst);
	if (!pcori_fence_heavy_local() &&
	    (timeout_ns < 0 || timeout_ns > PCORI_NAP_NS))
		timeout_ns = PCORI_NAP_NS;
	if (atomic_load_explicit(word, memory_order_acquire) == value)
		pcori_futex_wait(word, value, timeout_ns);
	atomic_fetch_sub_explicit(count, 1, memory_order_relaxed);
}

void pcori_lock_slow(pcori_lock_t *l)
{
	/*
	 * Woken, spin again: a holder that takes the lock back at once in a
	 * loop (a dispatcher) would otherwise win every race against a
	 * thread that has just woken up.
	 */
	while (!lock_spin(l))
		pcori_sleep_counted(&l->sleepers, &l->word, 1, -1);
}

_Thread_local uint32_t pcori_lock_me __attribute__((tls_model("initial-exec")));
_Thread_local uint32_t pcori_lock_nbiased
	__attribute__((tls_model("initial-exec")));
pcori_lock_owner_t pcori_lock_owners[PCORI_LOCK_OWNERS];

/*
 * Tokens: a thread's comes back when it ends, so that a process that
 * starts and ends threads all day keeps tokens that can own locks.  A
 * reused token may find a lock still biased to it: it is one live thread,
 * so that is safe.  The list is taken rarely (a thread's first lock, its
 * end) and under a plain mutex, kept usable across fork.
 */
static pthread_mutex_t tokens_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t tokens_next = 1; /* under tokens_mu: none from here used */
static uint32_t tokens_free;     /* under tokens_mu: a stack, 0 empty */
static pthread_key_t tokens_key;
static pthread_once_t tokens_once = PTHREAD_ONCE_INIT;

static void tokens_lock(void)
{
	pthread_mutex_lock(&tokens_mu);
}

static void tokens_unlock(void)
{
	pthread_mutex_unlock(&tokens_mu);
}

static void token_put(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg;
	/* In a lock as it ends (a bug elsewhere): keep it out of reuse. */
	if (pcori_lock_nbiased)
		return;
	pcori_lock_me = 0;
	if (t >= PCORI_LOCK_OWNERS)
		return;
	tokens_lock();
	pcori_lock_owners[t].next_free = tokens_free;
	tokens_free = t;
	tokens_unlock();
}

static void tokens_setup(void)
{
	if (pthread_key_create(&tokens_key, token_put) != 0)
		pcori_panic(__FILE__, __LINE__, "pthread_key_create");
	pthread_atfork(tokens_lock, tokens_unlock, tokens_unlock);
}

uint32_t pcori_lock_me_new(void)
{
	pthread_once(&tokens_once, tokens_setup);
	tokens_lock();
	uint32_t t = tokens_free;
	if (t)
		tokens_free = pcori_lock_owners[t].next_free;
	else if ((t = tokens_next++) == 0) /* 2^32 threads: skip 0 */
		t = tokens_next++;
	tokens_unlock();
	pcori_lock_me = t;
	/* Handed back as the thread ends (should this fail, never). */
	pthread_setspecific(tokens_key, (void *)(uintptr_t)t);
	return t;
}

void pcori_lock_bias(pcori_lock_t *l, uint32_t me)
{
	l->streak = 0;
	/* With real fences on the owner's side a bias saves nothing. */
	if (PCORI_LOCK_BIAS &&
	    __atomic_load_n(&pcori_asym_local, __ATOMIC_RELAXED) &&
	    me < PCORI_LOCK_OWNERS)
		atomic_store_explicit(&l->bias, me, memory_order_relaxed);
}

/* Spins on the owner's record before yielding the CPU to an owner that
 * may not run, and the nap once yielding has not let it out either. */
#define PCORI_BIAS_SPINS 1000
#define PCORI_BIAS_NAP_NS 20000

bool pcori_lock_revoke(pcori_lock_t *l, uint32_t me, bool wait)
{
	uint32_t owner = atomic_load_explicit(&l->bias, memory_order_relaxed);
	if (owner) {
		/* One revoked owner at a time: a bias is earned through here. */
		PCORI_ASSERT(!l->gone);
		atomic_store_explicit(&l->bias, 0, memory_order_relaxed);
		/*
		 * The heavy side: after it, the owner's note in its record is
		 * seen here, or its check of bias sees 0.
		 */
		pcori_fence_heavy_local_sure();
		if (l->revoked < PCORI_BIAS_DOUBLINGS)
			l->revoked++;
	} else {
		owner = l->gone;
	}
	/* Acquire: once it is out, its writes under the lock are ours. */
	for (unsigned i = 0;
	     pcori_lock_slot(owner, l, memory_order_acquire) >= 0; i++) {
		if (!wait) {
			/* It is in: busy.  The next taker waits for it. */
			l->gone = owner;
			pcori_unlock_word(l);
			return false;
		}
		if (i < PCORI_BIAS_SPINS)
			pcori_cpu_relax();
		else if (i < 2 * PCORI_BIAS_SPINS)
			sched_yield();
		else /* descheduled in there: do not burn a CPU */
			nanosleep(&(struct timespec){0, PCORI_BIAS_NAP_NS},
				  NULL);
	}
	l->gone = 0;
	l->last = me;
	l->streak = 0;
	return true;
}

/* Spins before the first clock read, and the spin window they need. */
#define PCORI_SPIN_QUICK 32
#define PCORI_SPIN_QUICK_NS 8192

bool pcori_spin_word(_Atomic uint32_t *word, uint32_t pending, int64_t spin_ns,
		     int64_t timeout_ns, uint64_t *deadline_p)
{
	uint32_t v = atomic_load_explicit(word, memory_order_acquire);
	if ((v & ~PCORI_WAIT_SLEEPER) != pending)
		return true;
	/*
	 * Between two busy threads most waits end within a microsecond: spin
	 * a little before reading the clock, whose ~25 ns would otherwise sit
	 * between the change and our noticing it.  Only for windows long
	 * enough that these spins are a small part of them.
	 */
	if (spin_ns >= PCORI_SPIN_QUICK_NS &&
	    (timeout_ns < 0 || timeout_ns >= PCORI_SPIN_QUICK_NS)) {
		for (unsigned i = 0; i < PCORI_SPIN_QUICK; i++) {
			pcori_cpu_relax();
			v = atomic_load_explicit(word, memory_order_acquire);
			if ((v & ~PCORI_WAIT_SLEEPER) != pending)
				return true;
		}
	}

	uint64_t start = pcori_now_ns();
	uint64_t deadline = timeout_ns < 0 ? UINT64_MAX
					   : start + (uint64_t)timeout_ns;
	*deadline_p = deadline;
	if (spin_ns > 0) {
		uint64_t spin_end = start + (uint64_t)spin_ns;
		if (spin_end > deadline)
			spin_end = deadline;
		for (unsigned i = 1;; i++) {
			pcori_cpu_relax();
			v = atomic_load_explicit(word, memory_order_acquire);
			if ((v & ~PCORI_WAIT_SLEEPER) != pending)
				return true;
			/* Reading the clock costs ~20 ns: only now and then. */
			if ((i & 63) == 0 && pcori_now_ns() >= spin_end)
				break;
		}
	}
	return false;
}

int pcori_wait_word(_Atomic uint32_t *word, uint32_t pending, int64_t spin_ns,
		    int64_t timeout_ns)
{
	uint64_t deadline;
	if (pcori_spin_word(word, pending, spin_ns, timeout_ns, &deadline))
		return PCOR_OK;
	for (;;) {
		uint32_t v = atomic_load_explicit(word, memory_order_acquire);
		if ((v & ~PCORI_WAIT_SLEEPER) != pending)
			return PCOR_OK;
		if (!(v & PCORI_WAIT_SLEEPER) &&
		    !atomic_compare_exchange_strong_explicit(
			    word, &v, v | PCORI_WAIT_SLEEPER,
			    memory_order_acq_rel, memory_order_acquire))
			continue; /* changed under us: recheck */
		int64_t left;
		if (pcori_wait_left(deadline, &left))
			return PCOR_ERR_TIMEDOUT;
		pcori_futex_wait(word, pending | PCORI_WAIT_SLEEPER, left);
	}
}

void pcori_wake_word_bump(pcori_wake_word_t *ww, int n)
{
	/* seq_cst: the bump, then the sleepers (the waiter: the reverse). */
	atomic_fetch_add(&ww->word, 1);
	if (atomic_load(&ww->sleepers))
		pcori_futex_wake(&ww->word, n);
}
