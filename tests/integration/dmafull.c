/*
 * dmafull -- receiving with DMA memory exhausted (PCOR_DMA_RESERVE=64m,
 * all of it allocated): a recvDMA that needs a new block completes with
 * PCOR_ERR_NOMEM and a NULL buffer, while the sender's handle completes;
 * paths that need no new DMA memory still work: a copy into a posted
 * copy receive, and a hand-over into a recvDMA (the block moves).
 */
#include "agent.h"

#define MiB ((size_t)1 << 20)

static int me;
static th_agent_t A;

int main(void)
{
	CHECK(setenv("PCOR_DMA_RESERVE", "64m", 1) == 0);
	th_ref_init(4096);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	th_agent_start(&A);

	/* The hand-over block exists before the pool is exhausted. */
	void *ho;
	CHECK_OK(pcor_dma_alloc(256, &ho));
	th_ref_fill(ho, 256, 9);
	/* Take everything that is left: one block of the remaining chunks. */
	void *all = NULL;
	size_t size = 64 * MiB;
	while (size > 0 && pcor_dma_alloc(size, &all) != PCOR_OK)
		size -= 4 * MiB;
	CHECK(all != NULL);
	void *x;
	CHECK_RC(pcor_dma_alloc(4096, &x), PCOR_ERR_NOMEM);

	for (int order = 0; order < 2; order++) {
		/* A recvDMA needing memory: NOMEM, no buffer; the sender is
		 * done either way. */
		void *got = &got;
		pcor_msginfo_t info;
		pcor_handle_t h = 0;
		if (order == 0)
			CHECK_OK(pcor_recv_dma(0, A.thid, 1, &got, &info, &h));
		th_agent_send_ok(&A, TH_SEND_COPY, me, 1, 40, 1);
		if (order == 1)
			CHECK_OK(pcor_recv_dma(0, A.thid, 1, &got, &info, &h));
		CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_NOMEM);
		CHECK(got == NULL);
	}

	/* Posted copy receive: the data goes straight in, no memory needed. */
	char buf[4096];
	pcor_msginfo_t info;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, A.thid, 2, buf, sizeof(buf), &info, &h));
	th_agent_send_ok(&A, TH_SEND_COPY, me, 2, 4096, 2);
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.size == 4096);
	CHECK_REF(buf, 4096, 2);

	/* A hand-over moves the block itself, both ways round. */
	for (int order = 0; order < 2; order++) {
		void *got = NULL;
		pcor_handle_t sh, rh;
		if (order == 0)
			CHECK_OK(pcor_recv_dma(0, me, 3, &got, &info, &rh));
		CHECK_OK(pcor_send_dma(0, me, 3, ho, 256, PCOR_SEND_HANDOVER,
				       &sh));
		if (order == 1)
			CHECK_OK(pcor_recv_dma(0, me, 3, &got, &info, &rh));
		CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
		CHECK_OK(pcor_handle_test(rh, PCOR_BLOCK));
		CHECK(got == ho);
		CHECK_REF(got, 256, 9);
	}
	CHECK_OK(pcor_dma_free(ho));
	CHECK_OK(pcor_dma_free(all));
	/* Memory is back: a recvDMA works again. */
	void *got = NULL;
	CHECK_OK(pcor_recv_dma(0, A.thid, 4, &got, &info, &h));
	th_agent_send_ok(&A, TH_SEND_COPY, me, 4, 1000, 4);
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(got != NULL);
	CHECK_REF(got, 1000, 4);
	CHECK_OK(pcor_dma_free(got));

	th_agent_stop(&A);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
