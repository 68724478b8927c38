/*
 * mcb.c -- the fixed-capacity pool of message control blocks.
 *
 * Design notes: a Treiber stack of slot indexes.  The head word carries a
 * tag bumped on every pop so a slot popped and pushed back between a
 * reader's load and its CAS cannot be mistaken for the old head (ABA).
 * The MCBs themselves come from one calloc: pages are touched only as the
 * pool is actually used.
 */
#include "frag.h"

#define NIL 0xffffffffu

static inline uint64_t pack(uint32_t tag, uint32_t idx)
{
	return ((uint64_t)tag << 32) | idx;
}

int pcori_mcb_pool_init(pcori_mcb_pool_t *p, uint32_t cap)
{
	memset(p, 0, sizeof(*p));
	p->mcbs = calloc(cap, sizeof(pcori_mcb_t));
	p->next = calloc(cap, sizeof(*p->next));
	if (!p->mcbs || !p->next) {
		pcori_mcb_pool_fini(p);
		return PCOR_ERR_NOMEM;
	}
	p->cap = cap;
	for (uint32_t i = 0; i < cap; i++)
		atomic_init(&p->next[i], i + 1 < cap ? i + 1 : NIL);
	atomic_init(&p->head, pack(0, cap ? 0 : NIL));
	atomic_init(&p->avail, cap);
	return PCOR_OK;
}

void pcori_mcb_pool_fini(pcori_mcb_pool_t *p)
{
	free(p->mcbs);
	free((void *)p->next);
	memset(p, 0, sizeof(*p));
}

pcori_mcb_t *pcori_mcb_alloc(pcori_mcb_pool_t *p)
{
	uint64_t h = atomic_load_explicit(&p->head, memory_order_acquire);
	for (;;) {
		uint32_t idx = (uint32_t)h;
		if (idx == NIL)
			return NULL;
		uint32_t nx = atomic_load_explicit(&p->next[idx],
						   memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(
			    &p->head, &h, pack((uint32_t)(h >> 32) + 1, nx),
			    memory_order_acquire, memory_order_acquire))
			break;
	}
	atomic_fetch_sub_explicit(&p->avail, 1, memory_order_relaxed);
	pcori_mcb_t *m = &p->mcbs[(uint32_t)h];
	m->index = (uint32_t)h;
	m->flags = 0;
	m->data = NULL;
	m->sreq = NULL;
	m->size = 0;
	m->seq = 0;
	m->rreq = NULL;
	m->origin = NULL;
	atomic_store_explicit(&m->mstate, 0, memory_order_relaxed);
	pcori_list_init(&m->arrival);
	pcori_list_init(&m->chain);
	return m;
}

void pcori_mcb_free(pcori_mcb_pool_t *p, pcori_mcb_t *m)
{
	uint32_t idx = (uint32_t)(m - p->mcbs);
	PCORI_ASSERT(idx < p->cap);
	uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
	do {
		atomic_store_explicit(&p->next[idx], (uint32_t)h,
				      memory_order_relaxed);
	} while (!atomic_compare_exchange_weak_explicit(
		&p->head, &h, pack((uint32_t)(h >> 32), idx),
		memory_order_release, memory_order_relaxed));
	atomic_fetch_add_explicit(&p->avail, 1, memory_order_relaxed);
	/* seq_cst pairs with the waiter's increment in pcori_mcb_pool_wait. */
	if (atomic_load(&p->waiters)) {
		atomic_fetch_add(&p->epoch, 1);
		pcori_futex_wake(&p->epoch, INT_MAX);
	}
}

uint32_t pcori_mcb_pool_wait_begin(pcori_mcb_pool_t *p)
{
	atomic_fetch_add(&p->waiters, 1);
	return atomic_load(&p->epoch);
}

void pcori_mcb_pool_wait_end(pcori_mcb_pool_t *p)
{
	atomic_fetch_sub(&p->waiters, 1);
}

int pcori_mcb_pool_sleep(pcori_mcb_pool_t *p, uint32_t *epoch,
			 int64_t timeout_ns)
{
	int rc = pcori_futex_wait(&p->epoch, *epoch, timeout_ns);
	*epoch = atomic_load(&p->epoch);
	return rc;
}
