/*
 * match -- which receive gets which message: wildcards on pid, thread and
 * tag with what they report, partial patterns, messages left for a later
 * receive, receives posted in order, and truncation (the buffer filled to
 * its capacity, PCOR_ERR_TRUNCATE, the full size reported) on every path.
 */
#include "agent.h"

#define GUARD 32
#define GUARD_BYTE 0xC3

static th_agent_t A, B;
static int me;

/* A posted copy receive with its buffer and guard. */
typedef struct rx {
	pcor_handle_t h;
	pcor_msginfo_t info;
	uint8_t *buf;
	size_t cap;
} rx_t;

static void rx_post(rx_t *r, int pid, int thid, int tag, size_t cap)
{
	r->cap = cap;
	r->buf = malloc(cap + GUARD);
	CHECK(r->buf != NULL);
	memset(r->buf, GUARD_BYTE, cap + GUARD);
	r->info = (pcor_msginfo_t){-9, -9, -9, 9};
	r->h = 0;
	CHECK_OK(pcor_recv_copy(pid, thid, tag, r->buf, cap, &r->info, &r->h));
	CHECK(r->h > 0);
}

/* Wait for r; expect status st and a message of thid/tag/size/key. */
static void rx_expect(rx_t *r, int st, int thid, int tag, size_t size,
		      uint64_t key)
{
	CHECK_RC(pcor_handle_test(r->h, PCOR_BLOCK), st);
	CHECK(r->info.pid == 0);
	CHECK(r->info.thid == thid);
	CHECK(r->info.tag == tag);
	CHECK(r->info.size == size);
	size_t n = size < r->cap ? size : r->cap;
	CHECK_REF(r->buf, n, key);
	for (size_t i = n; i < r->cap + GUARD; i++)
		CHECK(r->buf[i] == GUARD_BYTE);
	free(r->buf);
	r->buf = NULL;
}

static void rx_pending(const rx_t *r)
{
	CHECK_RC(pcor_handle_test(r->h, PCOR_NONBLOCK), PCOR_INPROGRESS);
}

static void test_any(void)
{
	/* Unexpected first: full wildcards take them in arrival order. */
	th_agent_send_ok(&A, TH_SEND_COPY, me, 3, 10, 101);
	th_agent_send_ok(&B, TH_SEND_COPY, me, 7, 1000, 102);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 0, 0, 103);
	rx_t r;
	rx_post(&r, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 2000);
	rx_expect(&r, PCOR_OK, A.thid, 3, 10, 101);
	rx_post(&r, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 2000);
	rx_expect(&r, PCOR_OK, B.thid, 7, 1000, 102);
	rx_post(&r, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 2000);
	rx_expect(&r, PCOR_OK, A.thid, 0, 0, 103);

	/* Posted first: each message goes to the oldest receive that takes
	 * it, whatever was posted after. */
	rx_t r1, r2, r3, r4;
	rx_post(&r1, PCOR_ANY_PID, B.thid, PCOR_ANY_TAG, 100); /* B only */
	rx_post(&r2, 0, PCOR_ANY_THID, 5, 100);                /* tag 5 */
	rx_post(&r3, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 100);
	rx_post(&r4, 0, A.thid, 5, 100); /* younger than r2 */
	th_agent_send_ok(&A, TH_SEND_COPY, me, 5, 20, 201);
	rx_expect(&r2, PCOR_OK, A.thid, 5, 20, 201);
	rx_pending(&r1);
	rx_pending(&r3);
	rx_pending(&r4);
	th_agent_send_ok(&B, TH_SEND_COPY, me, 9, 30, 202);
	rx_expect(&r1, PCOR_OK, B.thid, 9, 30, 202);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 5, 40, 203);
	rx_expect(&r3, PCOR_OK, A.thid, 5, 40, 203); /* older than r4 */
	rx_pending(&r4);
	th_agent_send_ok(&B, TH_SEND_COPY, me, 5, 50, 204);
	rx_pending(&r4); /* not from A */
	th_agent_send_ok(&A, TH_SEND_COPY, me, 5, 60, 205);
	rx_expect(&r4, PCOR_OK, A.thid, 5, 60, 205);
	/* B's tag 5 message waited as unexpected. */
	rx_post(&r, 0, B.thid, 5, 100);
	rx_expect(&r, PCOR_OK, B.thid, 5, 50, 204);
}

/* Messages a receive does not match stay for the one that does. */
static void test_left_for_later(void)
{
	th_agent_send_ok(&A, TH_SEND_COPY, me, 20, 300, 301);
	th_agent_send_ok(&B, TH_SEND_COPY, me, 20, 64, 302);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 22, 5000, 303);
	rx_t r1, r2, r3, r4;
	rx_post(&r1, 0, A.thid, 21, 6000);            /* nothing yet */
	rx_post(&r2, PCOR_ANY_PID, B.thid, 22, 6000); /* nothing yet */
	rx_pending(&r1);
	rx_pending(&r2);
	rx_post(&r3, 0, A.thid, 22, 6000); /* skips the older tag 20 */
	rx_expect(&r3, PCOR_OK, A.thid, 22, 5000, 303);
	rx_post(&r4, PCOR_ANY_PID, PCOR_ANY_THID, 20, 6000);
	rx_expect(&r4, PCOR_OK, A.thid, 20, 300, 301);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 21, 1, 304);
	rx_expect(&r1, PCOR_OK, A.thid, 21, 1, 304);
	th_agent_send_ok(&B, TH_SEND_COPY, me, 22, 2, 305);
	rx_expect(&r2, PCOR_OK, B.thid, 22, 2, 305);
	rx_post(&r1, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 100);
	rx_expect(&r1, PCOR_OK, B.thid, 20, 64, 302);

	/* A thread may send to itself; the report names it. */
	uint8_t msg[40];
	th_ref_fill(msg, sizeof(msg), 306);
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(0, me, 8, msg, sizeof(msg), &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	rx_post(&r1, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 100);
	rx_expect(&r1, PCOR_OK, me, 8, sizeof(msg), 306);
	/* Nothing is left over anywhere. */
	rx_post(&r1, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 100);
	rx_pending(&r1);
	CHECK_OK(pcor_send_copy(0, me, 9, msg, 1, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	rx_expect(&r1, PCOR_OK, me, 9, 1, 306);
}

static void test_truncate(void)
{
	/* Posted first: the copy goes straight into the short buffer. */
	rx_t r;
	rx_post(&r, 0, A.thid, 1, 100);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 1, 1000, 401);
	rx_expect(&r, PCOR_ERR_TRUNCATE, A.thid, 1, 1000, 401);

	/* Unexpected first, both for data kept inline and in DMA memory. */
	const size_t sizes[] = {17, 64, 65, 5000, 100000};
	for (size_t i = 0; i < TH_LEN(sizes); i++) {
		th_agent_send_ok(&A, TH_SEND_COPY, me, 2, sizes[i], 410 + i);
		rx_post(&r, 0, A.thid, 2, 16);
		rx_expect(&r, PCOR_ERR_TRUNCATE, A.thid, 2, sizes[i], 410 + i);
	}

	/* A plain sendDMA, both orders: the sender's handle completes OK,
	 * the receiver's with TRUNCATE. */
	for (int order = 0; order < 2; order++) {
		pcor_handle_t sh;
		if (order == 0) {
			rx_post(&r, 0, B.thid, 3, 33);
			sh = th_agent_send_ok(&B, TH_SEND_DMA, me, 3, 4096,
					      420);
		} else {
			sh = th_agent_send_ok(&B, TH_SEND_DMA, me, 3, 4096,
					      421);
			CHECK_RC(pcor_handle_test(sh, PCOR_NONBLOCK),
				 PCOR_INPROGRESS);
			rx_post(&r, 0, B.thid, 3, 33);
		}
		rx_expect(&r, PCOR_ERR_TRUNCATE, B.thid, 3, 4096, 420 + order);
		CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
		CHECK_OK(pcor_dma_free(B.buf));
	}

	/* A hand-over into a short copy receive: the block is pcor's to
	 * free, and it does. */
	for (int order = 0; order < 2; order++) {
		if (order == 0)
			rx_post(&r, 0, B.thid, 4, 10);
		th_agent_send_ok(&B, TH_SEND_HANDOVER, me, 4, 3000,
				 430 + order);
		if (order == 1)
			rx_post(&r, 0, B.thid, 4, 10);
		rx_expect(&r, PCOR_ERR_TRUNCATE, B.thid, 4, 3000, 430 + order);
		size_t u;
		CHECK_RC(pcor_dma_size(B.buf, &u), PCOR_ERR_NOTDMA);
	}

	/* No buffer at all: only an empty message fits. */
	pcor_msginfo_t info = {0};
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, A.thid, 5, NULL, 0, &info, &h));
	th_agent_send_ok(&A, TH_SEND_COPY, me, 5, 10, 440);
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
	CHECK(info.size == 10 && info.thid == A.thid && info.tag == 5);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 5, 0, 441);
	CHECK_OK(pcor_recv_copy(0, A.thid, 5, NULL, 0, &info, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.size == 0);

	/* An exact fit is no truncation. */
	rx_post(&r, 0, A.thid, 6, 777);
	th_agent_send_ok(&A, TH_SEND_COPY, me, 6, 777, 450);
	rx_expect(&r, PCOR_OK, A.thid, 6, 777, 450);

	/* The paper's recvCopy reports the full size through asize. */
	uint8_t small[8];
	int apid = -1, athid = -1, atag = -1, asize = -1;
	th_agent_send_ok(&A, TH_SEND_COPY, me, 7, 100, 460);
	int rh = recvCopy(0, A.thid, 7, small, sizeof(small), &apid, &athid,
			  &atag, &asize);
	CHECK(rh > 0);
	CHECK_RC(testHandle(rh, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
	CHECK(apid == 0 && athid == A.thid && atag == 7 && asize == 100);
	CHECK_REF(small, sizeof(small), 460);
}

int main(void)
{
	th_ref_init(1 << 20);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	th_agent_start(&A);
	th_agent_start(&B);
	CHECK(A.thid != B.thid && A.thid != me && B.thid != me);
	test_any();
	test_left_for_later();
	test_truncate();
	th_agent_stop(&A);
	th_agent_stop(&B);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
