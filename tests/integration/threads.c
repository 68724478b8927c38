/*
 * threads -- thread ids and their messages across attach, detach and
 * exit.  Detaching cancels the receives a thread posted (PCOR_ERR_CANCELED,
 * testable by any thread, outputs left alone); messages for an id not in
 * use wait for its next owner; an attached thread that exits without
 * detaching, or a created one that returns, is detached; ids run out
 * (PCOR_ERR_TOOMANY) and come back.  Runs with PCOR_MAX_THREADS=8.
 */
#include "../common.h"

#define MAX_THREADS 8
#define SENTINEL (-77)

static int me;
static pthread_barrier_t bar;

static void send_to(int thid, int tag, const char *s)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(0, thid, tag, s, strlen(s) + 1, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void recv_expect(int from, int tag, const char *s)
{
	char b[64];
	pcor_msginfo_t info;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, from, tag, b, sizeof(b), &info,
				&h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, s));
	CHECK(info.size == strlen(s) + 1);
}

/* ---- detach cancels posted receives ---- */

static struct {
	int thid;
	pcor_handle_t hc, hd, hp;   /* copy, DMA and paper-form receives */
	char buf[16];
	void *dbuf;
	pcor_msginfo_t ic, id;
	int apid, athid, atag, asize;
} D;

static void *detacher(void *arg)
{
	(void)arg;
	CHECK_OK(pcor_thread_attach(&D.thid));
	int again;
	CHECK_RC(pcor_thread_attach(&again), PCOR_ERR_BUSY);
	/* The message that waited for this id before anyone had it. */
	recv_expect(me, 1, "early");
	D.ic = D.id = (pcor_msginfo_t){SENTINEL, SENTINEL, SENTINEL, 99};
	D.dbuf = &D;
	D.apid = D.athid = D.atag = D.asize = SENTINEL;
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, 2, D.buf,
				sizeof(D.buf), &D.ic, &D.hc));
	CHECK_OK(pcor_recv_dma(0, me, PCOR_ANY_TAG, &D.dbuf, &D.id, &D.hd));
	D.hp = recvCopy(0, me, 3, D.buf, sizeof(D.buf), &D.apid, &D.athid,
			&D.atag, &D.asize);
	CHECK(D.hp > 0);
	CHECK_RC(pcor_handle_test(D.hc, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_thread_detach());
	CHECK_RC(pcor_thread_detach(), PCOR_ERR_NOTATTACHED);
	CHECK_RC(pcor_self_thid(), PCOR_ERR_NOTATTACHED);
	/* No longer a pcor thread, it may still test its handles. */
	CHECK_RC(pcor_handle_test(D.hc, PCOR_BLOCK), PCOR_ERR_CANCELED);
	return NULL;
}

static void test_detach(void)
{
	/* Id 1 is valid but unused: the message waits. */
	send_to(1, 1, "early");
	pthread_t t;
	th_thread_start(&t, detacher, NULL);
	th_thread_join(t);
	CHECK(D.thid == 1);
	CHECK_RC(pcor_handle_test(D.hc, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	CHECK_RC(pcor_handle_test(D.hd, PCOR_NONBLOCK), PCOR_ERR_CANCELED);
	CHECK_RC(testHandle(D.hp, PCOR_BLOCK), PCOR_ERR_CANCELED);
	/* A canceled receive got no message: it reports none. */
	CHECK(D.dbuf == &D);
	CHECK(D.ic.pid == SENTINEL && D.ic.thid == SENTINEL &&
	      D.ic.tag == SENTINEL && D.ic.size == 99);
	CHECK(D.id.pid == SENTINEL && D.id.size == 99);
	CHECK(D.apid == SENTINEL && D.athid == SENTINEL &&
	      D.atag == SENTINEL && D.asize == SENTINEL);

	/* Messages for the id, now unused, wait for its next owner. */
	send_to(D.thid, 2, "one");
	send_to(D.thid, 3, "two");
	send_to(D.thid, 2, "three");
}

static void *next_owner(void *arg)
{
	int *thid = arg;
	CHECK_OK(pcor_thread_attach(thid));
	recv_expect(me, PCOR_ANY_TAG, "one");
	recv_expect(me, PCOR_ANY_TAG, "two");
	recv_expect(me, PCOR_ANY_TAG, "three");
	CHECK_OK(pcor_thread_detach());
	return NULL;
}

static void test_next_owner(void)
{
	int thid = -1;
	pthread_t t;
	th_thread_start(&t, next_owner, &thid);
	th_thread_join(t);
	CHECK(thid == D.thid); /* the lowest free id */
}

/* ---- exit without detach ---- */

static pcor_handle_t exit_h;
static int exit_thid;

static void *exits_attached(void *arg)
{
	(void)arg;
	CHECK_OK(pcor_thread_attach(&exit_thid));
	char b[4];
	CHECK_OK(pcor_recv_copy(0, me, 5, b, sizeof(b), NULL, &exit_h));
	return NULL; /* no detach */
}

static void *returns_with_receive(void *arg)
{
	(void)arg;
	char *b = malloc(4);
	CHECK(b != NULL);
	/* Leaked on purpose only if the receive were not canceled. */
	CHECK_OK(pcor_recv_copy(0, me, 6, b, 4, NULL, &exit_h));
	th_barrier_wait(&bar);
	th_barrier_wait(&bar);
	return b;
}

static void test_exit(void)
{
	pthread_t t;
	th_thread_start(&t, exits_attached, NULL);
	th_thread_join(t);
	CHECK_RC(pcor_handle_test(exit_h, PCOR_BLOCK), PCOR_ERR_CANCELED);
	/* Its id is free again, and it holds nothing back from finalize
	 * (checked at the end of the test). */
	int thid = -1;
	th_thread_start(&t, next_owner, &thid);
	send_to(exit_thid, 2, "one");
	send_to(exit_thid, 2, "two");
	send_to(exit_thid, 2, "three");
	th_thread_join(t);
	CHECK(thid == exit_thid);

	/* A created thread that returns is detached likewise. */
	int ct;
	void *ret = NULL;
	CHECK_OK(pcor_thread_create(returns_with_receive, NULL, &ct));
	th_barrier_wait(&bar);
	CHECK_RC(pcor_handle_test(exit_h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	th_barrier_wait(&bar);
	CHECK_OK(pcor_thread_join(ct, &ret));
	CHECK_RC(pcor_handle_test(exit_h, PCOR_BLOCK), PCOR_ERR_CANCELED);
	free(ret);
}

/* ---- running out of ids ---- */

static void *holder(void *arg)
{
	int *got = arg;
	/* Mail sent to the id before the thread ran is here. */
	char b[16];
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, me, 7, b, sizeof(b), NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, "hello"));
	*got = pcor_self_thid();
	th_barrier_wait(&bar);
	/* Hold the id until told to go. */
	recv_expect(me, 8, "bye");
	return NULL;
}

static void *try_attach(void *arg)
{
	int *rc = arg;
	int thid = SENTINEL;
	*rc = pcor_thread_attach(&thid);
	if (*rc == PCOR_OK)
		CHECK_OK(pcor_thread_detach());
	else
		CHECK(thid == SENTINEL);
	return NULL;
}

static void test_toomany(void)
{
	CHECK(pcor_max_threads() == MAX_THREADS);
	int thids[MAX_THREADS - 1], got[MAX_THREADS - 1];
	pthread_barrier_destroy(&bar);
	th_barrier_init(&bar, MAX_THREADS);
	for (int i = 0; i < MAX_THREADS - 1; i++) {
		CHECK_OK(pcor_thread_create(holder, &got[i], &thids[i]));
		send_to(thids[i], 7, "hello");
	}
	th_barrier_wait(&bar);
	for (int i = 0; i < MAX_THREADS - 1; i++) {
		CHECK(got[i] == thids[i]);
		CHECK(thids[i] > 0 && thids[i] < MAX_THREADS);
		for (int j = 0; j < i; j++)
			CHECK(thids[i] != thids[j]);
	}
	/* Every id is taken. */
	int t = SENTINEL;
	CHECK_RC(pcor_thread_create(holder, NULL, &t), PCOR_ERR_TOOMANY);
	CHECK(t == SENTINEL);
	int rc = 0;
	pthread_t pt;
	th_thread_start(&pt, try_attach, &rc);
	th_thread_join(pt);
	CHECK_RC(rc, PCOR_ERR_TOOMANY);
	/* One goes; its id serves again once joined. */
	send_to(thids[3], 8, "bye");
	CHECK_OK(pcor_thread_join(thids[3], NULL));
	th_thread_start(&pt, try_attach, &rc);
	th_thread_join(pt);
	CHECK_OK(rc);
	for (int i = 0; i < MAX_THREADS - 1; i++) {
		if (i == 3)
			continue;
		send_to(thids[i], 8, "bye");
		CHECK_OK(pcor_thread_join(thids[i], NULL));
	}
	pthread_barrier_destroy(&bar);
	th_barrier_init(&bar, 2);
}

/* A created thread may detach itself; it is still joined once. */
static void *self_detacher(void *arg)
{
	(void)arg;
	CHECK_OK(pcor_thread_detach());
	int thid;
	CHECK_OK(pcor_thread_attach(&thid)); /* and come back as another */
	CHECK_OK(pcor_thread_detach());
	return arg;
}

static void test_self_detach(void)
{
	int t;
	void *ret = NULL;
	CHECK_OK(pcor_thread_create(self_detacher, &t, &t));
	CHECK_OK(pcor_thread_join(t, &ret));
	CHECK(ret == &t);
	CHECK_RC(pcor_thread_join(t, NULL), PCOR_ERR_BADTHID);
}

static void *holder_of_mail(void *arg)
{
	(void)arg;
	th_barrier_wait(&bar);
	send_to(0, 9, "for id 0");
	th_barrier_wait(&bar);
	return NULL;
}

/* The main thread is a pcor thread like any other: it may leave and
 * come back, and mail for its id waits meanwhile. */
static void test_main_detach(void)
{
	int other;
	CHECK_OK(pcor_thread_create(holder_of_mail, NULL, &other));
	CHECK_OK(pcor_thread_detach());
	CHECK_RC(pcor_self_thid(), PCOR_ERR_NOTATTACHED);
	th_barrier_wait(&bar); /* it may send to id 0 now */
	th_barrier_wait(&bar); /* it has */
	int t = SENTINEL;
	CHECK_OK(pcor_thread_attach(&t));
	CHECK(t == me); /* the lowest free id is its old one */
	recv_expect(other, 9, "for id 0");
	CHECK_OK(pcor_thread_join(other, NULL));
}

int main(void)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", MAX_THREADS);
	CHECK(setenv("PCOR_MAX_THREADS", v, 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	CHECK(me == 0);
	th_barrier_init(&bar, 2);
	test_detach();
	test_next_owner();
	test_exit();
	test_toomany();
	test_self_detach();
	test_main_detach();
	pthread_barrier_destroy(&bar);
	/* Every thread is gone or detached: finalize is not BUSY. */
	CHECK_OK(pcor_finalize());
	return 0;
}
