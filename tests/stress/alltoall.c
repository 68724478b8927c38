/*
 * alltoall -- 256 pcor threads each send one message to every other and
 * receive one from every other, content verified, three rounds over
 * (one tag per round; a fast thread's next round overlaps a slow one's
 * current round, and the tags keep them apart).  Half of the threads
 * post their receives (recvDMA) before sending -- in the first round
 * before anyone sends -- the other half receive (recvCopy) only after
 * sending, so messages take the posted path and the unexpected path; a
 * third of the sends are sendDMA, which stay parked while unexpected.
 *
 * The MCB pool is sized for every message to be unexpected at once, so
 * back-pressure (tested elsewhere) cannot stall all senders together.
 */
#include "../common.h"

#define NTHREADS 256
#define ROUNDS 3
#define MAX_LEN 16384

static int thids[NTHREADS];
static int index_of[65536]; /* thid -> index */
static pthread_barrier_t posted;

static uint64_t key_of(int round, int from, int to)
{
	return ((uint64_t)round * NTHREADS + (uint64_t)from) * NTHREADS +
	       (uint64_t)to;
}

static size_t len_of(int round, int from, int to)
{
	uint64_t r = th_mix(key_of(round, from, to));
	return r % 13 == 0 ? MAX_LEN - (size_t)(r % 100) : (size_t)(r % 600);
}

static void check_one(int round, int me, const pcor_msginfo_t *info,
		      const void *data, bool seen[NTHREADS])
{
	CHECK(info->pid == 0 && info->tag == round);
	CHECK(info->thid >= 0 && info->thid < 65536);
	int from = index_of[info->thid];
	CHECK(from >= 0 && from < NTHREADS && from != me);
	CHECK(!seen[from]); /* once from each */
	seen[from] = true;
	CHECK(info->size == len_of(round, from, me));
	CHECK_REF(data, info->size, key_of(round, from, me));
}

/* One round of one thread: send to all, receive from all. */
static void exchange(int me, int round)
{
	const bool post_first = (me & 1) == 0;
	bool seen[NTHREADS] = {false};
	pcor_handle_t rh[NTHREADS];
	void *rbuf[NTHREADS];
	pcor_msginfo_t rinfo[NTHREADS];
	pcor_handle_t sh[NTHREADS];
	void *sbuf[NTHREADS];

	if (post_first)
		for (int k = 0; k < NTHREADS - 1; k++)
			CHECK_OK(pcor_recv_dma(PCOR_ANY_PID, PCOR_ANY_THID,
					       round, &rbuf[k], &rinfo[k],
					       &rh[k]));
	/* Once only: all of the first round's receives are posted before
	 * any send, and the id table is complete.  Later rounds overlap. */
	if (round == 0)
		th_barrier_wait(&posted);

	uint8_t *copy = malloc(MAX_LEN);
	CHECK(copy != NULL);
	/* Everyone starts with a different peer, so no receiver is hit by
	 * all senders at once. */
	for (int k = 1; k < NTHREADS; k++) {
		int to = (me + k) % NTHREADS;
		size_t len = len_of(round, me, to);
		uint64_t key = key_of(round, me, to);
		sbuf[to] = NULL;
		if ((me + to + round) % 3 == 0) {
			CHECK_OK(pcor_dma_alloc(len, &sbuf[to]));
			th_ref_fill(sbuf[to], len, key);
			int rc;
			for (int tries = 0;; tries++) {
				CHECK(tries < TH_AGAIN_TRIES);
				rc = pcor_send_dma(0, thids[to], round,
						   sbuf[to], len, 0, &sh[to]);
				if (rc != PCOR_ERR_AGAIN)
					break;
			}
			CHECK_OK(rc);
		} else {
			th_ref_fill(copy, len, key);
			sh[to] = th_send_copy(0, thids[to], round, copy, len);
			CHECK_OK(pcor_handle_test(sh[to], PCOR_BLOCK));
		}
	}

	if (post_first) {
		for (int k = 0; k < NTHREADS - 1; k++) {
			CHECK_OK(pcor_handle_test(rh[k], PCOR_BLOCK));
			check_one(round, me, &rinfo[k], rbuf[k], seen);
			CHECK_OK(pcor_dma_free(rbuf[k]));
		}
	} else {
		for (int k = 0; k < NTHREADS - 1; k++) {
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
						round, copy, MAX_LEN, &info,
						&h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			check_one(round, me, &info, copy, seen);
		}
	}
	for (int k = 0; k < NTHREADS; k++)
		CHECK(seen[k] == (k != me));

	/* Parked sendDMAs completed once their receivers took them. */
	for (int to = 0; to < NTHREADS; to++) {
		if (to == me || !sbuf[to])
			continue;
		CHECK_OK(pcor_handle_test(sh[to], PCOR_BLOCK));
		CHECK_REF(sbuf[to], len_of(round, me, to),
			  key_of(round, me, to));
		CHECK_OK(pcor_dma_free(sbuf[to]));
	}
	free(copy);
}

static void *member(void *arg)
{
	const int me = (int)(intptr_t)arg;
	for (int round = 0; round < ROUNDS; round++)
		exchange(me, round);
	return NULL;
}

int main(void)
{
	uint64_t t0 = th_now_ns();
	th_ref_init(MAX_LEN);
	char pool[32];
	snprintf(pool, sizeof(pool), "%d", ROUNDS * NTHREADS * NTHREADS);
	CHECK(setenv("PCOR_MCB_POOL", pool, 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	CHECK(pcor_max_threads() > NTHREADS);
	for (size_t i = 0; i < TH_LEN(index_of); i++)
		index_of[i] = -1;
	th_barrier_init(&posted, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++) {
		CHECK_OK(pcor_thread_create(member, (void *)(intptr_t)i,
					    &thids[i]));
		CHECK(thids[i] >= 0 && thids[i] < 65536);
		CHECK(index_of[thids[i]] == -1);
		index_of[thids[i]] = i;
	}
	/* The id table is complete before anyone reads it. */
	th_barrier_wait(&posted);
	for (int i = 0; i < NTHREADS; i++)
		CHECK_OK(pcor_thread_join(thids[i], NULL));
	pthread_barrier_destroy(&posted);
	CHECK_OK(pcor_finalize());
	th_ref_fini();
	printf("%d threads, %d messages, %.2f s\n", NTHREADS,
	       ROUNDS * NTHREADS * (NTHREADS - 1),
	       (double)(th_now_ns() - t0) / 1e9);
	return 0;
}
