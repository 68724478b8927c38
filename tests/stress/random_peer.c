/*
 * random_peer -- 1,000 pcor threads; each receives one message from a
 * peer chosen at random (seeded), with a fully specified receive, and
 * sends to every thread that chose it.  Sizes, send and receive kinds
 * and whether the receive is posted before the sends start are random
 * too; every message's content is verified and each arrives once.
 */
#include "../common.h"

#define NTHREADS 1000
#define SEED 20240611u
#define MAX_LEN 65536

static struct peer {
	int thid;
	int from;       /* index of the peer this thread receives from */
	int *to;        /* indexes of the threads that chose this one */
	int nto;
	size_t len;     /* of the message this thread receives */
	bool post_first, recv_dma, send_dma;
} P[NTHREADS];

static pthread_barrier_t start;
static _Atomic int received;

static uint64_t key_of(int to)
{
	return (uint64_t)to * 7919u + SEED;
}

static void *member(void *arg)
{
	const int me = (int)(intptr_t)arg;
	struct peer *p = &P[me];
	pcor_msginfo_t info = {-1, -1, -1, 0};
	pcor_handle_t rh = 0;
	void *dbuf = NULL;
	uint8_t *cbuf = NULL;

	/* The table of thread ids is complete once the barrier opens. */
	th_barrier_wait(&start);
	const int from_thid = P[p->from].thid;
	if (p->recv_dma) {
		if (p->post_first)
			CHECK_OK(pcor_recv_dma(0, from_thid, me, &dbuf, &info,
					       &rh));
	} else {
		cbuf = malloc(p->len + 1);
		CHECK(cbuf != NULL);
		cbuf[p->len] = 0x5a;
		if (p->post_first)
			CHECK_OK(pcor_recv_copy(0, from_thid, me, cbuf, p->len,
						&info, &rh));
	}

	pcor_handle_t *sh = calloc((size_t)p->nto + 1, sizeof(*sh));
	void **sbuf = calloc((size_t)p->nto + 1, sizeof(*sbuf));
	CHECK(sh && sbuf);
	for (int k = 0; k < p->nto; k++) {
		int to = p->to[k];
		size_t len = P[to].len;
		if (p->send_dma) {
			CHECK_OK(pcor_dma_alloc(len, &sbuf[k]));
			th_ref_fill(sbuf[k], len, key_of(to));
			int rc;
			for (int tries = 0;; tries++) {
				CHECK(tries < TH_AGAIN_TRIES);
				rc = pcor_send_dma(0, P[to].thid, to, sbuf[k],
						   len, 0, &sh[k]);
				if (rc != PCOR_ERR_AGAIN)
					break;
			}
			CHECK_OK(rc);
		} else {
			uint8_t *b = malloc(len + 1);
			CHECK(b != NULL);
			th_ref_fill(b, len, key_of(to));
			sh[k] = th_send_copy(0, P[to].thid, to, b, len);
			free(b);
			CHECK_OK(pcor_handle_test(sh[k], PCOR_BLOCK));
		}
	}

	if (!p->post_first) {
		if (p->recv_dma)
			CHECK_OK(pcor_recv_dma(0, from_thid, me, &dbuf, &info,
					       &rh));
		else
			CHECK_OK(pcor_recv_copy(0, from_thid, me, cbuf, p->len,
						&info, &rh));
	}
	CHECK_OK(pcor_handle_test(rh, PCOR_BLOCK));
	CHECK(info.pid == 0 && info.thid == from_thid && info.tag == me);
	CHECK(info.size == p->len);
	if (p->recv_dma) {
		CHECK((dbuf == NULL) == (p->len == 0));
		CHECK_REF(dbuf, p->len, key_of(me));
		CHECK_OK(pcor_dma_free(dbuf));
	} else {
		CHECK_REF(cbuf, p->len, key_of(me));
		CHECK(cbuf[p->len] == 0x5a);
		free(cbuf);
	}
	atomic_fetch_add(&received, 1);

	for (int k = 0; k < p->nto && p->send_dma; k++) {
		CHECK_OK(pcor_handle_test(sh[k], PCOR_BLOCK));
		CHECK_REF(sbuf[k], P[p->to[k]].len, key_of(p->to[k]));
		CHECK_OK(pcor_dma_free(sbuf[k]));
	}
	free(sh);
	free(sbuf);
	return NULL;
}

int main(void)
{
	uint64_t t0 = th_now_ns();
	uint64_t rs = SEED;
	int chosen[NTHREADS] = {0};
	for (int i = 0; i < NTHREADS; i++) {
		int f = (int)(th_rand(&rs) % (NTHREADS - 1));
		P[i].from = f >= i ? f + 1 : f; /* anyone but itself */
		chosen[P[i].from]++;
		uint64_t r = th_rand(&rs);
		P[i].len = r % 11 == 0 ? 0 : (size_t)(th_rand(&rs) % MAX_LEN);
		P[i].post_first = r & 1;
		P[i].recv_dma = r & 2;
		P[i].send_dma = r & 4;
	}
	for (int i = 0; i < NTHREADS; i++) {
		P[i].to = malloc(sizeof(int) * (size_t)(chosen[i] + 1));
		CHECK(P[i].to != NULL);
	}
	for (int i = 0; i < NTHREADS; i++)
		P[P[i].from].to[P[P[i].from].nto++] = i;

	th_ref_init(MAX_LEN);
	CHECK_OK(pcor_init(NULL, NULL));
	CHECK(pcor_max_threads() > NTHREADS);
	th_barrier_init(&start, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++)
		CHECK_OK(pcor_thread_create(member, (void *)(intptr_t)i,
					    &P[i].thid));
	th_barrier_wait(&start);
	for (int i = 0; i < NTHREADS; i++)
		CHECK_OK(pcor_thread_join(P[i].thid, NULL));
	CHECK(atomic_load(&received) == NTHREADS);
	pthread_barrier_destroy(&start);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	for (int i = 0; i < NTHREADS; i++)
		free(P[i].to);
	printf("%d threads, %.2f s\n", NTHREADS,
	       (double)(th_now_ns() - t0) / 1e9);
	return 0;
}
