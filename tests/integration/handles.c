/*
 * handles -- handle misuse through the public API: testing twice,
 * released, stale, random, zero and negative handles, bad modes, timed
 * waits; and two threads testing one handle, of which exactly one gets
 * the status while the other gets PCOR_ERR_BADHANDLE and returns,
 * however soon the handle's slot is used again.  And PCOR_MAX_HANDLES
 * operations can be in progress however many threads have come by.
 *
 * PCOR_SPIN_NS=0 makes every blocking test sleep at once, so the
 * wake-up paths are the ones exercised.
 */
#include "../common.h"

#include <limits.h>

static int me;

static pcor_handle_t post_self(int tag, void *buf, size_t cap)
{
	pcor_handle_t h = 0;
	CHECK_OK(pcor_recv_copy(0, me, tag, buf, cap, NULL, &h));
	CHECK(h > 0);
	return h;
}

static void send_self(int tag, const void *buf, size_t len)
{
	pcor_handle_t h = 0;
	CHECK_OK(pcor_send_copy(0, me, tag, buf, len, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void send_msg(int thid, int tag)
{
	pcor_handle_t h = 0;
	CHECK_OK(pcor_send_copy(0, thid, tag, "ok", 3, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void test_misuse(void)
{
	char b[16];
	/* Testing twice, or after release. */
	pcor_handle_t h = post_self(1, b, sizeof(b));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	/* A bad mode is refused and leaves the handle alone. */
	CHECK_RC(pcor_handle_test(h, 2), PCOR_ERR_INVAL);
	CHECK_RC(pcor_handle_test(h, -1), PCOR_ERR_INVAL);
	CHECK_RC(testHandle(h, 3), PCOR_ERR_INVAL);
	/* A timed wait gives up and leaves it alone too. */
	uint64_t t0 = th_now_ns();
	CHECK_RC(pcor_handle_wait(h, 5 * 1000000), PCOR_ERR_TIMEDOUT);
	CHECK(th_now_ns() - t0 >= 5 * 1000000);
	CHECK_RC(pcor_handle_wait(h, 0), PCOR_ERR_TIMEDOUT);
	send_self(1, "hello", 6);
	CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
	CHECK(!strcmp(b, "hello"));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_wait(h, -1), PCOR_ERR_BADHANDLE);
	CHECK_RC(testHandle(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);

	/* A stale handle stays dead while its slot serves others, and
	 * testing it does not disturb them.  (Generations repeat after 1023
	 * reuses of one slot, by design: stay below that.) */
	pcor_handle_t stale = h;
	for (int i = 0; i < 1000; i++) {
		pcor_handle_t x = post_self(2, b, sizeof(b));
		CHECK(x != stale);
		CHECK_RC(pcor_handle_test(stale, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_RC(pcor_handle_test(stale, PCOR_BLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_RC(pcor_handle_test(x, PCOR_NONBLOCK), PCOR_INPROGRESS);
		send_self(2, &i, sizeof(i));
		CHECK_OK(pcor_handle_wait(x, -1));
		int got;
		memcpy(&got, b, sizeof(got));
		CHECK(got == i);
	}

	/* Values that never were handles, while one real handle is live. */
	pcor_handle_t live = post_self(3, b, sizeof(b));
	const pcor_handle_t bad[] = {0, -1, -2, INT_MIN, INT_MAX, 1, 2};
	for (size_t i = 0; i < TH_LEN(bad); i++) {
		if (bad[i] == live)
			continue;
		CHECK_RC(pcor_handle_test(bad[i], PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_RC(pcor_handle_test(bad[i], PCOR_BLOCK),
			 PCOR_ERR_BADHANDLE);
		CHECK_RC(pcor_handle_wait(bad[i], 1000), PCOR_ERR_BADHANDLE);
		CHECK_RC(testHandle(bad[i], PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	}
	uint64_t rs = 99;
	for (int i = 0; i < 200000; i++) {
		pcor_handle_t r = (pcor_handle_t)(uint32_t)th_rand(&rs);
		if (r == live)
			continue;
		CHECK_RC(pcor_handle_test(r, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
	}
	/* All that left the live one alone. */
	CHECK_RC(pcor_handle_test(live, PCOR_NONBLOCK), PCOR_INPROGRESS);
	send_self(3, "z", 2);
	CHECK_OK(pcor_handle_test(live, PCOR_BLOCK));
	CHECK(!strcmp(b, "z"));
}

/* ---- two threads, one handle ---- */

#define ROUNDS 1000
#define TAG_RACE 10
#define TAG_HOLD 11

static struct {
	pthread_barrier_t go, done, release;
	pcor_handle_t h;     /* the handle both test */
	bool blocking;       /* this round: BLOCK (timed) or NONBLOCK polls */
	int rc[2];           /* what each tester got */
	int thid[2];
} R;

static void *tester(void *arg)
{
	int k = (int)(intptr_t)arg;
	char hold[4];
	for (int round = 0; round < ROUNDS; round++) {
		th_barrier_wait(&R.go);
		int rc;
		if (R.blocking) {
			/* A bound instead of forever: a lost wake-up shows
			 * as PCOR_ERR_TIMEDOUT, not as a hung test. */
			rc = pcor_handle_wait(R.h, 20ll * 1000000000);
		} else {
			uint64_t deadline = th_now_ns() + 20ull * 1000000000;
			while ((rc = pcor_handle_test(R.h, PCOR_NONBLOCK)) ==
			       PCOR_INPROGRESS) {
				CHECK(th_now_ns() < deadline);
				sched_yield();
			}
		}
		pcor_handle_t held = 0;
		if (rc == PCOR_OK) {
			/* The winner takes a handle again at once: likely the
			 * slot just released, which the loser may still be
			 * looking at.  It completes only after both report. */
			CHECK_OK(pcor_recv_copy(0, R.thid[0], TAG_HOLD, hold,
						sizeof(hold), NULL, &held));
		}
		R.rc[k] = rc;
		th_barrier_wait(&R.done);
		th_barrier_wait(&R.release);
		if (held)
			CHECK_OK(pcor_handle_test(held, PCOR_BLOCK));
	}
	return NULL;
}

static void test_two_testers(void)
{
	th_barrier_init(&R.go, 3);
	th_barrier_init(&R.done, 3);
	th_barrier_init(&R.release, 3);
	R.thid[0] = me;
	int t[2];
	for (int k = 0; k < 2; k++)
		CHECK_OK(pcor_thread_create(tester, (void *)(intptr_t)k, &t[k]));
	char buf[8];
	int counts[2] = {0};
	for (int round = 0; round < ROUNDS; round++) {
		R.blocking = round & 1;
		R.h = post_self(TAG_RACE, buf, sizeof(buf));
		R.rc[0] = R.rc[1] = -999;
		th_barrier_wait(&R.go);
		send_self(TAG_RACE, &round, sizeof(round));
		th_barrier_wait(&R.done);
		/* Exactly one saw the completion; the other was told the
		 * handle is gone. */
		int ok = (R.rc[0] == PCOR_OK) + (R.rc[1] == PCOR_OK);
		int bad = (R.rc[0] == PCOR_ERR_BADHANDLE) +
			  (R.rc[1] == PCOR_ERR_BADHANDLE);
		if (ok != 1 || bad != 1)
			fprintf(stderr, "round %d (%s): %s / %s\n", round,
				R.blocking ? "block" : "poll",
				pcor_status_name(R.rc[0]),
				pcor_status_name(R.rc[1]));
		CHECK(ok == 1 && bad == 1);
		counts[R.rc[1] == PCOR_OK]++;
		int got;
		memcpy(&got, buf, sizeof(got));
		CHECK(got == round);
		CHECK_RC(pcor_handle_test(R.h, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
		/* Let the winner's extra receive complete. */
		int winner = R.rc[0] == PCOR_OK ? t[0] : t[1];
		pcor_handle_t sh;
		CHECK_OK(pcor_send_copy(0, winner, TAG_HOLD, "ok", 3, &sh));
		CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
		th_barrier_wait(&R.release);
	}
	for (int k = 0; k < 2; k++)
		CHECK_OK(pcor_thread_join(t[k], NULL));
	pthread_barrier_destroy(&R.go);
	pthread_barrier_destroy(&R.done);
	pthread_barrier_destroy(&R.release);
	printf("wins: tester 0 %d, tester 1 %d\n", counts[0], counts[1]);
}

/* ---- capacity with many threads about ---- */

#define MAX_HANDLES 1024
#define NBUSY 300

static pthread_barrier_t cap_bar;

static void *busy(void *arg)
{
	(void)arg;
	/* Use a few handles, then keep running with its cache of free slots. */
	int self = pcor_self_thid();
	for (int i = 0; i < 3; i++) {
		char b[4];
		pcor_handle_t rh;
		CHECK_OK(pcor_recv_copy(0, self, 1, b, sizeof(b), NULL, &rh));
		send_msg(self, 1);
		CHECK_OK(pcor_handle_test(rh, PCOR_BLOCK));
	}
	th_barrier_wait(&cap_bar);
	th_barrier_wait(&cap_bar);
	return NULL;
}

static void test_capacity(void)
{
	th_barrier_init(&cap_bar, NBUSY + 1);
	static int t[NBUSY];
	for (int i = 0; i < NBUSY; i++)
		CHECK_OK(pcor_thread_create(busy, NULL, &t[i]));
	th_barrier_wait(&cap_bar);
	/* Nothing is in progress: MAX_HANDLES receives must fit. */
	static pcor_handle_t h[MAX_HANDLES];
	char b[4];
	int n = 0, rc = PCOR_OK;
	while (n < MAX_HANDLES &&
	       (rc = pcor_recv_copy(0, me, 2, b, sizeof(b), NULL, &h[n])) ==
		       PCOR_OK)
		n++;
	if (n < MAX_HANDLES)
		fprintf(stderr, "receive %d of %d: %s\n", n + 1, MAX_HANDLES,
			pcor_status_name(rc));
	CHECK(n == MAX_HANDLES);
	/* Leaving cancels them all; come back for the rest of the test. */
	CHECK_OK(pcor_thread_detach());
	for (int i = 0; i < n; i++)
		CHECK_RC(pcor_handle_test(h[i], PCOR_NONBLOCK),
			 PCOR_ERR_CANCELED);
	int again;
	CHECK_OK(pcor_thread_attach(&again));
	CHECK(again == me);
	th_barrier_wait(&cap_bar);
	for (int i = 0; i < NBUSY; i++)
		CHECK_OK(pcor_thread_join(t[i], NULL));
	pthread_barrier_destroy(&cap_bar);
}

int main(void)
{
	CHECK(setenv("PCOR_SPIN_NS", "0", 1) == 0);
	char v[16];
	snprintf(v, sizeof(v), "%d", MAX_HANDLES);
	CHECK(setenv("PCOR_MAX_HANDLES", v, 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	test_misuse();
	test_two_testers();
	test_capacity();
	CHECK_OK(pcor_finalize());
	return 0;
}
