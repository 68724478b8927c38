/*
 * handle -- the request table behind handles: lifecycle, stale handles
 * after slot reuse, released and invalid values, capacity, that free
 * slots cached by threads come back when the threads go, that a
 * completion reaches a waiter asleep on its request (with membarrier and
 * with plain fences), that a release or token test by the thread that
 * made the handle (a load and a store) still has exactly one winner when
 * another thread tests the same handle, before and after that thread's
 * handles are marked shared, and how long a waiter spins given its
 * recent waits.
 */
#include "api/ctx.h"
#include "core/core.h"

#include "../common.h"

#include <sys/syscall.h>
#include <unistd.h>

#define MAX_HANDLES 1024

/* A pending request of a kind that reports nothing (a send). */
static pcori_req_t *req_new(void)
{
	pcori_req_t *r = pcori_req_alloc();
	CHECK(r != NULL);
	r->kind = PCORI_REQ_SEND_COPY;
	return r;
}

static void test_lifecycle(void)
{
	size_t live0 = pcori_htable_live();
	pcori_req_t *r = req_new();
	CHECK(pcori_htable_live() == live0 + 1);
	pcor_handle_t h = pcori_req_handle(r);
	CHECK(h > 0);
	CHECK(pcori_req_lookup(h, NULL) == r);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_RC(pcor_handle_wait(h, 1000000), PCOR_ERR_TIMEDOUT);
	CHECK_RC(pcor_handle_wait(h, 0), PCOR_ERR_TIMEDOUT);
	CHECK_RC(pcor_handle_test(h, 2), PCOR_ERR_INVAL);
	CHECK_RC(pcor_handle_test(h, -1), PCOR_ERR_INVAL);
	/* None of that released it. */
	CHECK(pcori_req_lookup(h, NULL) == r);
	CHECK(pcori_htable_live() == live0 + 1);
	/* The operation's status comes back once, then the handle is gone. */
	pcori_req_complete(r, PCOR_ERR_TRUNCATE);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_TRUNCATE);
	CHECK(pcori_htable_live() == live0);
	CHECK(pcori_req_lookup(h, NULL) == NULL);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_wait(h, 1000), PCOR_ERR_BADHANDLE);

	/* BLOCK and wait on a completed request give its status at once. */
	r = req_new();
	h = pcori_req_handle(r);
	pcori_req_complete(r, PCOR_OK);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_OK);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	r = req_new();
	h = pcori_req_handle(r);
	pcori_req_complete(r, PCOR_ERR_CANCELED);
	CHECK_RC(pcor_handle_wait(h, -1), PCOR_ERR_CANCELED);
	CHECK_RC(pcor_handle_wait(h, -1), PCOR_ERR_BADHANDLE);

	/* A request whose handle never reached a user goes back quietly. */
	r = req_new();
	h = pcori_req_handle(r);
	pcori_req_free(r);
	CHECK(pcori_req_lookup(h, NULL) == NULL);
	CHECK(pcori_htable_live() == live0);
}

/* An old handle stays dead however often its slot is reused. */
static void test_stale(void)
{
	pcori_req_t *r = req_new();
	pcor_handle_t h0 = pcori_req_handle(r);
	uint32_t slot = r->index;
	pcori_req_complete(r, PCOR_OK);
	CHECK_OK(pcor_handle_test(h0, PCOR_NONBLOCK));
	int reused = 0;
	/* The generation field has 1023 values: all but h0's are fresh. */
	static pcor_handle_t seen[1022];
	for (int i = 0; i < 1022; i++) {
		r = req_new();
		pcor_handle_t h = pcori_req_handle(r);
		CHECK(h > 0 && h != h0);
		if (r->index == slot) {
			for (int j = 0; j < reused; j++)
				CHECK(seen[j] != h);
			seen[reused++] = h;
		}
		CHECK(pcori_req_lookup(h0, NULL) == NULL);
		CHECK_RC(pcor_handle_test(h0, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		/* Testing the stale handle did not disturb the live one. */
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
		pcori_req_complete(r, PCOR_OK);
		CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
	}
	/* The test means something only if the slot came back. */
	CHECK(reused > 500);
}

static void *token_fn(void *arg)
{
	/* Not a pcor thread: no token of its own, but it may test ours. */
	pcor_handle_t *h = arg;
	CHECK(pcori_req_done_handle() == 0);
	CHECK_OK(pcor_handle_test(*h, PCOR_NONBLOCK));
	return NULL;
}

/* Done tokens: the handles of sends complete inside their call. */
static void test_tokens(void)
{
	size_t live0 = pcori_htable_live();
	pcor_handle_t h = pcori_req_done_handle();
	CHECK(h > 0 && pcori_req_is_token(h));
	CHECK(pcori_req_lookup(h, NULL) == NULL);
	CHECK(pcori_htable_live() == live0); /* no slot taken */
	/* Its status once, whichever test; then it is gone. */
	CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_wait(h, 1000), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcori_ctx_cancel(h), PCOR_ERR_BADHANDLE);
	h = pcori_req_done_handle();
	CHECK_RC(pcor_handle_test(h, 7), PCOR_ERR_INVAL);
	CHECK(pcori_ctx_cancel(h) == 0); /* complete: nothing to cancel */
	CHECK_OK(pcor_handle_wait(h, -1));
	CHECK_RC(pcor_handle_wait(h, -1), PCOR_ERR_BADHANDLE);
	/* One that never reached a user is not live. */
	h = pcori_req_done_handle();
	pcori_req_done_undo(h);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);

	/* Untested tokens hold their words: all in use gives 0. */
	enum { N = 64 };
	pcor_handle_t held[N];
	int got = 0;
	for (int i = 0; i < 2 * N; i++) {
		pcor_handle_t t = pcori_req_done_handle();
		if (!t)
			continue;
		for (int j = 0; j < got; j++)
			CHECK(held[j] != t);
		CHECK(got < N);
		held[got++] = t;
	}
	CHECK(got == N);
	for (int i = 0; i < N; i++)
		CHECK_OK(pcor_handle_test(held[i], PCOR_BLOCK));
	for (int i = 0; i < N; i++)
		CHECK_RC(pcor_handle_test(held[i], PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);

	/* A tested token stays dead while its word is reused. */
	pcor_handle_t h0 = pcori_req_done_handle();
	CHECK_OK(pcor_handle_test(h0, PCOR_NONBLOCK));
	for (int i = 0; i < 1000 * N; i++) {
		pcor_handle_t t = pcori_req_done_handle();
		CHECK(t > 0 && t != h0);
		CHECK_RC(pcor_handle_test(h0, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_OK(pcor_handle_test(t, PCOR_NONBLOCK));
	}

	/* Any thread may test it. */
	h = pcori_req_done_handle();
	pthread_t t;
	th_thread_start(&t, token_fn, &h);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	CHECK(pcori_htable_live() == live0);
}

static void test_invalid(void)
{
	CHECK(pcori_htable_live() == 0);
	const pcor_handle_t bad[] = {0, -1, -2, INT_MIN, INT_MAX, 1,
				     (1 << 20) - 1, (5 << 20) | 3};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(bad); i++) {
		CHECK(pcori_req_lookup(bad[i], NULL) == NULL);
		CHECK_RC(pcor_handle_test(bad[i], PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_RC(pcor_handle_test(bad[i], PCOR_BLOCK),
			 PCOR_ERR_BADHANDLE);
	}
	/* With nothing live, no value at all names a request. */
	uint64_t rs = 12345;
	for (int i = 0; i < 100000; i++) {
		pcor_handle_t h = (pcor_handle_t)(uint32_t)th_rand(&rs);
		CHECK(pcori_req_lookup(h, NULL) == NULL);
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
	}
}

/* Allocate until the table is full; returns how many, all released. */
static size_t fill_count(bool check_api)
{
	size_t cap = 1u << 21, n = 0;
	pcori_req_t **rs = malloc(sizeof(*rs) * cap);
	CHECK(rs != NULL);
	while (n < cap && (rs[n] = pcori_req_alloc()) != NULL) {
		rs[n]->kind = PCORI_REQ_SEND_COPY;
		n++;
	}
	CHECK(n < cap);
	CHECK(pcori_htable_live() == n);
	if (check_api) {
		/* A full table is back-pressure for the API, not a crash. */
		pcor_handle_t h = 0;
		char b = 0;
		CHECK_RC(pcor_send_copy(0, 0, 1, &b, 1, &h), PCOR_ERR_AGAIN);
		CHECK_RC(pcor_recv_copy(0, 0, 1, &b, 1, NULL, &h),
			 PCOR_ERR_AGAIN);
		CHECK(h == 0);
		/* Every handle distinct. */
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n && j < i + 64; j++)
				CHECK(pcori_req_handle(rs[i]) !=
				      pcori_req_handle(rs[j]));
		/* One free makes room for exactly one more. */
		pcor_handle_t h1 = pcori_req_handle(rs[n / 2]);
		pcori_req_complete(rs[n / 2], PCOR_OK);
		CHECK_OK(pcor_handle_test(h1, PCOR_NONBLOCK));
		CHECK((rs[n / 2] = pcori_req_alloc()) != NULL);
		rs[n / 2]->kind = PCORI_REQ_SEND_COPY;
		CHECK(pcori_req_alloc() == NULL);
	}
	for (size_t i = 0; i < n; i++) {
		pcor_handle_t h = pcori_req_handle(rs[i]);
		pcori_req_complete(rs[i], PCOR_OK);
		CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
	}
	CHECK(pcori_htable_live() == 0);
	free(rs);
	return n;
}

/* Threads that take and release handles, then leave in each way. */
static void churn(void)
{
	for (int i = 0; i < 100; i++) {
		pcor_handle_t h[40];
		for (int j = 0; j < 40; j++) {
			pcori_req_t *r = req_new();
			h[j] = pcori_req_handle(r);
			pcori_req_complete(r, PCOR_OK);
		}
		for (int j = 0; j < 40; j++)
			CHECK_OK(pcor_handle_test(h[j], PCOR_NONBLOCK));
	}
}

static void *created_fn(void *arg)
{
	(void)arg;
	churn();
	return NULL;
}

static void *attached_fn(void *arg)
{
	int thid;
	CHECK_OK(pcor_thread_attach(&thid));
	churn();
	if (arg) /* else it exits attached: the registry detaches it */
		CHECK_OK(pcor_thread_detach());
	return NULL;
}

/* A non-pcor thread may test a handle too. */
static void *tester_fn(void *arg)
{
	pcor_handle_t h = (pcor_handle_t)(intptr_t)arg;
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	return NULL;
}

static void test_capacity(void)
{
	size_t cap = fill_count(true);
	CHECK(cap >= MAX_HANDLES);
	CHECK(fill_count(false) == cap);

	int t[8];
	for (int i = 0; i < 8; i++)
		CHECK_OK(pcor_thread_create(created_fn, NULL, &t[i]));
	for (int i = 0; i < 8; i++)
		CHECK_OK(pcor_thread_join(t[i], NULL));
	pthread_t pt[4];
	for (int i = 0; i < 4; i++)
		th_thread_start(&pt[i], attached_fn, (void *)(intptr_t)(i & 1));
	for (int i = 0; i < 4; i++)
		th_thread_join(pt[i]);
	/* No slot is stranded in a departed thread's cache. */
	CHECK(fill_count(false) == cap);

	pcori_req_t *r = req_new();
	pthread_t tt;
	th_thread_start(&tt, tester_fn,
			(void *)(intptr_t)pcori_req_handle(r));
	pcori_req_complete(r, PCOR_ERR_TRUNCATE);
	th_thread_join(tt);
	CHECK(pcori_htable_live() == 0);
}

/* ---- a completion reaches a sleeping waiter ---- */

static struct {
	pcor_handle_t h;
	_Atomic pid_t tid;
	int rc;
} sl;

static void *sleeper_fn(void *arg)
{
	(void)arg;
	atomic_store(&sl.tid, (pid_t)syscall(SYS_gettid));
	sl.rc = pcor_handle_wait(sl.h, 20ll * 1000000000);
	return NULL;
}

static void test_sleeper(void)
{
	for (int round = 0; round < 40; round++) {
		pcori_req_t *r = req_new();
		sl.h = pcori_req_handle(r);
		atomic_store(&sl.tid, 0);
		pthread_t t;
		th_thread_start(&t, sleeper_fn, NULL);
		/* It counts itself before its last look at the word. */
		for (long i = 0; atomic_load(&r->sleepers) == 0; i++) {
			CHECK(i < 100000000);
			sched_yield();
		}
		/* Every other round, complete only once it sleeps for real. */
		if (round & 1)
			th_wait_thread_sleeping(atomic_load(&sl.tid));
		pcori_req_complete(r, PCOR_ERR_TRUNCATE);
		th_thread_join(t);
		CHECK_RC(sl.rc, PCOR_ERR_TRUNCATE);
		CHECK(atomic_load(&r->sleepers) == 0);
	}
	CHECK(pcori_htable_live() == 0);
}

/*
 * Two threads test each handle at once: one gets its status and the
 * other PCOR_ERR_BADHANDLE.  The main thread made the handle, so its
 * test is the owner's load and store, paired with the other thread's
 * fenced CAS; once the other thread has claimed often enough, the main
 * thread's handles are shared and both sides take the CAS.  Tokens the
 * same way.
 */
#define RACES 400
static struct {
	_Atomic pcor_handle_t h; /* this round's handle; 0 between rounds */
	_Atomic int done;        /* rounds the helper finished */
	int rc[RACES];
} race;

static void *racer(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACES; i++) {
		pcor_handle_t h;
		for (long spin = 0; (h = atomic_load(&race.h)) == 0; spin++) {
			CHECK(spin < 100000000);
			if ((spin & 63) == 63)
				sched_yield();
		}
		race.rc[i] = pcor_handle_test(h, PCOR_NONBLOCK);
		atomic_store(&race.h, 0);
		atomic_store(&race.done, i + 1);
	}
	return NULL;
}

/* A completed handle of this thread's, slot or token, with status *want. */
static pcor_handle_t race_handle(int i, bool token, int *want)
{
	if (token) {
		*want = PCOR_OK;
		pcor_handle_t h = pcori_req_done_handle();
		CHECK(h > 0);
		return h;
	}
	/* Free slots come back LIFO: the same few slots, again and again. */
	pcori_req_t *r = req_new();
	*want = i & 1 ? PCOR_ERR_CANCELED : PCOR_ERR_TRUNCATE;
	pcori_req_complete(r, *want);
	return pcori_req_handle(r);
}

typedef struct {
	pcor_handle_t h;
	int want, rc;
} foreign_test_t;

static void *foreign_test_fn(void *arg)
{
	foreign_test_t *f = arg;
	f->rc = pcor_handle_test(f->h, PCOR_NONBLOCK);
	return NULL;
}

/* RACES rounds; returns how many the main thread won. */
static int race_rounds(bool token)
{
	atomic_store(&race.done, 0);
	pthread_t t;
	th_thread_start(&t, racer, NULL);
	int mine = 0;
	for (int i = 0; i < RACES; i++) {
		int want;
		pcor_handle_t h = race_handle(i, token, &want);
		atomic_store(&race.h, h);
		/*
		 * Let the other thread get ahead by 0-15 us, a round each:
		 * its claim takes a membarrier, so some of ours meet it
		 * half-way.
		 */
		uint64_t until = th_now_ns() + (uint64_t)(i % 16) * 1000;
		while (th_now_ns() < until)
			pcori_cpu_relax();
		int rc = pcor_handle_test(h, PCOR_NONBLOCK);
		for (long spin = 0; atomic_load(&race.done) <= i; spin++) {
			CHECK(spin < 100000000);
			sched_yield();
		}
		if (rc == want) {
			CHECK_RC(race.rc[i], PCOR_ERR_BADHANDLE);
			mine++;
		} else {
			CHECK_RC(rc, PCOR_ERR_BADHANDLE);
			CHECK_RC(race.rc[i], want);
		}
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
		if (!token)
			CHECK(pcori_req_lookup(h, NULL) == NULL);
	}
	th_thread_join(t);
	CHECK(pcori_htable_live() == 0);
	return mine;
}

static void test_racing_release(void)
{
	uint32_t me = (uint32_t)pcori_self_thid();
	/* Never shared: every round pairs the owner's way with a foreign. */
	pcori_claim_share_set(UINT32_MAX);
	for (int token = 0; token < 2; token++) {
		int mine = race_rounds(token);
		printf("unshared, %s fences: main won %d of %d (%s)\n",
		       pcori_asym_local ? "light" : "real", mine, RACES,
		       token ? "tokens" : "slots");
		CHECK(!pcori_claim_shared(me));
	}
	/* Ten tests by other threads mark the main thread's handles shared. */
	pcori_claim_share_set(10);
	for (int i = 0; i < 10; i++) {
		CHECK(!pcori_claim_shared(me));
		foreign_test_t f = {0};
		f.h = race_handle(i, i & 1, &f.want);
		pthread_t t;
		th_thread_start(&t, foreign_test_fn, &f);
		th_thread_join(t);
		CHECK_RC(f.rc, f.want);
		CHECK_RC(pcor_handle_test(f.h, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
	}
	CHECK(pcori_claim_shared(me));
	for (int token = 0; token < 2; token++) {
		int mine = race_rounds(token);
		printf("shared: main won %d of %d (%s)\n", mine, RACES,
		       token ? "tokens" : "slots");
		CHECK(pcori_claim_shared(me));
	}
	/* The main thread's own tests stay right when shared. */
	for (int i = 0; i < 100; i++) {
		int want;
		pcor_handle_t h = race_handle(i, i & 1, &want);
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), want);
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	}
	pcori_claim_share_set(64);
	CHECK(!pcori_claim_shared(me));
}

/*
 * The spin before a sleep follows the thread's recent waits: twice their
 * average while that is under half of PCORI_WAIT_SPIN_MAX_NS, else
 * PCOR_SPIN_NS; PCORI_WAIT_STALL_SPINS times PCOR_SPIN_NS (at most
 * PCORI_WAIT_SPIN_MAX_NS) while they are under a quarter of it; never a
 * spin when PCOR_SPIN_NS is 0.
 */
static void test_wait_spin(void)
{
	int64_t saved = pcori_rt.cfg.spin_ns;
	pcori_tls.wait_avg_ns = 0;
	for (int i = 0; i < 40; i++)
		pcori_wait_took(80000);
	CHECK(pcori_wait_spin() == 0); /* this test runs with PCOR_SPIN_NS=0 */
	pcori_rt.cfg.spin_ns = 20000;
	/* Waits of 80 us: the average converges, the spin is twice it. */
	CHECK(pcori_tls.wait_avg_ns > 79000 && pcori_tls.wait_avg_ns <= 80000);
	CHECK(pcori_wait_spin() == (int64_t)(2 * pcori_tls.wait_avg_ns));
	/* Long waits: sleep after the configured spin, as before. */
	for (int i = 0; i < 3; i++)
		pcori_wait_took(2000000);
	CHECK(pcori_tls.wait_avg_ns > PCORI_WAIT_SPIN_MAX_NS / 2);
	CHECK(pcori_wait_spin() == 20000);
	/* Short waits: never less than the configured spin. */
	for (int i = 0; i < 60; i++)
		pcori_wait_took(5000);
	CHECK(pcori_tls.wait_avg_ns >= 5000 && pcori_tls.wait_avg_ns < 6000);
	CHECK(pcori_wait_spin() == 20000);
	/* A steady exchange: waits of a microsecond spin through a stall. */
	for (int i = 0; i < 60; i++)
		pcori_wait_took(1000);
	CHECK(pcori_tls.wait_avg_ns >= 1000 && pcori_tls.wait_avg_ns < 1100);
	CHECK(pcori_wait_spin() == 20000 * PCORI_WAIT_STALL_SPINS);
	for (int i = 0; i < 60; i++)
		pcori_wait_took(0);
	CHECK(pcori_wait_spin() == 20000 * PCORI_WAIT_STALL_SPINS);
	/* ... scaled with the configured spin, and bounded. */
	pcori_rt.cfg.spin_ns = 1000;
	CHECK(pcori_wait_spin() == 1000 * PCORI_WAIT_STALL_SPINS);
	pcori_rt.cfg.spin_ns = 400000;
	CHECK(pcori_wait_spin() == (int64_t)PCORI_WAIT_SPIN_MAX_NS);
	pcori_rt.cfg.spin_ns = 2000000;
	CHECK(pcori_wait_spin() == 2000000);
	/* One long wait ends the exchange: twice the average again. */
	pcori_rt.cfg.spin_ns = 20000;
	pcori_wait_took(400000);
	CHECK(pcori_tls.wait_avg_ns >= 100000);
	CHECK(pcori_wait_spin() == (int64_t)(2 * pcori_tls.wait_avg_ns));
	pcori_rt.cfg.spin_ns = saved;
	pcori_tls.wait_avg_ns = 0;
}

int main(void)
{
	CHECK(setenv("PCOR_MAX_HANDLES", "1024", 1) == 0);
	/* Waiters go to sleep at once. */
	CHECK(setenv("PCOR_SPIN_NS", "0", 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	test_lifecycle();
	test_stale();
	test_tokens();
	test_invalid();
	test_capacity();
	test_wait_spin();
	/* With membarrier where the kernel allows (PCOR_SPIN_NS=0 chose
	 * real fences), then real fences; switched with no thread about. */
	pcori_fence_choose(true);
	test_sleeper();
	test_racing_release();
	pcori_fence_choose(false);
	test_sleeper();
	test_racing_release();
	CHECK_OK(pcor_finalize());
	return 0;
}
