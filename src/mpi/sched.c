/*
 * sched.c -- collective schedules (see mpii.h's design notes).
 *
 * A schedule is a list of steps built before it runs.  Sends and receives
 * of one round are posted together (receives first, as the builders list
 * them); a fence waits for all of them; local steps run when reached.
 * Progress never blocks unless asked to, so a nonblocking collective
 * advances inside MPI_Test and a blocking one is the same schedule run
 * to its end.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

/* Collective tag: sequence number of the collective, then the round. */
#define SEQ_BITS 20

void pcori_mpi_sched_init(sched_t *s, comm_t *c)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	uint32_t seq = atomic_fetch_add(&c->coll_seq, 1);
	s->tagbase = (seq & ((1u << SEQ_BITS) - 1)) << 8;
}

static sstep_t *add(sched_t *s, int kind)
{
	if (s->n == s->cap) {
		int n = s->cap ? 2 * s->cap : 16;
		sstep_t *st = realloc(s->steps, n * sizeof(*st));
		if (!st) {
			s->oom = true;
			return NULL;
		}
		s->steps = st;
		s->cap = n;
	}
	sstep_t *st = &s->steps[s->n++];
	memset(st, 0, sizeof(*st));
	st->kind = (uint8_t)kind;
	st->round = s->round;
	return st;
}

void *pcori_mpi_sched_alloc(sched_t *s, size_t len)
{
	if (s->nmem == s->memcap) {
		int n = s->memcap ? 2 * s->memcap : 4;
		void **m = realloc(s->mem, n * sizeof(*m));
		if (!m) {
			s->oom = true;
			return NULL;
		}
		s->mem = m;
		s->memcap = n;
	}
	void *p = malloc(len ? len : 1);
	if (!p) {
		s->oom = true;
		return NULL;
	}
	s->mem[s->nmem++] = p;
	return p;
}

static void send_step(sched_t *s, int peer, const void *buf, size_t len,
		      bool hold)
{
	sstep_t *st = add(s, S_SEND);
	if (st) {
		st->peer = peer;
		st->src = buf;
		st->len = len;
		st->hold = hold;
	}
}

void pcori_mpi_sched_send(sched_t *s, int peer, const void *buf, size_t len)
{
	send_step(s, peer, buf, len, false);
}

void pcori_mpi_sched_send_hold(sched_t *s, int peer, const void *buf,
			       size_t len)
{
	send_step(s, peer, buf, len, true);
}

void pcori_mpi_sched_recv(sched_t *s, int peer, void *buf, size_t len)
{
	sstep_t *st = add(s, S_RECV);
	if (st) {
		st->peer = peer;
		st->dst = buf;
		st->len = len;
	}
}

void pcori_mpi_sched_fence(sched_t *s)
{
	/* Two fences in a row are one. */
	if (s->n && s->steps[s->n - 1].kind == S_FENCE)
		return;
	add(s, S_FENCE);
}

unsigned pcori_mpi_sched_stage(sched_t *s, unsigned n)
{
	unsigned first = s->next_round;
	s->next_round += n;
	s->round = (uint8_t)first;
	return first;
}

void pcori_mpi_sched_copy(sched_t *s, const void *src, void *dst, size_t len)
{
	if (src == dst || !len)
		return;
	sstep_t *st = add(s, S_COPY);
	if (st) {
		st->src = src;
		st->dst = dst;
		st->len = len;
	}
}

void pcori_mpi_sched_reduce(sched_t *s, MPI_Op op, MPI_Datatype t,
			    const void *in, void *inout, int count)
{
	sstep_t *st = add(s, S_REDUCE);
	if (st) {
		st->op = op;
		st->type = t;
		st->src = in;
		st->dst = inout;
		st->count = count;
	}
}

void pcori_mpi_sched_unpack(sched_t *s, const void *in, size_t len, void *buf,
			    int count, MPI_Datatype t)
{
	if (s->npost == s->postcap) {
		int n = s->postcap ? 2 * s->postcap : 4;
		sstep_t *p = realloc(s->post, n * sizeof(*p));
		if (!p) {
			s->oom = true;
			return;
		}
		s->post = p;
		s->postcap = n;
	}
	sstep_t *st = &s->post[s->npost++];
	{
		st->src = in;
		st->len = len;
		st->dst = buf;
		st->count = count;
		st->type = t;
	}
}

static int push_handle(sched_t *s, pcor_handle_t h)
{
	if (s->nh == s->hcap) {
		int n = s->hcap ? 2 * s->hcap : 8;
		pcor_handle_t *p = realloc(s->h, n * sizeof(*p));
		if (!p)
			return MPI_ERR_OTHER;
		s->h = p;
		s->hcap = n;
	}
	s->h[s->nh++] = h;
	return MPI_SUCCESS;
}

/* Wait for (or test) the round's handles; true when all are done. */
static bool round_done(sched_t *s, bool block)
{
	bool all = true;
	for (int i = 0; i < s->nh; i++) {
		if (s->h[i] < 0)
			continue;
		int rc = pcor_handle_test(s->h[i],
					  block ? PCOR_BLOCK : PCOR_NONBLOCK);
		if (rc == PCOR_INPROGRESS) {
			all = false;
			continue;
		}
		s->h[i] = -1;
		if (rc && !s->err)
			s->err = pcori_mpi_class(rc);
	}
	if (all)
		s->nh = 0;
	return all;
}

int pcori_mpi_sched_progress(sched_t *s, bool block)
{
	if (s->oom)
		s->err = MPI_ERR_OTHER;
	comm_t *c = s->c;
	while (s->pos <= s->n) {
		if (s->err) {
			/* Let what was posted finish before giving up. */
			round_done(s, true);
			return s->err;
		}
		if (s->pos == s->n || s->steps[s->pos].kind == S_FENCE) {
			if (!round_done(s, block))
				return -1;
			if (s->pos == s->n) {
				/* Done: the receive side's unpacks, once. */
				for (int i = 0; i < s->npost; i++)
					pcori_mpi_unpack(
					    s->post[i].src, s->post[i].len,
					    s->post[i].dst, s->post[i].count,
					    pcori_mpi_type(s->post[i].type));
				s->npost = 0;
				break;
			}
			s->pos++;
			continue;
		}
		sstep_t *st = &s->steps[s->pos];
		int tag = (int)(s->tagbase | st->round), rc = PCOR_OK;
		pcor_handle_t h;
		switch (st->kind) {
		case S_SEND:
			rc = (st->hold ? pcori_ctx_send_hold : pcori_ctx_send)(
			    c->pids[st->peer], c->coll_lane, tag,
			    c->ctx + CTX_COLL, st->src, st->len, &h);
			break;
		case S_RECV:
			rc = pcori_ctx_recv(
			    c->coll_lane, c->pids[st->peer], PCOR_ANY_THID, tag,
			    c->ctx + CTX_COLL, st->dst, st->len, NULL, &h);
			break;
		case S_COPY:
			memmove(st->dst, st->src, st->len);
			break;
		case S_REDUCE:
			s->err = pcori_mpi_op_apply(st->op, st->type, st->src,
						    st->dst, st->count);
			break;
		}
		if (rc == PCOR_ERR_AGAIN) {
			/* The peer's pool is full: retry this step later. */
			if (!block)
				return -1;
			sched_yield();
			continue;
		}
		if (rc)
			s->err = pcori_mpi_class(rc);
		else if (st->kind == S_SEND || st->kind == S_RECV)
			s->err = push_handle(s, h);
		s->pos++;
	}
	return MPI_SUCCESS;
}

void pcori_mpi_sched_fini(sched_t *s)
{
	for (int i = 0; i < s->nmem; i++)
		free(s->mem[i]);
	free(s->mem);
	free(s->steps);
	free(s->post);
	free(s->h);
	memset(s, 0, sizeof(*s));
}
