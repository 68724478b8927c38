/*
 * shm_cq.c -- the pcor-shm port's send completions.  sendv copies before
 * it returns but its caller holds protocol locks that tx_done takes, so
 * the completion is queued here and reported by progress (shm_rx.c).
 * Calls nothing else of the port.
 */
#include "shm_port.h"

/* Room for one completion, taken before the send (false: none left). */
bool shmp_cq_reserve(shm_port_t *p)
{
	if (atomic_fetch_add_explicit(&p->cq_used, 1, memory_order_relaxed) <
	    SHM_CQ_MAX)
		return true;
	atomic_fetch_sub_explicit(&p->cq_used, 1, memory_order_relaxed);
	return false;
}

void shmp_cq_unreserve(shm_port_t *p)
{
	atomic_fetch_sub_explicit(&p->cq_used, 1, memory_order_relaxed);
}

/* Queue a completion whose room was reserved; wake our own progress. */
void shmp_cq_push(shm_port_t *p, pcori_ctx_t *ctx, int status)
{
	pcori_lock(&p->cq_lock);
	PCORI_ASSERT(p->ncq < SHM_CQ_MAX);
	p->cq[p->ncq].ctx = ctx;
	p->cq[p->ncq].status = status;
	p->ncq++;
	/* Counted under the lock: a drain never takes more than it sees. */
	atomic_fetch_add_explicit(&p->cq_ready, 1, memory_order_seq_cst);
	pcori_unlock(&p->cq_lock);
	/* The locked add above is the fence. */
	wake_if_sleeping(p->hdr, false);
}

/* Report what was queued: from progress, holding no protocol lock. */
int shmp_cq_drain(shm_port_t *p)
{
	if (!atomic_load_explicit(&p->cq_ready, memory_order_acquire))
		return 0;
	pcori_lock(&p->cq_lock);
	shm_cqe_t *v = p->cq;
	size_t n = p->ncq;
	p->cq = p->cq_spare;
	p->cq_spare = v;
	p->ncq = 0;
	atomic_fetch_sub_explicit(&p->cq_ready, (uint32_t)n,
				  memory_order_relaxed);
	pcori_unlock(&p->cq_lock);
	for (size_t i = 0; i < n; i++)
		pcori_port_tx_done(&p->base, v[i].ctx, v[i].status);
	atomic_fetch_sub_explicit(&p->cq_used, (uint32_t)n,
				  memory_order_relaxed);
	return (int)n;
}
