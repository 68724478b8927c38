/*
 * mcb -- the fixed-capacity MCB pool: exhaustion, distinct slots,
 * concurrent alloc/free without loss or duplication, and the
 * back-pressure wait (woken by a free, or timing out).
 */
#include "frag/frag.h"

#include "../common.h"

#include <sys/syscall.h>
#include <unistd.h>

#define CAP 64

static void test_exhaustion(void)
{
	pcori_mcb_pool_t p;
	CHECK_OK(pcori_mcb_pool_init(&p, CAP));
	CHECK(pcori_mcb_pool_avail(&p) == CAP);
	pcori_mcb_t *got[CAP];
	bool seen[CAP] = {false};
	for (int i = 0; i < CAP; i++) {
		got[i] = pcori_mcb_alloc(&p);
		CHECK(got[i] != NULL);
		/* Inside the pool, and no slot handed out twice. */
		CHECK(got[i] >= p.mcbs && got[i] < p.mcbs + CAP);
		size_t slot = (size_t)(got[i] - p.mcbs);
		CHECK(got[i]->index == slot);
		CHECK(!seen[slot]);
		seen[slot] = true;
		CHECK(pcori_mcb_pool_avail(&p) == (uint32_t)(CAP - i - 1));
	}
	CHECK(pcori_mcb_alloc(&p) == NULL);
	CHECK(pcori_mcb_alloc(&p) == NULL);

	/* A freed MCB comes back cleared, and is the only one available. */
	got[5]->flags = 0xff;
	got[5]->data = got[5];
	got[5]->size = 12345;
	got[5]->seq = 99;
	got[5]->sreq = (pcori_req_t *)got[5];
	pcori_mcb_free(&p, got[5]);
	CHECK(pcori_mcb_pool_avail(&p) == 1);
	pcori_mcb_t *m = pcori_mcb_alloc(&p);
	CHECK(m == got[5]);
	CHECK(m->flags == 0 && m->data == NULL && m->size == 0 &&
	      m->seq == 0 && m->sreq == NULL);
	CHECK(pcori_list_empty(&m->arrival) && pcori_list_empty(&m->chain));
	CHECK(pcori_mcb_alloc(&p) == NULL);

	for (int i = 0; i < CAP; i++)
		pcori_mcb_free(&p, got[i]);
	CHECK(pcori_mcb_pool_avail(&p) == CAP);
	/* All of them again, all distinct. */
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < CAP; i++) {
		got[i] = pcori_mcb_alloc(&p);
		CHECK(got[i] != NULL);
		CHECK(!seen[got[i]->index]);
		seen[got[i]->index] = true;
	}
	CHECK(pcori_mcb_alloc(&p) == NULL);
	pcori_mcb_pool_fini(&p);

	/* A pool of nothing is always empty. */
	CHECK_OK(pcori_mcb_pool_init(&p, 0));
	CHECK(pcori_mcb_alloc(&p) == NULL);
	pcori_mcb_pool_fini(&p);
}

/* ---- concurrent alloc/free ---- */

#define NTHREADS 4
#define ROUNDS 200000

static struct {
	pcori_mcb_pool_t pool;
	_Atomic int owner[CAP]; /* 0 free, else thread number + 1 */
	pthread_barrier_t start;
} cc;

static void *churn(void *arg)
{
	int me = (int)(intptr_t)arg + 1;
	uint64_t rs = (uint64_t)me * 7919;
	pcori_mcb_t *held[CAP];
	int nheld = 0;
	th_barrier_wait(&cc.start);
	for (int i = 0; i < ROUNDS; i++) {
		/* Hold a random handful, so the pool runs dry now and then. */
		if (nheld < CAP && (th_rand(&rs) & 1)) {
			pcori_mcb_t *m = pcori_mcb_alloc(&cc.pool);
			if (!m)
				continue;
			int expect = 0;
			/* Nobody else may hold this slot. */
			CHECK(atomic_compare_exchange_strong(
				&cc.owner[m->index], &expect, me));
			m->seq = (uint32_t)me;
			held[nheld++] = m;
		} else if (nheld) {
			int k = (int)(th_rand(&rs) % (uint64_t)nheld);
			pcori_mcb_t *m = held[k];
			held[k] = held[--nheld];
			CHECK(m->seq == (uint32_t)me);
			int expect = me;
			CHECK(atomic_compare_exchange_strong(
				&cc.owner[m->index], &expect, 0));
			pcori_mcb_free(&cc.pool, m);
		}
	}
	while (nheld) {
		pcori_mcb_t *m = held[--nheld];
		atomic_store(&cc.owner[m->index], 0);
		pcori_mcb_free(&cc.pool, m);
	}
	return NULL;
}

static void test_concurrent(void)
{
	CHECK_OK(pcori_mcb_pool_init(&cc.pool, CAP));
	th_barrier_init(&cc.start, NTHREADS);
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		th_thread_start(&t[i], churn, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		th_thread_join(t[i]);
	pthread_barrier_destroy(&cc.start);
	/* Nothing lost: every slot can be taken once more, and only once. */
	CHECK(pcori_mcb_pool_avail(&cc.pool) == CAP);
	bool seen[CAP] = {false};
	for (int i = 0; i < CAP; i++) {
		pcori_mcb_t *m = pcori_mcb_alloc(&cc.pool);
		CHECK(m != NULL);
		CHECK(!seen[m->index]);
		seen[m->index] = true;
	}
	CHECK(pcori_mcb_alloc(&cc.pool) == NULL);
	pcori_mcb_pool_fini(&cc.pool);
}

/* ---- back-pressure wait ---- */

static struct {
	pcori_mcb_pool_t pool;
	pcori_mcb_t *got;
	int sleep_rc;
	_Atomic int registered;
	_Atomic pid_t tid;
} bw;

/* The documented waiting pattern, with a generous bound. */
static void *waiter(void *arg)
{
	(void)arg;
	atomic_store(&bw.tid, (pid_t)syscall(SYS_gettid));
	uint32_t e = pcori_mcb_pool_wait_begin(&bw.pool);
	atomic_store(&bw.registered, 1);
	uint64_t deadline = th_now_ns() + 30ull * 1000000000u;
	bw.sleep_rc = PCOR_OK;
	while (!(bw.got = pcori_mcb_alloc(&bw.pool))) {
		uint64_t now = th_now_ns();
		if (now >= deadline) {
			bw.sleep_rc = PCOR_ERR_TIMEDOUT;
			break;
		}
		int rc = pcori_mcb_pool_sleep(&bw.pool, &e,
					      (int64_t)(deadline - now));
		if (rc != PCOR_OK)
			bw.sleep_rc = rc;
	}
	pcori_mcb_pool_wait_end(&bw.pool);
	return NULL;
}

static void test_wait(void)
{
	CHECK_OK(pcori_mcb_pool_init(&bw.pool, 16));
	pcori_mcb_t *all[16];
	for (int i = 0; i < 16; i++)
		CHECK((all[i] = pcori_mcb_alloc(&bw.pool)) != NULL);

	/* Nobody frees: the sleep times out after the time asked. */
	uint32_t e = pcori_mcb_pool_wait_begin(&bw.pool);
	CHECK(pcori_mcb_alloc(&bw.pool) == NULL);
	uint64_t t0 = th_now_ns();
	CHECK_RC(pcori_mcb_pool_sleep(&bw.pool, &e, 20 * 1000000),
		 PCOR_ERR_TIMEDOUT);
	CHECK(th_now_ns() - t0 >= 20 * 1000000);
	pcori_mcb_pool_wait_end(&bw.pool);
	CHECK(atomic_load(&bw.pool.waiters) == 0);

	/* A free while nobody waits costs no wake-up. */
	uint32_t epoch = atomic_load(&bw.pool.epoch);
	pcori_mcb_free(&bw.pool, all[15]);
	CHECK(atomic_load(&bw.pool.epoch) == epoch);
	CHECK((all[15] = pcori_mcb_alloc(&bw.pool)) != NULL);

	/* A free after the waiter registered must reach it, whether it is
	 * still trying or already asleep. */
	for (int round = 0; round < 50; round++) {
		atomic_store(&bw.registered, 0);
		bw.got = NULL;
		pthread_t t;
		th_thread_start(&t, waiter, NULL);
		for (long spins = 0; !atomic_load(&bw.registered); spins++) {
			CHECK(spins < 100000000);
			sched_yield();
		}
		/* Every other round, free only once it sleeps in the kernel. */
		if (round & 1)
			th_wait_thread_sleeping(atomic_load(&bw.tid));
		pcori_mcb_free(&bw.pool, all[round % 16]);
		th_thread_join(t);
		CHECK_OK(bw.sleep_rc);
		CHECK(bw.got == all[round % 16]);
	}
	CHECK(pcori_mcb_pool_avail(&bw.pool) == 0);
	pcori_mcb_pool_fini(&bw.pool);
}

int main(void)
{
	test_exhaustion();
	test_concurrent();
	test_wait();
	return 0;
}
