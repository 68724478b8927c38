/*
 * local.c -- the message layer's core and the same-process data path.
 *
 * Design notes
 *  - Short messages (PCORI_INBOX_DATA) to a thread that has a receive
 *    posted travel in its inbox (core.h): the receiver arms the inbox with
 *    its oldest posted receive, under its queue's lock; a sender claims
 *    the line with one CAS, writes the data and what came into it and
 *    publishes; the receiver's test, which spins on that same line,
 *    delivers into the user's buffer.  One line moves each way, and the
 *    sender touches neither the queue nor the receive's request, the
 *    receiver never the sender's.  Only the oldest posted receive is
 *    armed, so matching order is that of the queue; anything else (a long
 *    message, a hand-over, a message from another process) takes the
 *    armed receive out of the inbox first and completes it the usual way.
 *  - A send locks only its destination thread's match queue.  If a
 *    receive is posted, it is taken out under the lock and the data is
 *    copied after unlocking, straight from the sender's buffer into the
 *    receiver's: one copy, and a long copy never blocks other senders.
 *    Short messages (PCORI_LOCKED_DELIVER_MAX) are copied and completed
 *    before the unlock, so the receive's line is written in one burst.
 *  - Otherwise the message becomes an unexpected MCB: sendCopy keeps one
 *    copy (inline in the MCB when small, else in DMA memory, which a later
 *    recvDMA takes over without copying again); sendDMA parks a reference
 *    to the sender's buffer and its handle completes when the receiver
 *    copies the data out; a handed-over DMA buffer is simply passed on.
 *  - Memory for unexpected data is bounded by the MCB pool and
 *    PCOR_UNEXP_BYTES.  When either is exhausted the sender waits (up to
 *    PCOR_BACKPRESSURE_MS) and then returns PCOR_ERR_AGAIN: nothing sent is
 *    ever dropped.
 */
#include "msg.h"

/* Copies up to this size are made under the queue lock. */
#define PCORI_LOCKED_COPY_MAX (16u << 10)
/* Posted receives up to this size are also completed under it. */
#define PCORI_LOCKED_DELIVER_MAX 1024u

pcori_msg_t pcori_msg;

int pcori_msg_init(const pcori_config_t *cfg, int max_threads)
{
	memset(&pcori_msg, 0, sizeof(pcori_msg));
	pcori_msg.mqs = aligned_alloc(PCORI_CACHELINE,
				      sizeof(pcori_mq_t) * (size_t)max_threads);
	if (!pcori_msg.mqs)
		return PCOR_ERR_NOMEM;
	int rc = pcori_mcb_pool_init(&pcori_msg.pool, (uint32_t)cfg->mcb_pool);
	if (rc) {
		free(pcori_msg.mqs);
		return rc;
	}
	for (int i = 0; i < max_threads; i++)
		pcori_mq_init(&pcori_msg.mqs[i], i);
	pcori_msg.nmq = max_threads;
	pcori_msg.unexp_max = cfg->unexp_bytes;
	pcori_msg.backpressure_ns = cfg->backpressure_ms * 1000000;
	return PCOR_OK;
}

/* Bytes of pcor-held memory an MCB accounts for. */
static size_t held_bytes(const pcori_mcb_t *m)
{
	return (m->flags & PCORI_MCB_DMA_DATA) ? m->size : 0;
}

static bool from_pool(const pcori_mcb_t *m)
{
	const pcori_mcb_pool_t *p = &pcori_msg.pool;
	return m >= p->mcbs && m < p->mcbs + p->cap;
}

pcori_mcb_t *pcori_mcb_get_overflow(size_t bytes)
{
	size_t sz = (sizeof(pcori_mcb_t) + PCORI_CACHELINE - 1) &
		    ~(size_t)(PCORI_CACHELINE - 1);
	pcori_mcb_t *m = aligned_alloc(PCORI_CACHELINE, sz);
	if (!m)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->index = UINT32_MAX;
	pcori_list_init(&m->arrival);
	pcori_list_init(&m->chain);
	atomic_fetch_add_explicit(&pcori_msg.overflow, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pcori_msg.overflow_bytes, (int64_t)bytes,
				  memory_order_relaxed);
	return m;
}

void pcori_mcb_release(pcori_mcb_t *m)
{
	size_t b = held_bytes(m);
	if (PCORI_UNLIKELY(!from_pool(m))) {
		atomic_fetch_sub_explicit(&pcori_msg.overflow_bytes,
					  (int64_t)b, memory_order_relaxed);
		/* seq_cst: an ack held back for it may go once this is 0. */
		atomic_fetch_sub(&pcori_msg.overflow, 1);
		free(m);
		return;
	}
	if (b)
		atomic_fetch_sub_explicit(&pcori_msg.unexp_bytes, (int64_t)b,
					  memory_order_relaxed);
	pcori_mcb_free(&pcori_msg.pool, m);
}

void pcori_msg_fini(void)
{
	size_t dropped = 0;
	for (int i = 0; i < pcori_msg.nmq; i++) {
		pcori_mq_t *mq = &pcori_msg.mqs[i];
		pcori_lock(&mq->lock);
		while (!pcori_list_empty(&mq->unexp)) {
			pcori_mcb_t *m = PCORI_CONTAINER_OF(
				mq->unexp.next, pcori_mcb_t, arrival);
			pcori_mq_remove_unexp(mq, m);
			if (m->flags & PCORI_MCB_DMA_DATA)
				pcori_dma_free(m->data);
			if (m->flags & PCORI_MCB_PARKED)
				pcori_req_complete(m->sreq, PCOR_ERR_CANCELED);
			pcori_mcb_release(m);
			dropped++;
		}
		pcori_unlock(&mq->lock);
		pcori_mq_fini(mq);
	}
	if (dropped)
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "finalize: %zu unexpected messages never received, "
			   "discarded",
			   dropped);
	pcori_mcb_pool_fini(&pcori_msg.pool);
	free(pcori_msg.mqs);
	memset(&pcori_msg, 0, sizeof(pcori_msg));
}

void pcori_msg_thread_gone(int thid)
{
	pcori_mq_t *mq = &pcori_msg.mqs[thid];
	pcori_inbox_t *b = &mq->inbox;
	pcori_list_t gone;
	pcori_list_init(&gone);
	pcori_lock(&mq->lock);
	/*
	 * A receive still armed is canceled like a posted one; one a sender
	 * filled is delivered now, so its handle is settled and the inbox
	 * free for the id's next thread.
	 */
	pcori_req_t *armed = pcori_mq_disarm(mq);
	uint32_t v;
	while (PCORI_INBOX_STATE(v = atomic_load_explicit(
					 &b->word, memory_order_acquire)) ==
	       PCORI_INBOX_BUSY)
		pcori_cpu_relax();
	pcori_req_t *filled =
		PCORI_INBOX_STATE(v) == PCORI_INBOX_FILLED ? mq->armed : NULL;
	if (armed)
		pcori_list_push_back(&gone, &armed->link);
	while (!pcori_list_empty(&mq->posted)) {
		pcori_list_t *n = mq->posted.next;
		pcori_list_remove(n);
		pcori_list_push_back(&gone, n);
	}
	mq->nposted = 0;
	pcori_unlock(&mq->lock);
	if (filled)
		pcori_inbox_harvest(b, v, filled);
	/* Complete outside the lock: a waiter may be woken at once. */
	while (!pcori_list_empty(&gone)) {
		pcori_list_t *n = gone.next;
		pcori_list_remove(n);
		pcori_req_complete(PCORI_CONTAINER_OF(n, pcori_req_t, link),
				   PCOR_ERR_CANCELED);
	}
}

/* Copy what fits of a message into copy receive r: its status. */
static inline int copy_in(pcori_req_t *r, const void *data, size_t len)
{
	size_t n = len < r->len ? len : r->len;
	if (n)
		memcpy(r->buf, data, n);
	return n < len ? PCOR_ERR_TRUNCATE : PCOR_OK;
}

void pcori_deliver(pcori_req_t *r, const pcori_mkey_t *k, const void *data,
		   size_t len, void *own_dma)
{
	int st = PCOR_OK;
	r->info.pid = k->src_pid;
	r->info.thid = k->src_thid;
	r->info.tag = k->tag;
	r->info.size = len;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		st = copy_in(r, data, len);
		if (own_dma)
			pcori_dma_free(own_dma);
	} else {
		void *out = NULL;
		if (own_dma && len) {
			out = own_dma;
		} else {
			if (own_dma)
				pcori_dma_free(own_dma);
			if (len) {
				if (pcori_dma_alloc(len, &out) == PCOR_OK)
					memcpy(out, data, len);
				else
					st = PCOR_ERR_NOMEM;
			}
		}
		*r->report.dma = out;
	}
	pcori_req_complete(r, st);
}

/*
 * Deliver a short message into posted copy receive r and complete it while
 * the caller still holds the queue lock.  The receive's first line, which
 * its waiter keeps reading, is then fetched once and written in one burst,
 * instead of being read back by the spinning waiter between the unlink and
 * the completion.  Returns whether a sleeper must be woken, after
 * unlocking.
 */
static bool deliver_short(pcori_req_t *r, const pcori_mkey_t *k,
			  const void *data, size_t len)
{
	int st = copy_in(r, data, len);
	r->info.pid = k->src_pid;
	r->info.thid = k->src_thid;
	r->info.tag = k->tag;
	r->info.size = len;
	return pcori_req_complete_nowake(r, st);
}

/* Hand a complete unexpected MCB to receive r and recycle it. */
void pcori_mcb_deliver(pcori_req_t *r, pcori_mcb_t *m)
{
	const void *data = (m->flags & PCORI_MCB_INLINE_DATA) ? m->inl
							      : m->data;
	void *own = (m->flags & PCORI_MCB_DMA_DATA) ? m->data : NULL;
	pcori_req_t *sreq = (m->flags & PCORI_MCB_PARKED) ? m->sreq : NULL;
	pcori_deliver(r, &m->hent.key, data, m->size, own);
	if (sreq)
		pcori_req_complete(sreq, PCOR_OK);
	pcori_mcb_release(m);
}

void pcori_mcb_claim(pcori_req_t *r, pcori_mcb_t *m)
{
	if (m->flags & PCORI_MCB_RNDV) {
		pcori_rndv_start(r, m);
		return;
	}
	m->rreq = r;
	/* Still arriving: the arrival path delivers when the last part lands. */
	if (atomic_fetch_or_explicit(&m->mstate, PCORI_MCB_CLAIMED,
				     memory_order_acq_rel) &
	    PCORI_MCB_COMPLETE)
		pcori_mcb_deliver(r, m);
}

/* Reserve unexpected-data budget; false if it would exceed the cap. */
static bool budget_take(size_t n)
{
	if (!n)
		return true;
	int64_t now = atomic_fetch_add_explicit(&pcori_msg.unexp_bytes,
						(int64_t)n,
						memory_order_relaxed);
	if (now + (int64_t)n <= pcori_msg.unexp_max)
		return true;
	atomic_fetch_sub_explicit(&pcori_msg.unexp_bytes, (int64_t)n,
				  memory_order_relaxed);
	return false;
}

pcori_mcb_t *pcori_mcb_get(size_t bytes, bool may_wait, uint64_t *deadline)
{
	pcori_mcb_pool_t *p = &pcori_msg.pool;
	pcori_mcb_t *m = NULL;
	bool waiting = false;
	uint32_t epoch = 0;
	for (;;) {
		if (budget_take(bytes)) {
			m = pcori_mcb_alloc(p);
			if (m)
				break;
			atomic_fetch_sub_explicit(&pcori_msg.unexp_bytes,
						  (int64_t)bytes,
						  memory_order_relaxed);
		}
		if (!may_wait)
			break;
		if (!waiting) {
			waiting = true;
			epoch = pcori_mcb_pool_wait_begin(p);
			if (!*deadline)
				*deadline = pcori_now_ns() +
					    (uint64_t)pcori_msg.backpressure_ns;
			continue; /* try again now that frees are seen */
		}
		uint64_t now = pcori_now_ns();
		if (now >= *deadline)
			break;
		pcori_mcb_pool_sleep(p, &epoch, (int64_t)(*deadline - now));
	}
	if (waiting)
		pcori_mcb_pool_wait_end(p);
	return m;
}

/* Describe the message in a fresh MCB; copies small data inline. */
static void mcb_prepare(pcori_mcb_t *m, const pcori_mkey_t *k,
			pcori_req_t *s, const void *buf, size_t len)
{
	m->hent.key = *k;
	m->size = len;
	atomic_store_explicit(&m->mstate, PCORI_MCB_COMPLETE,
			      memory_order_relaxed);
	if (s->kind == PCORI_REQ_SEND_DMA) {
		m->data = (void *)buf;
		if (s->flags & PCOR_SEND_HANDOVER) {
			m->flags = PCORI_MCB_DMA_DATA;
		} else {
			m->flags = PCORI_MCB_PARKED;
			m->sreq = s;
		}
	} else if (len <= PCORI_MCB_INLINE) {
		if (len) /* a zero-byte message may come with no buffer */
			memcpy(m->inl, buf, len);
		m->flags = PCORI_MCB_INLINE_DATA;
	} else {
		m->flags = PCORI_MCB_DMA_DATA; /* data filled by the caller */
	}
}

/*
 * Hand a short message to the receive armed in inbox b, if it accepts k:
 * claim the line, write what came and the data, publish.  No lock: a
 * sender that finds no armed receive looks again under the queue's lock,
 * where arming happens.  Returns whether the message was delivered.
 */
static bool inbox_fill(pcori_inbox_t *b, const pcori_mkey_t *k,
		       const void *buf, size_t len)
{
	uint32_t v = atomic_load_explicit(&b->word, memory_order_acquire);
	uint32_t busy;
	do {
		if (!pcori_inbox_accepts(b, v, k))
			return false;
		/* A sleeper's bit goes: it is woken once the data is in. */
		busy = PCORI_INBOX_SEQ(v) | PCORI_INBOX_BUSY;
	} while (!atomic_compare_exchange_weak_explicit(
		&b->word, &v, busy, memory_order_acquire,
		memory_order_acquire));
	const unsigned char *p = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		atomic_store_explicit(&b->data[i / 8], w, memory_order_relaxed);
	}
	if (i < len) {
		uint64_t w = 0;
		for (size_t j = 0; i + j < len; j++)
			((unsigned char *)&w)[j] = p[i + j];
		atomic_store_explicit(&b->data[i / 8], w, memory_order_relaxed);
	}
	atomic_store_explicit(&b->src_thid, k->src_thid, memory_order_relaxed);
	atomic_store_explicit(&b->src_tag, k->tag, memory_order_relaxed);
	atomic_store_explicit(&b->size, (uint32_t)len, memory_order_relaxed);
	atomic_store_explicit(&b->word, PCORI_INBOX_SEQ(v) | PCORI_INBOX_FILLED,
			      memory_order_release);
	if (v & PCORI_WAIT_SLEEPER)
		pcori_futex_wake(&b->word, INT_MAX);
	return true;
}

int pcori_local_send(pcori_req_kind_t kind, int dst_thid, int tag,
		     uint32_t ctx, const void *buf, size_t len,
		     unsigned flags, pcor_handle_t *h_p)
{
	pcori_mq_t *mq = &pcori_msg.mqs[dst_thid];
	/* Short: the message goes in the receiver's inbox line if a receive
	 * is armed there, the one line it spins on. */
	const bool inbox = len <= PCORI_INBOX_DATA &&
			   !(flags & PCOR_SEND_HANDOVER);
	/* Its line is with its owner, who armed or posted: fetch it now. */
	pcori_prefetchw(inbox ? (void *)&mq->inbox : (void *)&mq->lock);
	pcori_req_t *s = pcori_req_alloc();
	if (PCORI_UNLIKELY(!s))
		return PCOR_ERR_AGAIN;
	s->kind = (uint16_t)kind;
	pcori_req_flags(s, flags);
	s->pid = pcori_rt.pid;
	s->thid = dst_thid;
	s->tag = tag;
	s->ctx = ctx;
	s->buf = (void *)buf;
	s->len = len;

	const bool handover = flags & PCOR_SEND_HANDOVER;
	const bool copy = kind == PCORI_REQ_SEND_COPY;
	const bool big_copy = copy && len > PCORI_MCB_INLINE;
	/* Bytes of pcor memory the message holds while unexpected. */
	const size_t held = big_copy || handover ? len : 0;
	const pcori_mkey_t k = {pcori_rt.pid, pcori_self_thid(), dst_thid, tag,
				ctx};
	/* Waiting for oneself to receive could never end. */
	const bool may_wait = dst_thid != k.src_thid;
	uint64_t deadline = 0;
	pcori_mcb_t *m = NULL;
	pcori_req_t *r;

	if (inbox && inbox_fill(&mq->inbox, &k, buf, len))
		goto sent;
	for (;;) {
		pcori_lock(&mq->lock);
		/* Armed while we came: still the oldest receive. */
		if (inbox && inbox_fill(&mq->inbox, &k, buf, len)) {
			pcori_unlock(&mq->lock);
			if (m)
				pcori_mcb_release(m);
			goto sent;
		}
		r = pcori_mq_take_posted(mq, &k);
		if (r)
			break;
		if (!m) {
			m = pcori_mcb_get(held, false, &deadline);
			if (!m) {
				/* Never sleep holding the queue lock. */
				pcori_unlock(&mq->lock);
				m = pcori_mcb_get(held, may_wait, &deadline);
				if (!m) {
					pcori_req_free(s);
					return PCOR_ERR_AGAIN;
				}
				mcb_prepare(m, &k, s, buf, len);
				continue; /* a receive may have come meanwhile */
			}
			mcb_prepare(m, &k, s, buf, len);
		}
		if (big_copy && !m->data) {
			/* Long copies are made unlocked, then we look again. */
			bool unlocked = len > PCORI_LOCKED_COPY_MAX;
			if (unlocked)
				pcori_unlock(&mq->lock);
			if (pcori_dma_alloc(len, &m->data)) {
				if (!unlocked)
					pcori_unlock(&mq->lock);
				m->data = NULL;
				pcori_mcb_release(m);
				pcori_req_free(s);
				return PCOR_ERR_NOMEM;
			}
			memcpy(m->data, buf, len);
			if (unlocked)
				continue;
		}
		pcori_mq_add_unexp(mq, m);
		pcori_unlock(&mq->lock);
		*h_p = pcori_req_handle(s);
		/* A parked sendDMA completes when the receiver takes it. */
		if (copy || handover)
			pcori_req_complete_unseen(s, PCOR_OK);
		return PCOR_OK;
	}
	if (!m && !handover && r->kind == PCORI_REQ_RECV_COPY &&
	    len <= PCORI_LOCKED_DELIVER_MAX) {
		bool wake = deliver_short(r, &k, buf, len);
		pcori_unlock(&mq->lock);
		if (wake)
			pcori_req_wake(r);
		*h_p = pcori_req_handle(s);
		pcori_req_complete_unseen(s, PCOR_OK);
		return PCOR_OK;
	}
	pcori_unlock(&mq->lock);

	/* A receive was posted: deliver from wherever the data is now. */
	if (m && big_copy && m->data) {
		void *own = m->data;
		pcori_mcb_release(m);
		pcori_deliver(r, &k, own, len, own);
	} else {
		if (m)
			pcori_mcb_release(m);
		pcori_deliver(r, &k, buf, len, handover ? (void *)buf : NULL);
	}
sent:
	*h_p = pcori_req_handle(s);
	pcori_req_complete_unseen(s, PCOR_OK);
	return PCOR_OK;
}

int pcori_recv_post(pcori_req_kind_t kind, int pid, int thid, int tag,
		    uint32_t ctx, void *buf, size_t cap,
		    const pcori_report_t *rep, pcor_handle_t *h_p)
{
	pcori_mq_t *mq = &pcori_msg.mqs[pcori_self_thid()];
	/* Its line is with our last sender: fetch it meanwhile. */
	pcori_prefetchw(&mq->lock);
	pcori_req_t *r = pcori_req_alloc();
	if (PCORI_UNLIKELY(!r))
		return PCOR_ERR_AGAIN;
	r->kind = (uint16_t)kind;
	r->pid = pid;
	r->thid = thid;
	r->tag = tag;
	r->ctx = ctx;
	r->buf = buf;
	r->len = cap;
	r->report = *rep;
	r->owner_thid = pcori_self_thid();
	/* A peer lost while we wait is reported through progress. */
	pcori_peer_t *peer = NULL;
	/*
	 * Its message can come from a thread of ours only: it may wait in the
	 * inbox.  (A wildcard armed before the fabric came up is moved out by
	 * the first message from elsewhere.)
	 */
	bool arm = pid == pcori_rt.pid || pid == PCOR_ANY_PID;
	if (pcori_net.up && pid != pcori_rt.pid) {
		pcori_req_flags(r, r->flags | PCORI_REQF_REMOTE);
		arm = false;
		if (pid != PCOR_ANY_PID)
			peer = pcori_peer_get(pid);
	}

	bool lost = false;
	pcori_lock(&mq->lock);
	pcori_mcb_t *m = pcori_mq_take_unexp(mq, r);
	/*
	 * Nothing from a lost peer will come any more.  Checked under the
	 * queue lock: the loss handler scans posted receives under it after
	 * marking the peer, so one of the two sees the other.
	 */
	if (!m && peer && atomic_load(&peer->state) == PCORI_PEER_LOST)
		lost = true;
	else if (!m && !(arm && pcori_mq_arm(mq, r)))
		pcori_mq_post(mq, r);
	pcori_unlock(&mq->lock);
	*h_p = pcori_req_handle(r);
	if (m)
		pcori_mcb_claim(r, m);
	else if (lost)
		pcori_req_complete(r, PCOR_ERR_PEER_LOST);
	return PCOR_OK;
}
