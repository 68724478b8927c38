/*
 * agent.h -- a pcor thread that sends on the main thread's behalf, one
 * command at a time, so a test can script who sends what in which order
 * and still have messages come from another thread id.  Hand-over of a
 * command and of its result goes through two pthread barriers.
 */
#ifndef PCOR_TEST_AGENT_H
#define PCOR_TEST_AGENT_H

#include "../common.h"

typedef enum th_agent_op {
	TH_SEND_COPY, /* malloc'd buffer, freed after the call */
	TH_SEND_DMA,  /* DMA buffer, stays the agent's: see buf */
	TH_SEND_HANDOVER,
	TH_QUIT,
} th_agent_op_t;

typedef struct th_agent {
	int thid;
	pthread_barrier_t go, done;
	/* the command */
	th_agent_op_t op;
	int pid, dst, tag;
	size_t len;
	uint64_t key;
	/* its result */
	int rc;
	pcor_handle_t h;
	void *buf; /* TH_SEND_DMA, TH_SEND_HANDOVER: the buffer sent */
} th_agent_t;

static void *th_agent_main(void *arg)
{
	th_agent_t *a = arg;
	for (;;) {
		th_barrier_wait(&a->go);
		if (a->op == TH_QUIT)
			break;
		void *buf = NULL;
		a->h = 0;
		if (a->op == TH_SEND_COPY) {
			buf = malloc(a->len ? a->len : 1);
			CHECK(buf != NULL);
			th_ref_fill(buf, a->len, a->key);
			a->rc = pcor_send_copy(a->pid, a->dst, a->tag, buf,
					       a->len, &a->h);
			free(buf);
			buf = NULL;
		} else {
			CHECK_OK(pcor_dma_alloc(a->len, &buf));
			th_ref_fill(buf, a->len, a->key);
			a->rc = pcor_send_dma(a->pid, a->dst, a->tag, buf,
					      a->len,
					      a->op == TH_SEND_HANDOVER
						      ? PCOR_SEND_HANDOVER
						      : 0,
					      &a->h);
		}
		a->buf = buf;
		th_barrier_wait(&a->done);
	}
	return NULL;
}

static inline void th_agent_start(th_agent_t *a)
{
	memset(a, 0, sizeof(*a));
	th_barrier_init(&a->go, 2);
	th_barrier_init(&a->done, 2);
	CHECK_OK(pcor_thread_create(th_agent_main, a, &a->thid));
}

static inline void th_agent_stop(th_agent_t *a)
{
	a->op = TH_QUIT;
	th_barrier_wait(&a->go);
	CHECK_OK(pcor_thread_join(a->thid, NULL));
	pthread_barrier_destroy(&a->go);
	pthread_barrier_destroy(&a->done);
}

/* Have the agent send; returns the status, the handle in a->h. */
static inline int th_agent_send(th_agent_t *a, th_agent_op_t op, int dst,
				int tag, size_t len, uint64_t key)
{
	a->op = op;
	a->pid = 0;
	a->dst = dst;
	a->tag = tag;
	a->len = len;
	a->key = key;
	th_barrier_wait(&a->go);
	th_barrier_wait(&a->done);
	return a->rc;
}

/* Send, expect success, and for copies and hand-overs the completion. */
static inline pcor_handle_t th_agent_send_ok(th_agent_t *a, th_agent_op_t op,
					     int dst, int tag, size_t len,
					     uint64_t key)
{
	CHECK_OK(th_agent_send(a, op, dst, tag, len, key));
	CHECK(a->h > 0);
	if (op != TH_SEND_DMA) {
		CHECK_OK(pcor_handle_test(a->h, PCOR_NONBLOCK));
		return 0;
	}
	return a->h;
}

#endif /* PCOR_TEST_AGENT_H */
