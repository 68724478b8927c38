/*
 * mq_oom -- a match queue whose hash index cannot get memory drops the
 * index and keeps matching correctly by scanning (oldest first, per key
 * and with wildcards), then rebuilds the index once it has drained.
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc: every malloc and calloc
 * of this program and of the static internal library (the compiler may
 * turn uthash's malloc+memset into calloc) goes through the wrappers,
 * which fail while fail_malloc is set.
 */
#include "frag/frag.h"

#include "../common.h"

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

static _Thread_local bool fail_malloc;
static size_t failed;

void *__wrap_malloc(size_t size)
{
	if (fail_malloc) {
		failed++;
		return NULL;
	}
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (fail_malloc) {
		failed++;
		return NULL;
	}
	return __real_calloc(n, size);
}

#define ME 2
#define NKEYS 500 /* enough distinct keys that the index must grow */

static pcori_mcb_pool_t pool;

static pcori_mcb_t *arrive(pcori_mq_t *mq, int thid, int tag, uint32_t seq)
{
	pcori_mcb_t *m = pcori_mcb_alloc(&pool);
	CHECK(m != NULL);
	m->hent.key = (pcori_mkey_t){0, thid, ME, tag, 0};
	m->seq = seq;
	pcori_lock(&mq->lock);
	pcori_mq_add_unexp(mq, m);
	pcori_unlock(&mq->lock);
	return m;
}

static uint32_t take(pcori_mq_t *mq, int pid, int thid, int tag)
{
	pcori_req_t r;
	memset(&r, 0, sizeof(r));
	r.pid = pid;
	r.thid = thid;
	r.tag = tag;
	pcori_lock(&mq->lock);
	pcori_mcb_t *m = pcori_mq_take_unexp(mq, &r);
	pcori_unlock(&mq->lock);
	CHECK(m != NULL);
	uint32_t seq = m->seq;
	pcori_mcb_free(&pool, m);
	return seq;
}

int main(void)
{
	CHECK_OK(pcori_mcb_pool_init(&pool, 4 * NKEYS));
	pcori_mq_t mq;
	pcori_mq_init(&mq, ME);
	CHECK(mq.index_ok);

	/* Two messages per key; the index cannot grow past its first
	 * buckets. */
	fail_malloc = true;
	uint32_t seq = 0;
	for (int round = 0; round < 2; round++)
		for (int k = 0; k < NKEYS; k++)
			arrive(&mq, k % 7, k, seq++);
	fail_malloc = false;
	CHECK(failed > 0);
	CHECK(!mq.index_ok);
	CHECK(mq.nunexp == 2 * NKEYS);

	/* Matching stays right: every key's older message first, whether
	 * asked for exactly or by wildcard on the thread. */
	for (int k = NKEYS - 1; k >= 0; k--) {
		uint32_t s = k % 2 ? take(&mq, 0, k % 7, k)
				   : take(&mq, PCOR_ANY_PID, PCOR_ANY_THID, k);
		CHECK(s == (uint32_t)k);
	}
	/* New arrivals meanwhile are not indexed, but found. */
	pcori_mcb_t *late = arrive(&mq, 3, 3, seq);
	CHECK(!(late->flags & PCORI_MCB_INDEXED));
	CHECK(take(&mq, 0, 3, 3) == (uint32_t)(NKEYS + 3));
	CHECK(take(&mq, 0, 3, 3) == seq);
	/* The rest in arrival order. */
	for (int k = 0; k < NKEYS; k++) {
		if (k == 3)
			continue;
		CHECK(take(&mq, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG) ==
		      (uint32_t)(NKEYS + k));
	}
	CHECK(mq.nunexp == 0);

	/* Drained: the index is back and used again. */
	CHECK(mq.index_ok);
	pcori_mcb_t *a = arrive(&mq, 4, 9, 1);
	pcori_mcb_t *b = arrive(&mq, 4, 9, 2);
	CHECK(a->flags & PCORI_MCB_INDEXED);
	CHECK(!(b->flags & PCORI_MCB_INDEXED));
	CHECK(take(&mq, 0, 4, 9) == 1);
	CHECK(b->flags & PCORI_MCB_INDEXED);
	CHECK(take(&mq, 0, 4, 9) == 2);

	pcori_mq_fini(&mq);
	CHECK(pcori_mcb_pool_avail(&pool) == 4 * NKEYS);
	pcori_mcb_pool_fini(&pool);
	return 0;
}
