/*
 * sync -- the low-level primitives: the futex lock (mutual exclusion,
 * trylock, sleepers woken, a waiter not kept out by a thread that takes
 * the lock back in a loop, bias earned, revoked and re-earned, an old
 * owner that comes back late, tokens reused (biasing where compiled in), with
 * membarrier and with plain fences), waiting on a completion word (no
 * wait when done, timeouts, the sleeper bit, a wake reaching a sleeping
 * waiter), the futex timeout itself, and the switch to real fences of a
 * process whose threads sleep often.
 */
#include "core/core.h"

#include "../common.h"

#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 4
#define INCS 200000

static pcori_lock_t lock = PCORI_LOCK_INITIALIZER;
static uint64_t counter;        /* guarded by lock */
static uint64_t shadow[NTHREADS]; /* per thread, guarded by lock */
static pthread_barrier_t bar;

static void *incr(void *arg)
{
	int me = (int)(intptr_t)arg;
	th_barrier_wait(&bar);
	for (int i = 0; i < INCS; i++) {
		pcori_lock(&lock);
		PCORI_ASSERT_LOCKED(&lock);
		/* A torn read-modify-write would lose increments. */
		uint64_t c = counter;
		shadow[me]++;
		counter = c + 1;
		pcori_unlock(&lock);
	}
	return NULL;
}

static void test_lock(void)
{
	uint64_t base = counter;
	memset(shadow, 0, sizeof(shadow));
	th_barrier_init(&bar, NTHREADS);
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		th_thread_start(&t[i], incr, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		th_thread_join(t[i]);
	pthread_barrier_destroy(&bar);
	CHECK(counter == base + (uint64_t)NTHREADS * INCS);
	for (int i = 0; i < NTHREADS; i++)
		CHECK(shadow[i] == INCS);
	/* Released for good: free again and takeable. */
	CHECK(atomic_load(&lock.word) == 0);
	CHECK(pcori_trylock(&lock));
	CHECK(!pcori_trylock(&lock));
	pcori_unlock(&lock);
	CHECK(pcori_trylock(&lock));
	pcori_unlock(&lock);
}

/* A thread holds the lock while another blocks on it, then releases. */
static _Atomic int blocked_got_it;
static _Atomic pid_t blocked_tid;

static void *blocked(void *arg)
{
	(void)arg;
	atomic_store(&blocked_tid, (pid_t)syscall(SYS_gettid));
	pcori_lock(&lock);
	atomic_store(&blocked_got_it, 1);
	pcori_unlock(&lock);
	return NULL;
}

static void test_lock_sleeper(void)
{
	/*
	 * Fresh: a token handed back by test_lock's threads may be ours now
	 * and the lock biased to it; a taker would then wait on the record,
	 * not sleep on word.
	 */
	pcori_lock_init(&lock);
	pcori_lock(&lock);
	pthread_t t;
	th_thread_start(&t, blocked, NULL);
	for (long i = 0; !atomic_load(&blocked_tid); i++) {
		CHECK(i < 100000000);
		sched_yield();
	}
	/* It spins briefly, counts itself a sleeper, and sleeps. */
	for (long i = 0; atomic_load(&lock.sleepers) == 0; i++) {
		CHECK(i < 100000000);
		sched_yield();
	}
	th_wait_thread_sleeping(atomic_load(&blocked_tid));
	CHECK(!atomic_load(&blocked_got_it));
	pcori_unlock(&lock);
	th_thread_join(t);
	CHECK(atomic_load(&blocked_got_it) == 1);
	CHECK(atomic_load(&lock.word) == 0);
	CHECK(atomic_load(&lock.sleepers) == 0);
	atomic_store(&blocked_got_it, 0);
	atomic_store(&blocked_tid, 0);
}

/*
 * A thread that takes the lock back at once in a loop (as a dispatcher
 * does with its port) must not keep out a thread that waits for it.
 */
static _Atomic int hog_stop;
static _Atomic long hog_rounds;

static void *hog(void *arg)
{
	(void)arg;
	long i = 0;
	for (; !atomic_load(&hog_stop) && i < 200000000; i++) {
		pcori_lock(&lock);
		atomic_store(&hog_rounds, i + 1);
		pcori_unlock(&lock);
	}
	return NULL;
}

static void test_lock_hogged(void)
{
	for (int round = 0; round < 20; round++) {
		atomic_store(&hog_stop, 0);
		atomic_store(&hog_rounds, 0);
		pthread_t t;
		th_thread_start(&t, hog, NULL);
		for (long i = 0; atomic_load(&hog_rounds) < 1000; i++) {
			CHECK(i < 100000000);
			sched_yield();
		}
		pcori_lock(&lock);
		/* Got it while the hog still loops: it has not run out. */
		atomic_store(&hog_stop, 1);
		pcori_unlock(&lock);
		th_thread_join(t);
		CHECK(atomic_load(&hog_rounds) < 200000000);
	}
}

/*
 * Bias: a thread that takes a lock PCORI_BIAS_STREAK times in a row owns
 * it (with the asymmetric fences; never with real ones), another thread's
 * take revokes it and waits for the owner to leave, a trylock that finds
 * the owner inside says busy, and a lock shared in turn needs a longer
 * streak after each revocation.
 */
static pcori_lock_t block; /* the biased lock of these tests */
static _Atomic int other_in, other_done, other_try;
static uint64_t guarded; /* under block */

static void *other_taker(void *arg)
{
	bool try = arg != NULL;
	if (try) {
		atomic_store(&other_try, pcori_trylock(&block) ? 1 : -1);
		if (atomic_load(&other_try) == 1)
			pcori_unlock(&block);
		return NULL;
	}
	pcori_lock(&block);
	atomic_store(&other_in, 1);
	guarded++;
	pcori_unlock(&block);
	atomic_store(&other_done, 1);
	return NULL;
}

static void take_many(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		pcori_lock(&block);
		guarded++;
		pcori_unlock(&block);
	}
}

static void test_bias(bool light)
{
	pcori_lock_init(&block);
	guarded = 0;
	take_many(PCORI_BIAS_STREAK + 1);
	uint32_t me = pcori_lock_me;
	/* A token is handed out by the first take where biasing can be. */
	CHECK(me != 0 || !PCORI_LOCK_BIAS);
	CHECK(atomic_load(&block.bias) == (light ? me : 0));
	if (!light) {
		CHECK(guarded == PCORI_BIAS_STREAK + 1);
		return;
	}
	/* In through the bias: word stays free, our record names it. */
	pcori_lock(&block);
	PCORI_ASSERT_LOCKED(&block);
	CHECK(atomic_load(&block.word) == 0);
	CHECK(pcori_lock_in_biased(&block));
	CHECK(!pcori_trylock(&block)); /* not twice */

	/* A trylock from elsewhere revokes, finds us inside: busy. */
	atomic_store(&other_try, 0);
	pthread_t t;
	th_thread_start(&t, other_taker, (void *)1);
	th_thread_join(t);
	CHECK(atomic_load(&other_try) == -1);
	CHECK(atomic_load(&block.bias) == 0);
	CHECK(atomic_load(&block.word) == 0);
	CHECK(block.gone == me);
	CHECK(pcori_lock_in_biased(&block));
	pcori_unlock(&block);
	CHECK(!pcori_lock_in_biased(&block));
	CHECK(pcori_lock_nbiased == 0);

	/* Earn it again; a lock from elsewhere waits until we leave. */
	take_many((PCORI_BIAS_STREAK << 1) + 1);
	CHECK(atomic_load(&block.bias) == me);
	pcori_lock(&block);
	atomic_store(&other_in, 0);
	atomic_store(&other_done, 0);
	th_thread_start(&t, other_taker, NULL);
	/* Revoked: it holds word and waits for us to leave. */
	for (long i = 0; atomic_load(&block.bias) != 0; i++) {
		CHECK(i < 100000000);
		sched_yield();
	}
	for (long i = 0; atomic_load(&block.word) == 0; i++) {
		CHECK(i < 100000000);
		sched_yield();
	}
	CHECK(!atomic_load(&other_in));
	guarded++;
	pcori_unlock(&block);
	th_thread_join(t);
	CHECK(atomic_load(&other_done) == 1);
	CHECK(block.revoked == 2);
	/* Two streaks, then our take and the other's. */
	CHECK(guarded == PCORI_BIAS_STREAK + 1 + (PCORI_BIAS_STREAK << 1) + 1 +
				 1 + 1);

	/* Back through word: not ours until a doubled streak. */
	take_many(PCORI_BIAS_STREAK << 1);
	CHECK(atomic_load(&block.bias) == 0);
	take_many(PCORI_BIAS_STREAK << 2);
	CHECK(atomic_load(&block.bias) == me);
}

/*
 * A thread that read an old bias and was descheduled before it noted
 * itself comes back while another thread owns the lock and is in: its
 * attempt fails and leaves the owner's record alone, so a taker from
 * elsewhere still finds the owner in and waits (a shared "inside" word
 * let that taker in beside the owner).
 */
static _Atomic int stale_rc = -1;

static void *stale_owner(void *arg)
{
	(void)arg;
	/* A token of its own, as the thread that once owned the bias. */
	pcori_lock(&lock);
	pcori_unlock(&lock);
	uint32_t stale = pcori_lock_me;
	CHECK(stale != 0 && stale != atomic_load(&block.bias));
	atomic_store(&stale_rc, pcori_lock_enter_biased(&block, stale));
	CHECK(pcori_lock_nbiased == 0);
	CHECK(pcori_lock_slot(stale, &block, memory_order_relaxed) < 0);
	return NULL;
}

static void test_bias_stale(void)
{
	pcori_lock_init(&block);
	take_many(PCORI_BIAS_STREAK + 1);
	uint32_t me = pcori_lock_me;
	CHECK(atomic_load(&block.bias) == me);
	pcori_lock(&block);
	CHECK(pcori_lock_in_biased(&block));
	pthread_t t;
	th_thread_start(&t, stale_owner, NULL);
	th_thread_join(t);
	CHECK(atomic_load(&stale_rc) == 0);
	CHECK(pcori_lock_slot(me, &block, memory_order_relaxed) >= 0);
	/* Still ours: a trylock from elsewhere revokes and finds us in. */
	atomic_store(&other_try, 0);
	th_thread_start(&t, other_taker, (void *)1);
	th_thread_join(t);
	CHECK(atomic_load(&other_try) == -1);
	CHECK(block.gone == me);
	pcori_unlock(&block);
	/* Out now: the next taker gets in, and the revoked owner is cleared. */
	th_thread_start(&t, other_taker, (void *)1);
	th_thread_join(t);
	CHECK(atomic_load(&other_try) == 1);
	CHECK(block.gone == 0);
}

/*
 * Tokens come back when threads end: many short-lived threads, each
 * taking a lock, leave the token space below PCORI_LOCK_OWNERS.
 */
static _Atomic uint32_t token_seen;

static void *token_taker(void *arg)
{
	(void)arg;
	pcori_lock(&lock);
	pcori_unlock(&lock);
	atomic_store(&token_seen, pcori_lock_me);
	return NULL;
}

static void test_tokens_reused(void)
{
	for (unsigned i = 0; i < 2 * PCORI_LOCK_OWNERS; i++) {
		pthread_t t;
		th_thread_start(&t, token_taker, NULL);
		th_thread_join(t);
		uint32_t tok = atomic_load(&token_seen);
		CHECK(tok != 0 && tok < PCORI_LOCK_OWNERS);
		CHECK(tok != pcori_lock_me);
	}
}

/*
 * An owner that takes the lock in a loop, re-earning its bias, while
 * another thread takes it now and then: no increment lost, every take
 * of the other's a revocation while the bias stands.
 */
static _Atomic uint64_t owner_rounds;
static _Atomic int owner_stop;

static void *owner_loop(void *arg)
{
	(void)arg;
	for (uint64_t i = 0; !atomic_load(&owner_stop) && i < 100000000; i++) {
		pcori_lock(&block);
		guarded++;
		pcori_unlock(&block);
		atomic_store_explicit(&owner_rounds, i + 1,
				      memory_order_relaxed);
	}
	return NULL;
}

static void test_bias_contended(void)
{
	pcori_lock_init(&block);
	guarded = 0;
	atomic_store(&owner_stop, 0);
	atomic_store(&owner_rounds, 0);
	pthread_t t;
	th_thread_start(&t, owner_loop, NULL);
	uint64_t mine = 0, revokes = 0;
	for (int round = 0; round < 12; round++) {
		pcori_lock(&block);
		uint32_t need = PCORI_BIAS_STREAK << block.revoked;
		revokes = block.revoked;
		guarded++;
		mine++;
		pcori_unlock(&block);
		/* Let it take the lock enough times in a row to earn it. */
		uint64_t from = atomic_load(&owner_rounds);
		for (long i = 0; atomic_load(&owner_rounds) < from + need + 16;
		     i++) {
			CHECK(i < 1000000000);
			pcori_cpu_relax();
		}
		if (PCORI_LOCK_BIAS && pcori_asym_local)
			CHECK(atomic_load(&block.bias) != 0);
	}
	atomic_store(&owner_stop, 1);
	th_thread_join(t);
	CHECK(guarded == atomic_load(&owner_rounds) + mine);
	if (PCORI_LOCK_BIAS && pcori_asym_local)
		CHECK(revokes >= 10);
}

static void test_wait_timeouts(void)
{
	_Atomic uint32_t w = 0;
	/* Not pending: returns at once whatever the timeout. */
	atomic_store(&w, 1);
	CHECK_OK(pcori_wait_word(&w, 0, 0, 0));
	CHECK_OK(pcori_wait_word(&w, 0, 1000000, -1));
	/* The sleeper bit does not count as a change. */
	atomic_store(&w, 0 | PCORI_WAIT_SLEEPER);
	CHECK_RC(pcori_wait_word(&w, 0, 0, 1000), PCOR_ERR_TIMEDOUT);
	atomic_store(&w, 0);

	const int64_t ms = 1000000;
	struct {
		int64_t spin, timeout;
	} cases[] = {
		{0, 0},        {0, 20 * ms},       {5 * ms, 20 * ms},
		{50 * ms, 20 * ms}, /* spinning is cut short by the deadline */
		{10 * ms, 0},
	};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(cases); i++) {
		uint64_t t0 = th_now_ns();
		CHECK_RC(pcori_wait_word(&w, 0, cases[i].spin, cases[i].timeout),
			 PCOR_ERR_TIMEDOUT);
		CHECK(th_now_ns() - t0 >= (uint64_t)cases[i].timeout);
		CHECK((atomic_load(&w) & ~PCORI_WAIT_SLEEPER) == 0);
		atomic_store(&w, 0);
	}

	/* The raw futex: value differs -> at once; same -> timeout. */
	CHECK_OK(pcori_futex_wait(&w, 7, 1000 * ms));
	uint64_t t0 = th_now_ns();
	CHECK_RC(pcori_futex_wait(&w, 0, 10 * ms), PCOR_ERR_TIMEDOUT);
	CHECK(th_now_ns() - t0 >= (uint64_t)(10 * ms));
}

/* Any value other than PCORI_REQ_DONE stands for pending here. */
#define PENDING 6u

static _Atomic uint32_t word;
static _Atomic pid_t waiter_tid;
static int waiter_rc;

static void *waiter(void *arg)
{
	int64_t spin = (int64_t)(intptr_t)arg;
	atomic_store(&waiter_tid, (pid_t)syscall(SYS_gettid));
	waiter_rc = pcori_wait_word(&word, PENDING, spin, 30ll * 1000000000);
	return NULL;
}

/* A completion reaches a waiter that sleeps, and one that spins. */
static void test_wake(void)
{
	for (int round = 0; round < 40; round++) {
		bool sleeping = round & 1;
		atomic_store(&word, PENDING);
		atomic_store(&waiter_tid, 0);
		waiter_rc = -999;
		pthread_t t;
		th_thread_start(&t, waiter,
				(void *)(intptr_t)(sleeping ? 0 : 1000000000));
		for (long i = 0; !atomic_load(&waiter_tid); i++) {
			CHECK(i < 100000000);
			sched_yield();
		}
		if (sleeping) {
			/* It says so before it sleeps. */
			for (long i = 0;
			     atomic_load(&word) != (PENDING | PCORI_WAIT_SLEEPER);
			     i++) {
				CHECK(i < 100000000);
				sched_yield();
			}
			th_wait_thread_sleeping(atomic_load(&waiter_tid));
		}
		pcori_wake_word(&word, PCORI_REQ_DONE);
		th_thread_join(t);
		CHECK_OK(waiter_rc);
		CHECK(atomic_load(&word) == PCORI_REQ_DONE);
	}
}

/*
 * A process whose threads sleep often switches to real fences while they
 * run (sync.c, fence_go_real).  Two threads hand a turn back and forth,
 * each sleeping for it (the sleeper's side: counted, heavy fence) and
 * waking the other (the light side): thousands of membarrier calls a
 * second, window after window, so the switch happens mid-run; the turns
 * go on for TURNS_AFTER more once it has.  A wake-up lost across it would
 * leave a sleeper to its timeout with the turn still not its own.  How
 * soon three busy windows come in a row depends on what else runs (beside
 * other tests on two cores, under ThreadSanitizer, after 1,700 to 36,000
 * turns): the run ends TURNS_AFTER past the switch, or at TURNS_MAX.
 */
#define TURNS_AFTER 20000u
#define TURNS_MAX 4000000u
#define TURN_TIMEOUT_NS 2000000000
static _Atomic uint32_t turn, turn_sleepers[2];
static _Atomic uint32_t turn_end = TURNS_MAX;
static _Atomic int turns_lost;
static _Atomic uint32_t switched_at; /* the turn first seen on real fences */

static void *take_turns(void *arg)
{
	uint32_t me = (uint32_t)(intptr_t)arg;
	for (;;) {
		uint32_t w;
		while ((w = atomic_load(&turn)) % 2 != me &&
		       w < atomic_load(&turn_end)) {
			uint64_t t0 = th_now_ns();
			pcori_sleep_counted(&turn_sleepers[me], &turn, w,
					    TURN_TIMEOUT_NS);
			if (atomic_load(&turn) == w &&
			    th_now_ns() - t0 >= TURN_TIMEOUT_NS)
				atomic_fetch_add(&turns_lost, 1);
		}
		if (w >= atomic_load(&turn_end))
			return NULL;
		if (!atomic_load(&switched_at) &&
		    !__atomic_load_n(&pcori_asym_local, __ATOMIC_RELAXED)) {
			atomic_store(&switched_at, w + 1);
			atomic_store(&turn_end, w + 1 + TURNS_AFTER);
		}
		atomic_store_explicit(&turn, w + 1, memory_order_release);
		pcori_fence_light_local();
		if (atomic_load_explicit(&turn_sleepers[1 - me],
					 memory_order_relaxed))
			pcori_futex_wake(&turn, 1);
	}
}

static void test_fence_switch(void)
{
	/* Windows of 50 ms instead of seconds, three busy ones in a row. */
	pcori_fence_auto_set(200, 50000000, 3);
	pcori_fence_choose(true);
	bool light = pcori_asym_local; /* the kernel may refuse membarrier */
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		th_thread_start(&t[i], take_turns, (void *)(intptr_t)i);
	for (int i = 0; i < 2; i++)
		th_thread_join(t[i]);
	CHECK(atomic_load(&turns_lost) == 0);
	/* Switched, for good; without membarrier there was nothing to. */
	CHECK(!pcori_asym_local);
	uint32_t at = atomic_load(&switched_at);
	CHECK(at > 0 && atomic_load(&turn) == at + TURNS_AFTER);
	if (light) {
		/* While the turns went on, not at once. */
		CHECK(at > 1);
		printf("fence switch: light -> real at turn %u, then %u more\n",
		       at, TURNS_AFTER);
	}
}

int main(void)
{
	test_lock();
	test_lock_sleeper();
	test_lock_hogged();
	/* Earned here only where biasing is compiled in (PCORI_LOCK_BIAS). */
	test_bias(PCORI_LOCK_BIAS && pcori_asym_local);
	if (PCORI_LOCK_BIAS && pcori_asym_local)
		test_bias_stale();
	test_bias_contended();
	if (PCORI_LOCK_BIAS)
		test_tokens_reused();
	/*
	 * Again with the fences membarrier saves (the kernel may refuse it):
	 * both sides then fence for real.  No thread runs while we switch.
	 */
	pcori_fence_choose(false);
	test_lock();
	test_lock_sleeper();
	test_lock_hogged();
	test_bias(false);
	test_bias_contended();
	pcori_fence_choose(true);
	test_wait_timeouts();
	test_wake();
	test_fence_switch();
	return 0;
}
