/*
 * order -- 100,000 messages from 8 sender threads to one receiver that
 * takes them with wildcards arrive in each sender's order: non-overtaking
 * per (sender thread, receiver thread), through posted receives and
 * unexpected messages alike, for inline, DMA-held and parked sendDMA
 * data, with varying tags.
 */
#include "../common.h"

#define NSENDERS 8
#define TOTAL 100000
#define PER_SENDER (TOTAL / NSENDERS)
#define WINDOW 16   /* receives the receiver keeps posted */
#define NDMA 4      /* sendDMA buffers a sender cycles through */
#define MAX_LEN 300 /* header plus filler */

/* What every message starts with. */
typedef struct hdr {
	uint32_t sender; /* index, not thid */
	uint32_t seq;
} hdr_t;

static int receiver;
static int thids[NSENDERS];
static pthread_barrier_t start;

static size_t len_of(uint32_t sender, uint32_t seq)
{
	/* Both sides of the inline limit of an MCB, and an empty filler. */
	return sizeof(hdr_t) + (th_mix(sender * 1000003ull + seq) % 3 == 0
					? 0
					: th_mix(seq * 31ull + sender) %
						  (MAX_LEN - sizeof(hdr_t)));
}

static uint64_t key_of(uint32_t sender, uint32_t seq)
{
	return (uint64_t)sender << 32 | seq;
}

static void *sender_fn(void *arg)
{
	uint32_t me = (uint32_t)(intptr_t)arg;
	uint8_t buf[MAX_LEN];
	void *dma[NDMA];
	pcor_handle_t dh[NDMA] = {0};
	for (int i = 0; i < NDMA; i++)
		CHECK_OK(pcor_dma_alloc(MAX_LEN, &dma[i]));
	th_barrier_wait(&start);
	for (uint32_t seq = 0; seq < PER_SENDER; seq++) {
		size_t len = len_of(me, seq);
		hdr_t h = {me, seq};
		int tag = (int)(seq % 5);
		if (seq % 7 == 3) {
			/* A parked sendDMA: its buffer is busy until received. */
			int k = (int)(seq % NDMA);
			if (dh[k])
				CHECK_OK(pcor_handle_test(dh[k], PCOR_BLOCK));
			uint8_t *d = dma[k];
			memcpy(d, &h, sizeof(h));
			th_ref_fill(d + sizeof(h), len - sizeof(h),
				    key_of(me, seq));
			int rc;
			for (int tries = 0;; tries++) {
				CHECK(tries < TH_AGAIN_TRIES);
				rc = pcor_send_dma(0, receiver, tag, d, len, 0,
						   &dh[k]);
				if (rc != PCOR_ERR_AGAIN)
					break;
			}
			CHECK_OK(rc);
		} else {
			memcpy(buf, &h, sizeof(h));
			th_ref_fill(buf + sizeof(h), len - sizeof(h),
				    key_of(me, seq));
			pcor_handle_t sh = th_send_copy(0, receiver, tag, buf,
							len);
			CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
		}
	}
	for (int i = 0; i < NDMA; i++) {
		if (dh[i])
			CHECK_OK(pcor_handle_test(dh[i], PCOR_BLOCK));
		CHECK_OK(pcor_dma_free(dma[i]));
	}
	return NULL;
}

typedef struct slot {
	pcor_handle_t h;
	pcor_msginfo_t info;
	uint8_t buf[MAX_LEN];
} slot_t;

static void post(slot_t *s)
{
	CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG,
				s->buf, MAX_LEN, &s->info, &s->h));
}

int main(void)
{
	th_ref_init(MAX_LEN);
	CHECK_OK(pcor_init(NULL, NULL));
	receiver = pcor_self_thid();
	th_barrier_init(&start, NSENDERS + 1);
	for (int i = 0; i < NSENDERS; i++)
		CHECK_OK(pcor_thread_create(sender_fn, (void *)(intptr_t)i,
					    &thids[i]));

	/* A window of posted receives, completed in the order posted. */
	static slot_t win[WINDOW];
	for (int i = 0; i < WINDOW; i++)
		post(&win[i]);
	th_barrier_wait(&start);
	uint32_t next[NSENDERS] = {0};
	for (uint32_t n = 0; n < TOTAL; n++) {
		slot_t *s = &win[n % WINDOW];
		CHECK_OK(pcor_handle_test(s->h, PCOR_BLOCK));
		hdr_t h;
		CHECK(s->info.size >= sizeof(h));
		memcpy(&h, s->buf, sizeof(h));
		CHECK(h.sender < NSENDERS);
		if (h.seq != next[h.sender]) {
			fprintf(stderr, "sender %u: got seq %u, expected %u\n",
				h.sender, h.seq, next[h.sender]);
			CHECK(!"a message overtook another of its sender");
		}
		next[h.sender]++;
		CHECK(s->info.pid == 0);
		CHECK(s->info.thid == thids[h.sender]);
		CHECK(s->info.tag == (int)(h.seq % 5));
		CHECK(s->info.size == len_of(h.sender, h.seq));
		CHECK_REF(s->buf + sizeof(h), s->info.size - sizeof(h),
			  key_of(h.sender, h.seq));
		if (n + WINDOW < TOTAL)
			post(s);
	}
	for (int i = 0; i < NSENDERS; i++) {
		CHECK(next[i] == PER_SENDER);
		CHECK_OK(pcor_thread_join(thids[i], NULL));
	}
	/* Nothing more arrived than was sent. */
	slot_t extra;
	post(&extra);
	CHECK_RC(pcor_handle_test(extra.h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	pcor_handle_t sh;
	CHECK_OK(pcor_send_copy(0, receiver, 99, "x", 1, &sh));
	CHECK_OK(pcor_handle_test(sh, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(extra.h, PCOR_BLOCK));
	CHECK(extra.info.thid == receiver && extra.info.tag == 99);

	pthread_barrier_destroy(&start);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	return 0;
}
