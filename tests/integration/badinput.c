/*
 * badinput -- every call refuses bad input with its own status and
 * writes no output when it does: before pcor_init (NOTINIT), after
 * pcor_finalize (FINALIZED), from a thread that is no pcor thread
 * (NOTATTACHED), invalid pids, thread ids, tags, sizes, buffers, flags and
 * DMA memory; pcor_init twice (BUSY); pcor_finalize while other threads
 * are attached (BUSY, and nothing released).
 */
#include "../common.h"

#include <limits.h>
#include <stdint.h>

#define SENTINEL 0x5eed

static void *create_fn(void *arg)
{
	return arg;
}

/* Every call of the API, expected to fail with st before any side
 * effect.  Strings and status names stay usable all the time. */
static void all_calls_fail(int st)
{
	pcor_handle_t h = SENTINEL;
	char b[8] = "abc";
	void *p = &h;
	size_t sz = 77;
	int thid = SENTINEL;
	pcor_msginfo_t info = {1, 2, 3, 4};

	CHECK_RC(pcor_self_pid(), st);
	CHECK_RC(pcor_self_thid(), st);
	CHECK_RC(pcor_nprocs(), st);
	CHECK_RC(pcor_max_threads(), st);
	CHECK_RC(pcor_send_copy(0, 0, 0, b, 1, &h), st);
	CHECK_RC(pcor_send_dma(0, 0, 0, b, 1, 0, &h), st);
	CHECK_RC(pcor_recv_copy(0, 0, 0, b, 1, &info, &h), st);
	CHECK_RC(pcor_recv_dma(0, 0, 0, &p, &info, &h), st);
	CHECK_RC(pcor_handle_test(1, PCOR_NONBLOCK), st);
	CHECK_RC(pcor_handle_test(1, PCOR_BLOCK), st);
	CHECK_RC(pcor_handle_test(1, 7), st);
	CHECK_RC(pcor_handle_wait(1, 0), st);
	CHECK_RC(pcor_dma_alloc(10, &p), st);
	CHECK_RC(pcor_dma_free(b), st);
	CHECK_RC(pcor_dma_free(NULL), st);
	CHECK_RC(pcor_dma_size(b, &sz), st);
	CHECK_RC(pcor_thread_attach(&thid), st);
	CHECK_RC(pcor_thread_create(create_fn, NULL, &thid), st);
	CHECK_RC(pcor_thread_detach(), st);
	CHECK_RC(pcor_thread_join(1, NULL), st);
	CHECK_RC(pcor_finalize(), st);
	CHECK_RC(sendCopy(0, 0, 0, b, 1), st);
	CHECK_RC(sendCopy(0, 0, 0, b, -1), st);
	CHECK_RC(sendDMA(0, 0, 0, b, 1), st);
	CHECK_RC(recvCopy(0, 0, 0, b, 1, NULL, NULL, NULL, NULL), st);
	CHECK_RC(recvCopy(0, 0, 0, b, -1, NULL, NULL, NULL, NULL), st);
	CHECK_RC(recvDMA(0, 0, 0, &p, NULL, NULL, NULL, NULL), st);
	CHECK_RC(testHandle(1, PCOR_BLOCK), st);
	CHECK(h == SENTINEL && p == (void *)&h && sz == 77 &&
	      thid == SENTINEL);
	CHECK(info.pid == 1 && info.thid == 2 && info.tag == 3 &&
	      info.size == 4);
	CHECK(!strcmp(b, "abc"));
	CHECK(strcmp(pcor_strerror(st), "unknown status") != 0);
}

static int me;

/* Sends refused for their arguments, with the status each gets. */
static void bad_sends(void)
{
	char b[16] = {0};
	pcor_handle_t h = SENTINEL;
	const int maxt = pcor_max_threads();
	CHECK(maxt > 1);
	const size_t huge = (size_t)SIZE_MAX, over = (size_t)PTRDIFF_MAX + 1;

	CHECK_RC(pcor_send_copy(-1, me, 0, b, 1, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_copy(PCOR_ANY_PID, me, 0, b, 1, &h),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_copy(pcor_nprocs(), me, 0, b, 1, &h),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_copy(INT_MAX, me, 0, b, 1, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_copy(INT_MIN, me, 0, b, 1, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_copy(0, -1, 0, b, 1, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_send_copy(0, PCOR_ANY_THID, 0, b, 1, &h),
		 PCOR_ERR_BADTHID);
	CHECK_RC(pcor_send_copy(0, maxt, 0, b, 1, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_send_copy(0, INT_MAX, 0, b, 1, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_send_copy(0, me, -1, b, 1, &h), PCOR_ERR_BADTAG);
	CHECK_RC(pcor_send_copy(0, me, PCOR_ANY_TAG, b, 1, &h),
		 PCOR_ERR_BADTAG);
	CHECK_RC(pcor_send_copy(0, me, INT_MIN, b, 1, &h), PCOR_ERR_BADTAG);
	CHECK_RC(pcor_send_copy(0, me, 0, b, huge, &h), PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_send_copy(0, me, 0, b, over, &h), PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_send_copy(0, me, 0, NULL, 1, &h), PCOR_ERR_BADBUF);
	CHECK_RC(pcor_send_copy(0, me, 0, b, 1, NULL), PCOR_ERR_INVAL);
	CHECK_RC(sendCopy(0, me, 0, b, -1), PCOR_ERR_BADSIZE);
	CHECK_RC(sendCopy(0, me, 0, b, INT_MIN), PCOR_ERR_BADSIZE);
	CHECK_RC(sendCopy(0, me, 0, NULL, 5), PCOR_ERR_BADBUF);
	CHECK_RC(sendCopy(-1, me, 0, b, 1), PCOR_ERR_BADPID);
	CHECK_RC(sendCopy(0, maxt, 0, b, 1), PCOR_ERR_BADTHID);
	CHECK_RC(sendCopy(0, me, -7, b, 1), PCOR_ERR_BADTAG);

	/* sendDMA wants DMA memory, the range inside one block, and a
	 * hand-over of a whole block. */
	void *d;
	CHECK_OK(pcor_dma_alloc(256, &d));
	size_t u;
	CHECK_OK(pcor_dma_size(d, &u));
	char *heap = malloc(256);
	CHECK(heap != NULL);
	CHECK_RC(pcor_send_dma(0, me, 0, heap, 16, 0, &h), PCOR_ERR_NOTDMA);
	CHECK_RC(pcor_send_dma(0, me, 0, b, 16, 0, &h), PCOR_ERR_NOTDMA);
	CHECK_RC(pcor_send_dma(0, me, 0, heap, 16, PCOR_SEND_HANDOVER, &h),
		 PCOR_ERR_NOTDMA);
	CHECK_RC(sendDMA(0, me, 0, heap, 16), PCOR_ERR_NOTDMA);
	CHECK_RC(pcor_send_dma(0, me, 0, d, u + 1, 0, &h), PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_send_dma(0, me, 0, (char *)d + 8, u - 7, 0, &h),
		 PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_send_dma(0, me, 0, (char *)d + 8, 16, PCOR_SEND_HANDOVER,
			       &h),
		 PCOR_ERR_NOTDMA);
	CHECK_RC(pcor_send_dma(0, me, 0, d, 16, 0x2, &h), PCOR_ERR_INVAL);
	CHECK_RC(pcor_send_dma(0, me, 0, d, 16, 0x80000000u, &h),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_send_dma(0, me, 0, d, 16, PCOR_SEND_HANDOVER | 0x4, &h),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_send_dma(0, me, 0, d, 16, 0, NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_send_dma(0, me, 0, NULL, 16, 0, &h), PCOR_ERR_BADBUF);
	CHECK_RC(pcor_send_dma(1, me, 0, d, 16, 0, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_send_dma(0, -3, 0, d, 16, 0, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_send_dma(0, me, -3, d, 16, 0, &h), PCOR_ERR_BADTAG);
	CHECK_RC(pcor_send_dma(0, me, 0, d, huge, 0, &h), PCOR_ERR_BADSIZE);
	CHECK_RC(sendDMA(0, me, 0, d, -1), PCOR_ERR_BADSIZE);
	/* A refused hand-over leaves the block with its owner. */
	CHECK_OK(pcor_dma_size(d, &u));
	/* A freed block is no DMA memory. */
	void *gone;
	CHECK_OK(pcor_dma_alloc(64, &gone));
	CHECK_OK(pcor_dma_free(gone));
	CHECK_RC(pcor_send_dma(0, me, 0, gone, 1, 0, &h), PCOR_ERR_NOTDMA);
	CHECK(h == SENTINEL);

	/* What is valid still works: an interior range without hand-over. */
	memcpy((char *)d + 8, "interior", 9);
	CHECK_OK(pcor_send_dma(0, me, 1, (char *)d + 8, 9, 0, &h));
	pcor_handle_t rh;
	CHECK_OK(pcor_recv_copy(0, me, 1, b, sizeof(b), NULL, &rh));
	CHECK_OK(pcor_handle_test(rh, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, "interior"));
	CHECK_OK(pcor_dma_free(d));
	free(heap);
}

static void bad_recvs(void)
{
	char b[16];
	pcor_handle_t h = SENTINEL;
	pcor_msginfo_t info = {1, 2, 3, 4};
	void *p = &h;
	const int maxt = pcor_max_threads();

	CHECK_RC(pcor_recv_copy(-2, 0, 0, b, 1, &info, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_recv_copy(pcor_nprocs(), 0, 0, b, 1, &info, &h),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_recv_copy(INT_MIN, 0, 0, b, 1, &info, &h),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_recv_copy(0, -2, 0, b, 1, &info, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_recv_copy(0, maxt, 0, b, 1, &info, &h),
		 PCOR_ERR_BADTHID);
	CHECK_RC(pcor_recv_copy(0, 0, -2, b, 1, &info, &h), PCOR_ERR_BADTAG);
	CHECK_RC(pcor_recv_copy(0, 0, INT_MIN, b, 1, &info, &h),
		 PCOR_ERR_BADTAG);
	CHECK_RC(pcor_recv_copy(0, 0, 0, b, SIZE_MAX, &info, &h),
		 PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_recv_copy(0, 0, 0, b, (size_t)PTRDIFF_MAX + 1, &info,
				&h),
		 PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_recv_copy(0, 0, 0, NULL, 1, &info, &h), PCOR_ERR_BADBUF);
	CHECK_RC(pcor_recv_copy(0, 0, 0, b, 1, &info, NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_recv_dma(-2, 0, 0, &p, &info, &h), PCOR_ERR_BADPID);
	CHECK_RC(pcor_recv_dma(0, maxt, 0, &p, &info, &h), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_recv_dma(0, 0, -5, &p, &info, &h), PCOR_ERR_BADTAG);
	CHECK_RC(pcor_recv_dma(0, 0, 0, NULL, &info, &h), PCOR_ERR_BADBUF);
	CHECK_RC(pcor_recv_dma(0, 0, 0, &p, &info, NULL), PCOR_ERR_INVAL);
	CHECK_RC(recvCopy(0, 0, 0, b, -1, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADSIZE);
	CHECK_RC(recvCopy(0, 0, 0, NULL, 4, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADBUF);
	CHECK_RC(recvCopy(-3, 0, 0, b, 1, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADPID);
	CHECK_RC(recvCopy(0, -3, 0, b, 1, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADTHID);
	CHECK_RC(recvCopy(0, 0, -3, b, 1, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADTAG);
	CHECK_RC(recvDMA(0, 0, 0, NULL, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADBUF);
	CHECK_RC(recvDMA(0, maxt, 0, &p, NULL, NULL, NULL, NULL),
		 PCOR_ERR_BADTHID);
	CHECK(h == SENTINEL && p == (void *)&h);
	CHECK(info.pid == 1 && info.thid == 2 && info.tag == 3 &&
	      info.size == 4);
}

static void bad_misc(void)
{
	int thid = SENTINEL;
	void *p = &thid;
	size_t sz = 5;
	CHECK_RC(pcor_thread_attach(&thid), PCOR_ERR_BUSY); /* already one */
	CHECK(thid == SENTINEL);
	CHECK_RC(pcor_thread_attach(NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_thread_create(NULL, NULL, &thid), PCOR_ERR_INVAL);
	CHECK_RC(pcor_thread_create(create_fn, NULL, NULL), PCOR_ERR_INVAL);
	CHECK(thid == SENTINEL);
	CHECK_RC(pcor_thread_join(-1, NULL), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_thread_join(pcor_max_threads(), NULL), PCOR_ERR_BADTHID);
	CHECK_RC(pcor_thread_join(me, NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_thread_join(me + 1, NULL), PCOR_ERR_BADTHID);
	int t;
	CHECK_OK(pcor_thread_create(create_fn, &thid, &t));
	void *ret = NULL;
	CHECK_OK(pcor_thread_join(t, &ret));
	CHECK(ret == &thid);
	CHECK_RC(pcor_thread_join(t, NULL), PCOR_ERR_BADTHID); /* twice */
	CHECK_RC(pcor_dma_alloc(1, NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_dma_alloc(SIZE_MAX, &p), PCOR_ERR_BADSIZE);
	CHECK(p == (void *)&thid);
	CHECK_RC(pcor_dma_size(NULL, &sz), PCOR_ERR_INVAL);
	CHECK_RC(pcor_dma_size(&sz, &sz), PCOR_ERR_NOTDMA);
	CHECK(sz == 5);
	CHECK_RC(pcor_dma_free(&sz), PCOR_ERR_NOTDMA);
	CHECK_RC(pcor_init(NULL, NULL), PCOR_ERR_BUSY);
	CHECK(pcor_self_thid() == me); /* the second init changed nothing */
}

/* ---- from a thread that is not a pcor thread ---- */

static void *outsider(void *arg)
{
	(void)arg;
	char b[4] = "abc";
	pcor_handle_t h = SENTINEL;
	void *p = NULL;
	CHECK_RC(pcor_self_thid(), PCOR_ERR_NOTATTACHED);
	CHECK(pcor_self_pid() == 0);
	CHECK_RC(pcor_send_copy(0, me, 0, b, 1, &h), PCOR_ERR_NOTATTACHED);
	CHECK_RC(pcor_recv_copy(0, me, 0, b, 1, NULL, &h),
		 PCOR_ERR_NOTATTACHED);
	CHECK_RC(pcor_recv_dma(0, me, 0, &p, NULL, &h), PCOR_ERR_NOTATTACHED);
	CHECK_RC(sendCopy(0, me, 0, b, 1), PCOR_ERR_NOTATTACHED);
	CHECK_RC(pcor_thread_detach(), PCOR_ERR_NOTATTACHED);
	CHECK(h == SENTINEL);
	/* DMA memory needs no thread id. */
	CHECK_OK(pcor_dma_alloc(100, &p));
	CHECK_RC(pcor_send_dma(0, me, 0, p, 1, 0, &h), PCOR_ERR_NOTATTACHED);
	CHECK_OK(pcor_dma_free(p));
	return NULL;
}

/* ---- finalize while others are attached ---- */

static pthread_barrier_t bar;

static void *attached(void *arg)
{
	(void)arg;
	int t;
	CHECK_OK(pcor_thread_attach(&t));
	th_barrier_wait(&bar); /* attached */
	th_barrier_wait(&bar); /* main tried to finalize */
	CHECK_OK(pcor_thread_detach());
	th_barrier_wait(&bar);
	return NULL;
}

static void *created(void *arg)
{
	(void)arg;
	/* Blocks on a receive until main lets it go. */
	char b[4];
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, me, 1, b, sizeof(b), NULL, &h));
	th_barrier_wait(&bar);
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	return NULL;
}

static void test_finalize_busy(void)
{
	th_barrier_init(&bar, 2);
	pthread_t pt;
	th_thread_start(&pt, attached, NULL);
	th_barrier_wait(&bar);
	CHECK_RC(pcor_finalize(), PCOR_ERR_BUSY);
	/* Nothing was released: the runtime carries on. */
	CHECK(pcor_self_thid() == me);
	pcor_handle_t h;
	char b[4];
	CHECK_OK(pcor_send_copy(0, me, 5, "hi", 3, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK_OK(pcor_recv_copy(0, me, 5, b, sizeof(b), NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, "hi"));
	th_barrier_wait(&bar);
	th_barrier_wait(&bar); /* it detached */
	th_thread_join(pt);

	int t;
	CHECK_OK(pcor_thread_create(created, NULL, &t));
	th_barrier_wait(&bar); /* its receive is posted */
	CHECK_RC(pcor_finalize(), PCOR_ERR_BUSY);
	CHECK_OK(pcor_send_copy(0, t, 1, "go", 3, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK_OK(pcor_thread_join(t, NULL));
	pthread_barrier_destroy(&bar);
}

int main(void)
{
	all_calls_fail(PCOR_ERR_NOTINIT);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	CHECK(me == 0);
	CHECK(pcor_self_pid() == 0 && pcor_nprocs() == 1);
	bad_sends();
	bad_recvs();
	bad_misc();
	pthread_t t;
	th_thread_start(&t, outsider, NULL);
	th_thread_join(t);
	test_finalize_busy();

	/* Nothing any refused call did left a message behind. */
	char b[4];
	pcor_handle_t h, sh;
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, b,
				sizeof(b), NULL, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_send_copy(0, me, 3, "end", 4, &sh));
	CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(!strcmp(b, "end"));

	CHECK_OK(pcor_finalize());
	all_calls_fail(PCOR_ERR_FINALIZED);
	CHECK_RC(pcor_init(NULL, NULL), PCOR_ERR_FINALIZED);
	all_calls_fail(PCOR_ERR_FINALIZED);
	return 0;
}
