/*
 * mq -- the per-destination-thread match queues: posted receives in post
 * order, unexpected messages in arrival order, the hash index for fully
 * specified receives (oldest first, the heir taking over the entry),
 * context separation and unposting.
 */
#include "frag/frag.h"

#include "../common.h"

#define ME 3 /* the destination thread id of the queue under test */

static pcori_mcb_pool_t pool;

/* A receive pattern (only the fields matching reads). */
static void pattern(pcori_req_t *r, int pid, int thid, int tag, uint32_t ctx)
{
	memset(r, 0, sizeof(*r));
	pcori_list_init(&r->link);
	r->pid = pid;
	r->thid = thid;
	r->tag = tag;
	r->ctx = ctx;
}

/* Queue an unexpected message from <pid, thid> with tag, numbered seq. */
static pcori_mcb_t *arrive(pcori_mq_t *mq, int pid, int thid, int tag,
			   uint32_t ctx, uint32_t seq)
{
	pcori_mcb_t *m = pcori_mcb_alloc(&pool);
	CHECK(m != NULL);
	m->hent.key = (pcori_mkey_t){pid, thid, ME, tag, ctx};
	m->seq = seq;
	pcori_lock(&mq->lock);
	pcori_mq_add_unexp(mq, m);
	pcori_unlock(&mq->lock);
	return m;
}

/* Take the message a receive of this pattern matches; NULL if none. */
static pcori_mcb_t *take(pcori_mq_t *mq, int pid, int thid, int tag,
			 uint32_t ctx)
{
	pcori_req_t r;
	pattern(&r, pid, thid, tag, ctx);
	pcori_lock(&mq->lock);
	pcori_mcb_t *m = pcori_mq_take_unexp(mq, &r);
	pcori_unlock(&mq->lock);
	if (m) {
		/* Out of every list: nothing may still point at it. */
		CHECK(pcori_list_empty(&m->arrival));
		CHECK(pcori_list_empty(&m->chain));
		CHECK(!(m->flags & PCORI_MCB_INDEXED));
	}
	return m;
}

/* Take and check the sequence number, then recycle. */
static void take_seq(pcori_mq_t *mq, int pid, int thid, int tag,
		     uint32_t ctx, uint32_t seq)
{
	pcori_mcb_t *m = take(mq, pid, thid, tag, ctx);
	CHECK(m != NULL);
	if (m->seq != seq) {
		fprintf(stderr, "took seq %u, expected %u\n", m->seq, seq);
		CHECK(m->seq == seq);
	}
	pcori_mcb_free(&pool, m);
}

static void test_posted(void)
{
	pcori_mq_t mq;
	pcori_mq_init(&mq, ME);
	pcori_req_t r[6];
	pattern(&r[0], 0, 1, 5, 0);                         /* exact */
	pattern(&r[1], PCOR_ANY_PID, PCOR_ANY_THID, 5, 0);  /* any source */
	pattern(&r[2], 0, PCOR_ANY_THID, PCOR_ANY_TAG, 0);  /* any thread */
	pattern(&r[3], PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 0);
	pattern(&r[4], PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 1);
	pattern(&r[5], 0, 1, 5, 0); /* same as r[0], posted later */
	pcori_lock(&mq.lock);
	for (int i = 0; i < 6; i++)
		pcori_mq_post(&mq, &r[i]);
	CHECK(mq.nposted == 6);

	pcori_mkey_t k15 = {0, 1, ME, 5, 0};
	pcori_mkey_t k27 = {0, 2, ME, 7, 0};
	pcori_mkey_t k15c1 = {0, 1, ME, 5, 1};
	pcori_mkey_t k15c2 = {0, 1, ME, 5, 2};
	/* Oldest accepting receive first, in post order. */
	CHECK(pcori_mq_take_posted(&mq, &k15) == &r[0]);
	CHECK(pcori_mq_take_posted(&mq, &k15) == &r[1]);
	CHECK(pcori_mq_take_posted(&mq, &k27) == &r[2]);
	/* Contexts are separate: ctx 1 only matches r[4]. */
	CHECK(pcori_mq_take_posted(&mq, &k15c1) == &r[4]);
	CHECK(pcori_mq_take_posted(&mq, &k15c2) == NULL);
	CHECK(pcori_mq_take_posted(&mq, &k15c1) == NULL);
	/* Unpost the wildcard: the exact one behind it is next. */
	CHECK(pcori_mq_unpost(&mq, &r[3]));
	CHECK(!pcori_mq_unpost(&mq, &r[3]));
	CHECK(!pcori_mq_unpost(&mq, &r[0])); /* already taken */
	CHECK(pcori_mq_take_posted(&mq, &k27) == NULL);
	CHECK(mq.nposted == 1);
	CHECK(pcori_mq_take_posted(&mq, &k15) == &r[5]);
	CHECK(mq.nposted == 0);
	CHECK(pcori_list_empty(&mq.posted));
	CHECK(pcori_mq_take_posted(&mq, &k15) == NULL);
	pcori_unlock(&mq.lock);
	pcori_mq_fini(&mq);
}

static void test_arrival_order(void)
{
	pcori_mq_t mq;
	pcori_mq_init(&mq, ME);
	/* Interleaved senders and tags, numbered in arrival order. */
	for (uint32_t s = 0; s < 30; s++)
		arrive(&mq, 0, (int)(s % 3), (int)(s % 5), 0, s);
	CHECK(mq.nunexp == 30);
	/* Wildcards on tag: messages of thread 1 in arrival order. */
	for (uint32_t s = 1; s < 30; s += 3)
		take_seq(&mq, 0, 1, PCOR_ANY_TAG, 0, s);
	/* Any source with tag 0: s % 5 == 0 and s % 3 != 1. */
	for (uint32_t s = 0; s < 30; s += 5)
		if (s % 3 != 1)
			take_seq(&mq, PCOR_ANY_PID, PCOR_ANY_THID, 0, 0, s);
	/* Everything else, oldest first. */
	for (uint32_t s = 0; s < 30; s++)
		if (s % 3 != 1 && s % 5 != 0)
			take_seq(&mq, PCOR_ANY_PID, PCOR_ANY_THID,
				 PCOR_ANY_TAG, 0, s);
	CHECK(mq.nunexp == 0);
	CHECK(take(&mq, PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG, 0) == NULL);
	pcori_mq_fini(&mq);
}

/*
 * The hash finds the oldest message of a key; when the oldest leaves
 * (taken by either search), the next of that key takes its entry.
 */
static void test_index(void)
{
	pcori_mq_t mq;
	pcori_mq_init(&mq, ME);
	pcori_mcb_t *a0 = arrive(&mq, 0, 1, 5, 0, 0);
	arrive(&mq, 0, 2, 5, 0, 1);
	pcori_mcb_t *a2 = arrive(&mq, 0, 1, 5, 0, 2);
	arrive(&mq, 0, 1, 6, 0, 3);
	pcori_mcb_t *a4 = arrive(&mq, 0, 1, 5, 0, 4);
	arrive(&mq, 0, 1, 5, 1, 5); /* same tuple, other context */
	arrive(&mq, 0, 1, 5, 0, 6);
	/* Only the oldest of a key is in the index; the rest are chained. */
	CHECK(a0->flags & PCORI_MCB_INDEXED);
	CHECK(!(a2->flags & PCORI_MCB_INDEXED));
	CHECK(!(a4->flags & PCORI_MCB_INDEXED));

	take_seq(&mq, 0, 1, 5, 0, 0); /* by hash: the oldest */
	CHECK(a2->flags & PCORI_MCB_INDEXED); /* the heir */
	take_seq(&mq, PCOR_ANY_PID, PCOR_ANY_THID, 5, 0, 1); /* by scan */
	/* The scan takes the indexed one: its heir must take over. */
	take_seq(&mq, 0, PCOR_ANY_THID, 5, 0, 2);
	CHECK(a4->flags & PCORI_MCB_INDEXED);
	take_seq(&mq, 0, 1, 5, 1, 5); /* the other context */
	CHECK(take(&mq, 0, 1, 5, 1) == NULL);
	take_seq(&mq, 0, 1, 5, 0, 4);
	take_seq(&mq, 0, 1, 5, 0, 6);
	CHECK(take(&mq, 0, 1, 5, 0) == NULL);
	CHECK(take(&mq, 0, 2, 5, 0) == NULL);
	take_seq(&mq, 0, 1, 6, 0, 3);
	CHECK(mq.nunexp == 0);

	/* A non-oldest message leaving by scan leaves the chain intact. */
	arrive(&mq, 0, 1, 5, 0, 10);
	arrive(&mq, 0, 1, 8, 0, 11);
	arrive(&mq, 0, 1, 5, 0, 12);
	arrive(&mq, 0, 1, 5, 0, 13);
	pcori_mcb_t *m = take(&mq, 0, 1, 5, 0);
	CHECK(m && m->seq == 10);
	pcori_mcb_free(&pool, m);
	arrive(&mq, 0, 1, 5, 0, 14);
	/* Remove the middle of the chain directly, as a canceller would. */
	pcori_mcb_t *heir = NULL;
	pcori_list_t *pos;
	pcori_list_foreach(pos, &mq.unexp)
	{
		pcori_mcb_t *x = PCORI_CONTAINER_OF(pos, pcori_mcb_t, arrival);
		if (x->seq == 13)
			heir = x;
	}
	CHECK(heir != NULL);
	pcori_lock(&mq.lock);
	pcori_mq_remove_unexp(&mq, heir);
	pcori_unlock(&mq.lock);
	pcori_mcb_free(&pool, heir);
	take_seq(&mq, 0, 1, 5, 0, 12);
	take_seq(&mq, 0, 1, 5, 0, 14);
	take_seq(&mq, 0, 1, 8, 0, 11);
	CHECK(mq.nunexp == 0);
	pcori_mq_fini(&mq);
}

/* Many messages of few keys: hash and scan agree on every take. */
static void test_many(void)
{
	enum { N = 3000, NKEYS = 7 };
	pcori_mq_t mq;
	pcori_mq_init(&mq, ME);
	uint64_t rs = 42;
	/* next[k]: sequence numbers of key k still queued, oldest first. */
	static uint32_t q[NKEYS][N];
	size_t head[NKEYS] = {0}, tail[NKEYS] = {0};
	for (uint32_t s = 0; s < N; s++) {
		int k = (int)(th_rand(&rs) % NKEYS);
		arrive(&mq, 0, k % 3, k, 0, s);
		q[k][tail[k]++] = s;
	}
	for (uint32_t left = N; left > 0; left--) {
		int k;
		do
			k = (int)(th_rand(&rs) % NKEYS);
		while (head[k] == tail[k]);
		uint32_t want = q[k][head[k]++];
		if (th_rand(&rs) & 1)
			take_seq(&mq, 0, k % 3, k, 0, want); /* hash */
		else
			take_seq(&mq, PCOR_ANY_PID, k % 3, k, 0,
				 want); /* scan */
	}
	CHECK(mq.nunexp == 0);
	pcori_mq_fini(&mq);
}

int main(void)
{
	CHECK_OK(pcori_mcb_pool_init(&pool, 4096));
	test_posted();
	test_arrival_order();
	test_index();
	test_many();
	CHECK(pcori_mcb_pool_avail(&pool) == 4096);
	pcori_mcb_pool_fini(&pool);
	return 0;
}
