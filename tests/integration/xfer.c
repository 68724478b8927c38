/*
 * xfer -- two threads exchange every size from 0 B to 16 MiB byte-exact:
 * 0, 1 and each power of two with the sizes either side of it.
 *
 *   xfer SEND RECV    SEND: copy | dma | handover    RECV: copy | dma
 *
 * Each size goes twice: with the receive posted before the send, and with
 * the message arriving first (unexpected).  Checked: the bytes, the
 * reported pid/thid/tag/size, that nothing is written past a receive
 * buffer, when each send's handle completes, who owns DMA memory after,
 * and that a handed-over buffer reaches a recvDMA as the very same
 * pointer (no byte moved).
 */
#include "../common.h"

#define MAX_SIZE ((size_t)16 << 20)
#define GUARD 64
#define GUARD_BYTE 0xE7

enum send_mode { S_COPY, S_DMA, S_HANDOVER };
enum recv_mode { R_COPY, R_DMA };

static struct {
	enum send_mode smode;
	enum recv_mode rmode;
	int receiver, sender; /* thread ids */
	pthread_barrier_t bar;
	size_t sizes[80];
	size_t nsizes;
	/* Per message, set by the sender before a barrier. */
	void *sent_buf;
} X;

static uint64_t key_of(size_t i, bool posted_first)
{
	return i * 2 + (posted_first ? 1 : 0);
}

/* ---- the sender thread ---- */

static void send_one(size_t i, bool posted_first)
{
	size_t size = X.sizes[i];
	uint64_t key = key_of(i, posted_first);
	int tag = (int)key;
	void *buf;
	if (X.smode == S_COPY) {
		buf = malloc(size ? size : 1);
		CHECK(buf != NULL);
	} else {
		CHECK_OK(pcor_dma_alloc(size, &buf));
	}
	th_ref_fill(buf, size, key);
	X.sent_buf = buf;

	if (posted_first)
		th_barrier_wait(&X.bar); /* the receive is posted */

	pcor_handle_t h = 0;
	if (X.smode == S_COPY)
		CHECK_OK(pcor_send_copy(0, X.receiver, tag, buf, size, &h));
	else
		CHECK_OK(pcor_send_dma(0, X.receiver, tag, buf, size,
				       X.smode == S_HANDOVER
					       ? PCOR_SEND_HANDOVER
					       : 0,
				       &h));
	CHECK(h > 0);
	if (X.smode == S_COPY) {
		/* The buffer is ours again at once: scribble on it. */
		memset(buf, 0x11, size);
		free(buf);
	}
	if (!posted_first) {
		/*
		 * Nobody has received yet.  A copy or a hand-over is out of
		 * the sender's hands already; a plain sendDMA waits for the
		 * receiver to take the data.
		 */
		if (X.smode == S_DMA)
			CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK),
				 PCOR_INPROGRESS);
		else
			CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
		th_barrier_wait(&X.bar); /* the message is queued */
		if (X.smode == S_DMA)
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	} else {
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);
	/* sendDMA never writes the sender's buffer, which stays its. */
	if (X.smode == S_DMA)
		CHECK_REF(buf, size, key);
	th_barrier_wait(&X.bar); /* the receiver has checked */
	/*
	 * Freed only now: a receiver that allocates its block after our
	 * handle completed (a short message through its inbox) could
	 * otherwise get this very address back, and its check that the data
	 * came in a block of its own would mean nothing.
	 */
	if (X.smode == S_DMA)
		CHECK_OK(pcor_dma_free(buf));
}

static void *sender_fn(void *arg)
{
	(void)arg;
	for (int order = 0; order < 2; order++)
		for (size_t i = 0; i < X.nsizes; i++)
			send_one(i, order == 0);
	return NULL;
}

/* ---- the receiver (the main thread) ---- */

static void recv_one(size_t i, bool posted_first)
{
	size_t size = X.sizes[i];
	uint64_t key = key_of(i, posted_first);
	int tag = (int)key;
	pcor_msginfo_t info = {-5, -5, -5, (size_t)-5};
	pcor_handle_t h = 0;
	uint8_t *cbuf = NULL;
	void *dbuf = (void *)&info; /* must be overwritten */

	if (!posted_first)
		th_barrier_wait(&X.bar); /* the message is queued */
	if (X.rmode == R_COPY) {
		/* Exactly size bytes, with a guard zone behind. */
		cbuf = malloc(size + GUARD);
		CHECK(cbuf != NULL);
		memset(cbuf, GUARD_BYTE, size + GUARD);
		CHECK_OK(pcor_recv_copy(0, X.sender, tag, cbuf, size, &info,
					&h));
	} else {
		CHECK_OK(pcor_recv_dma(0, X.sender, tag, &dbuf, &info, &h));
	}
	CHECK(h > 0);
	if (posted_first) {
		CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
		th_barrier_wait(&X.bar); /* the receive is posted */
	}
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);

	CHECK(info.pid == 0);
	CHECK(info.thid == X.sender);
	CHECK(info.tag == tag);
	CHECK(info.size == size);
	if (X.rmode == R_COPY) {
		CHECK_REF(cbuf, size, key);
		for (size_t g = 0; g < GUARD; g++)
			CHECK(cbuf[size + g] == GUARD_BYTE);
		free(cbuf);
		if (X.smode == S_HANDOVER) {
			/* pcor owned the handed-over block and freed it. */
			size_t u;
			CHECK_RC(pcor_dma_size(X.sent_buf, &u),
				 PCOR_ERR_NOTDMA);
		}
	} else if (size == 0) {
		/* An empty message gives no buffer, and none is leaked. */
		CHECK(dbuf == NULL);
		size_t u;
		if (X.smode == S_HANDOVER)
			CHECK_RC(pcor_dma_size(X.sent_buf, &u),
				 PCOR_ERR_NOTDMA);
	} else {
		CHECK(dbuf != NULL && dbuf != (void *)&info);
		size_t u = 0;
		CHECK_OK(pcor_dma_size(dbuf, &u));
		CHECK(u >= size);
		CHECK_REF(dbuf, size, key);
		if (X.smode == S_HANDOVER)
			CHECK(dbuf == X.sent_buf); /* zero copy */
		else
			CHECK(dbuf != X.sent_buf);
		CHECK_OK(pcor_dma_free(dbuf));
	}
	th_barrier_wait(&X.bar);
}

int main(int argc, char **argv)
{
	CHECK(argc == 3);
	if (!strcmp(argv[1], "copy"))
		X.smode = S_COPY;
	else if (!strcmp(argv[1], "dma"))
		X.smode = S_DMA;
	else if (!strcmp(argv[1], "handover"))
		X.smode = S_HANDOVER;
	else
		CHECK(!"unknown send mode");
	if (!strcmp(argv[2], "copy"))
		X.rmode = R_COPY;
	else if (!strcmp(argv[2], "dma"))
		X.rmode = R_DMA;
	else
		CHECK(!"unknown receive mode");

	X.sizes[X.nsizes++] = 0;
	for (size_t p = 1; p <= MAX_SIZE; p <<= 1) {
		if (p - 1 > X.sizes[X.nsizes - 1])
			X.sizes[X.nsizes++] = p - 1;
		if (p > X.sizes[X.nsizes - 1])
			X.sizes[X.nsizes++] = p;
		X.sizes[X.nsizes++] = p + 1;
	}
	CHECK(X.sizes[1] == 1 && X.sizes[X.nsizes - 2] == MAX_SIZE);
	th_ref_init(MAX_SIZE + 1);

	CHECK_OK(pcor_init(&argc, &argv));
	X.receiver = pcor_self_thid();
	CHECK(X.receiver == 0);
	th_barrier_init(&X.bar, 2);
	CHECK_OK(pcor_thread_create(sender_fn, NULL, &X.sender));
	CHECK(X.sender > 0);
	for (int order = 0; order < 2; order++)
		for (size_t i = 0; i < X.nsizes; i++)
			recv_one(i, order == 0);
	CHECK_OK(pcor_thread_join(X.sender, NULL));
	pthread_barrier_destroy(&X.bar);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
