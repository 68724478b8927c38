/*
 * compat -- the pCoR paper's five calls through their own signatures:
 * handles (> 0) or negative statuses, the int outputs written on
 * completion, sendDMA keeping the buffer the sender's, recvDMA handing a
 * DMA block to the receiver, asize clamped to INT_MAX, NULL outputs.
 */
#include "agent.h"

#include <limits.h>

static int me;
static th_agent_t A;

static void test_copy(void)
{
	/* Posted first, then the agent's message. */
	char buf[100];
	int apid = -1, athid = -1, atag = -1, asize = -1;
	int h = recvCopy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, buf,
			 sizeof(buf), &apid, &athid, &atag, &asize);
	CHECK(h > 0);
	CHECK_RC(testHandle(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK(asize == -1); /* written on completion only */
	th_agent_send_ok(&A, TH_SEND_COPY, me, 12, 77, 1);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK(apid == 0 && athid == A.thid && atag == 12 && asize == 77);
	CHECK_REF(buf, 77, 1);
	CHECK_RC(testHandle(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);

	/* Unexpected first, outputs not wanted. */
	th_agent_send_ok(&A, TH_SEND_COPY, me, 13, 50, 2);
	h = recvCopy(0, A.thid, 13, buf, sizeof(buf), NULL, NULL, NULL, NULL);
	CHECK(h > 0);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK_REF(buf, 50, 2);

	/* sendCopy: the buffer is free at once; the handle completes. */
	char msg[300];
	th_ref_fill(msg, sizeof(msg), 3);
	int sh = sendCopy(0, me, 14, msg, (int)sizeof(msg));
	CHECK(sh > 0);
	memset(msg, 0, sizeof(msg));
	CHECK_OK(testHandle(sh, PCOR_NONBLOCK));
	CHECK_RC(testHandle(sh, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	char big[300];
	h = recvCopy(0, me, 14, big, (int)sizeof(big), &apid, &athid, &atag,
		     &asize);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK(apid == 0 && athid == me && atag == 14 && asize == 300);
	CHECK_REF(big, 300, 3);

	/* An empty message: size 0 and no buffer on both sides. */
	sh = sendCopy(0, me, 15, NULL, 0);
	CHECK(sh > 0);
	CHECK_OK(testHandle(sh, PCOR_BLOCK));
	h = recvCopy(0, me, 15, NULL, 0, NULL, NULL, NULL, &asize);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK(asize == 0);
}

static void test_dma(void)
{
	/* sendDMA: no copy on the send side, so the handle completes only
	 * when the receiver has taken the data; the buffer stays ours. */
	void *d;
	CHECK_OK(pcor_dma_alloc(4000, &d));
	th_ref_fill(d, 4000, 4);
	int sh = sendDMA(0, me, 20, d, 4000);
	CHECK(sh > 0);
	CHECK_RC(testHandle(sh, PCOR_NONBLOCK), PCOR_INPROGRESS);
	void *got = NULL;
	int apid = -1, athid = -1, atag = -1, asize = -1;
	int h = recvDMA(0, me, 20, &got, &apid, &athid, &atag, &asize);
	CHECK(h > 0);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK_OK(testHandle(sh, PCOR_BLOCK));
	CHECK(apid == 0 && athid == me && atag == 20 && asize == 4000);
	CHECK(got != NULL && got != d);
	size_t u;
	CHECK_OK(pcor_dma_size(got, &u));
	CHECK(u >= 4000);
	CHECK_REF(got, 4000, 4);
	CHECK_REF(d, 4000, 4);
	CHECK_OK(pcor_dma_free(got));
	CHECK_OK(pcor_dma_free(d));

	/* recvDMA posted first, from another thread's sendDMA. */
	got = NULL;
	h = recvDMA(PCOR_ANY_PID, A.thid, PCOR_ANY_TAG, &got, NULL, NULL,
		    NULL, &asize);
	CHECK(h > 0);
	CHECK_RC(testHandle(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK(got == NULL);
	sh = th_agent_send_ok(&A, TH_SEND_DMA, me, 21, 100000, 5);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK_OK(testHandle(sh, PCOR_BLOCK));
	CHECK(asize == 100000);
	CHECK_REF(got, 100000, 5);
	CHECK_OK(pcor_dma_free(got));
	CHECK_OK(pcor_dma_free(A.buf));

	/* An empty message gives no buffer. */
	got = &got;
	sh = sendDMA(0, me, 22, NULL, 0);
	CHECK(sh > 0);
	h = recvDMA(0, me, 22, &got, NULL, NULL, NULL, &asize);
	CHECK_OK(testHandle(h, PCOR_BLOCK));
	CHECK_OK(testHandle(sh, PCOR_BLOCK));
	CHECK(got == NULL && asize == 0);
}

/* A message longer than INT_MAX: asize says INT_MAX, the pcor_ API the
 * truth.  Only the bytes received are ever touched. */
static void test_clamp(void)
{
	const size_t len = ((size_t)1 << 31) + 5;
	char *d;
	int rc = pcor_dma_alloc(len, (void **)&d);
	if (rc == PCOR_ERR_NOMEM)
		SKIP("no room for a 2 GiB DMA block");
	CHECK_OK(rc);
	memcpy(d, "clamp", 6);
	for (int i = 0; i < 2; i++) {
		pcor_handle_t sh;
		CHECK_OK(pcor_send_dma(0, me, 30, d, len, 0, &sh));
		char buf[8];
		int asize = -1;
		pcor_msginfo_t info;
		pcor_handle_t h;
		if (i == 0) {
			h = recvCopy(0, me, 30, buf, sizeof(buf), NULL, NULL,
				     NULL, &asize);
			CHECK(h > 0);
		} else {
			CHECK_OK(pcor_recv_copy(0, me, 30, buf, sizeof(buf),
						&info, &h));
		}
		CHECK_RC(testHandle(h, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
		CHECK_OK(testHandle(sh, PCOR_BLOCK));
		CHECK(!memcmp(buf, "clamp", 6));
		if (i == 0)
			CHECK(asize == INT_MAX);
		else
			CHECK(info.size == len);
	}
	CHECK_OK(pcor_dma_free(d));
}

int main(void)
{
	th_ref_init(1 << 20);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	th_agent_start(&A);
	test_copy();
	test_dma();
	th_agent_stop(&A);
	test_clamp();
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
