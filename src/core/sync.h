/*
 * sync.h -- futexes, fences and pcor's locks (sync.c).  Part of core.h,
 * which includes it.
 */
#ifndef PCOR_CORE_SYNC_H
#define PCOR_CORE_SYNC_H

#include "base.h"
#include "hop.h"

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
/* The same where the pairing cannot do without it: a failure naps. */
void pcori_fence_heavy_local_sure(void);
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


#endif /* PCOR_CORE_SYNC_H */
