/*
 * backpressure -- a receiver that does not keep up makes its senders
 * wait, then fail with PCOR_ERR_AGAIN; nothing is lost, duplicated or
 * reordered, and a retried send goes through once there is room.
 *
 *   backpressure mcb    PCOR_MCB_POOL=16: the message pool runs out
 *   backpressure bytes  PCOR_UNEXP_BYTES=64k: the unexpected-data budget
 *                       runs out (8 KiB messages)
 *
 * Both with PCOR_BACKPRESSURE_MS=20.
 */
#include "../common.h"

#define N 2000
#define BACKPRESSURE_MS 20
#define MCB_POOL 16
#define UNEXP_BYTES 65536
#define BIG 8192

enum kind { K_COPY, K_DMA, K_HANDOVER };

static struct {
	bool bytes_mode;
	int receiver, sender;
	pthread_barrier_t full;
	int accepted;       /* messages taken before the first refusal */
	uint64_t again_ns;  /* how long the first refusal took */
	int agains;         /* refusals in all */
	pcor_handle_t dh[N]; /* parked sendDMAs, tested at the end */
	void *dbuf[N];
} B;

static size_t len_of(int seq)
{
	if (B.bytes_mode)
		return BIG;
	/* Inline, DMA-held and empty messages all need an MCB. */
	return (size_t)(th_mix((uint64_t)seq) % 200) * (seq % 9 != 0);
}

static enum kind kind_of(int seq)
{
	/* Copies mostly; hand-overs count against the byte budget too. */
	if (seq % 5 == 2)
		return B.bytes_mode ? K_HANDOVER : K_DMA;
	if (seq % 7 == 4)
		return K_HANDOVER;
	return K_COPY;
}

/* One attempt; PCOR_OK or PCOR_ERR_AGAIN. */
static int try_send(int seq, void *buf)
{
	size_t len = len_of(seq);
	int tag = seq % 3;
	pcor_handle_t h = -77;
	int rc;
	switch (kind_of(seq)) {
	case K_COPY:
		rc = pcor_send_copy(0, B.receiver, tag, buf, len, &h);
		break;
	case K_DMA:
		rc = pcor_send_dma(0, B.receiver, tag, buf, len, 0, &h);
		break;
	default:
		rc = pcor_send_dma(0, B.receiver, tag, buf, len,
				   PCOR_SEND_HANDOVER, &h);
		break;
	}
	if (rc == PCOR_ERR_AGAIN) {
		CHECK(h == -77); /* refused: no handle */
		return rc;
	}
	CHECK_OK(rc);
	if (kind_of(seq) == K_DMA) {
		B.dh[seq] = h; /* completes when received */
	} else {
		CHECK_OK(pcor_handle_test(h, PCOR_NONBLOCK));
	}
	return rc;
}

static void *sender_fn(void *arg)
{
	(void)arg;
	uint8_t copy[BIG];
	bool refused = false;
	for (int seq = 0; seq < N; seq++) {
		size_t len = len_of(seq);
		void *buf = copy;
		if (kind_of(seq) != K_COPY)
			CHECK_OK(pcor_dma_alloc(len, &buf));
		th_ref_fill(buf, len, (uint64_t)seq);
		B.dbuf[seq] = buf;
		for (int tries = 0;; tries++) {
			CHECK(tries < 1000); /* 20 s of refusals: stuck */
			uint64_t t0 = th_now_ns();
			int rc = try_send(seq, buf);
			if (rc == PCOR_OK)
				break;
			B.agains++;
			if (!refused) {
				/* The receiver has not received anything. */
				refused = true;
				B.accepted = seq;
				B.again_ns = th_now_ns() - t0;
				th_barrier_wait(&B.full);
			}
		}
	}
	/* Parked sendDMAs complete once taken; then the buffers are ours. */
	for (int seq = 0; seq < N; seq++) {
		if (kind_of(seq) != K_DMA)
			continue;
		CHECK_OK(pcor_handle_test(B.dh[seq], PCOR_BLOCK));
		CHECK_REF(B.dbuf[seq], len_of(seq), (uint64_t)seq);
		CHECK_OK(pcor_dma_free(B.dbuf[seq]));
	}
	CHECK(refused);
	return NULL;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	B.bytes_mode = !strcmp(argv[1], "bytes");
	CHECK(B.bytes_mode || !strcmp(argv[1], "mcb"));
	char v[32];
	snprintf(v, sizeof(v), "%d", BACKPRESSURE_MS);
	CHECK(setenv("PCOR_BACKPRESSURE_MS", v, 1) == 0);
	if (B.bytes_mode) {
		snprintf(v, sizeof(v), "%d", UNEXP_BYTES);
		CHECK(setenv("PCOR_UNEXP_BYTES", v, 1) == 0);
	} else {
		snprintf(v, sizeof(v), "%d", MCB_POOL);
		CHECK(setenv("PCOR_MCB_POOL", v, 1) == 0);
	}
	th_ref_init(BIG);
	CHECK_OK(pcor_init(NULL, NULL));
	B.receiver = pcor_self_thid();
	th_barrier_init(&B.full, 2);
	CHECK_OK(pcor_thread_create(sender_fn, NULL, &B.sender));

	/* Receive nothing until the sender has been refused. */
	th_barrier_wait(&B.full);
	int expect = B.bytes_mode ? UNEXP_BYTES / BIG : MCB_POOL;
	if (B.accepted != expect)
		fprintf(stderr, "accepted %d before refusal, expected %d\n",
			B.accepted, expect);
	CHECK(B.accepted == expect);
	CHECK(B.again_ns >= (uint64_t)BACKPRESSURE_MS * 1000000);

	/* Drain while the sender retries; each message once, in order. */
	static uint8_t buf[BIG];
	for (int seq = 0; seq < N; seq++) {
		pcor_msginfo_t info;
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(0, B.sender, PCOR_ANY_TAG, buf,
					sizeof(buf), &info, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK(info.tag == seq % 3);
		CHECK(info.size == len_of(seq));
		CHECK_REF(buf, info.size, (uint64_t)seq);
	}
	CHECK_OK(pcor_thread_join(B.sender, NULL));
	printf("%d refusals\n", B.agains);

	/* Nothing more came. */
	pcor_handle_t h, sh;
	pcor_msginfo_t info;
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, buf,
				sizeof(buf), &info, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_send_copy(0, B.receiver, 9, "", 0, &sh));
	CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.thid == B.receiver && info.tag == 9);

	pthread_barrier_destroy(&B.full);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
