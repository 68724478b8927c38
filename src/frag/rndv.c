/*
 * rndv.c -- rendezvous being received (pcori_rndv_t): the data pulled
 * with remote reads (fi_read, or CMA on pcor-shm) in READ_CHUNK pieces
 * straight into the receive's buffer, or asked for by windows of 32
 * fragments (CTS) where the path has no reads; FIN when it is in, sent
 * again until the sender's FINACK, and window requests sent again when
 * data stalls (the watch).  Also the deferred completions that every
 * part of the protocol uses: one of them starts a rendezvous, so they
 * live here, below the parts that call them.
 *
 * A lost sender: the receive completes once the last read into the
 * application's buffer is back (pcori_rndv_fail, rndv_reads_drop), never
 * before -- the application may free the buffer then.  A provider that
 * may keep reads from a dead process for good (rxd, shm: reads_may_hang)
 * reads into blocks of ours only (a recvCopy's is copied over once all
 * is in); such a receive completes at the loss, a peer timeout after it
 * on other ports, without its block, which stays with the rendezvous
 * until the reads are back or the port is closed (rndv_overdue).
 *
 * Locks: a rendezvous lives by its reference count (see pcori_rndv_t).
 * Its peer's rx_lock guards the peer's table of them and the streamed
 * window state; pcori_net.timer_lock guards the list of live ones and
 * the read queue, and nothing is taken inside it.  Reads are issued and
 * receives completed with no lock held.  Calls only ctl.c.
 */
#include "proto.h"

#define READ_CHUNK ((size_t)8 << 20)

/* ------------------------------------------------------ deferred work */

static void rndv_go(pcori_rndv_t *v);

void pcori_run_deferred(pcori_deferred_t *d)
{
	for (int i = 0; i < d->n; i++) {
		switch (d->a[i].what) {
		case PCORI_D_COMPLETE:
			pcori_req_complete(d->a[i].req, d->a[i].status);
			break;
		case PCORI_D_DELIVER:
			pcori_mcb_deliver(d->a[i].req, d->a[i].obj);
			break;
		case PCORI_D_RNDV:
			rndv_go(d->a[i].obj);
			break;
		}
	}
	d->n = 0;
}

/* A receive got its whole message (or gave up): report and complete. */
void pcori_recv_finish(pcori_req_t *r, const pcori_mkey_t *k, size_t size,
		       void *dma_block, int status, pcori_deferred_t *d)
{
	status = pcori_recv_settle(r, k, size, dma_block, status);
	pcori_defer(d, PCORI_D_COMPLETE, r, status, NULL);
}

int pcori_recv_settle(pcori_req_t *r, const pcori_mkey_t *k, size_t size,
		      void *dma_block, int status)
{
	r->info.pid = k->src_pid;
	r->info.thid = k->src_thid;
	r->info.tag = k->tag;
	r->info.size = size;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		if (status == PCOR_OK && size > r->len)
			status = PCOR_ERR_TRUNCATE;
	} else {
		if (status != PCOR_OK && dma_block) {
			pcori_dma_free(dma_block);
			dma_block = NULL;
		}
		*r->report.dma = dma_block;
	}
	return status;
}

/* -------------------------------------------------------- rendezvous */

/* v no longer needs its port's dispatcher awake (once). */
static void rndv_idle(pcori_rndv_t *v)
{
	if (!atomic_exchange(&v->idle, true))
		atomic_fetch_sub(&v->port->busy, 1);
}

/* Free v, and its block if it was not handed over. */
static void rndv_free(pcori_rndv_t *v)
{
	if (v->own_dma)
		pcori_dma_free(v->own_dma);
	free(v);
}

void pcori_rndv_unref(pcori_rndv_t *v)
{
	if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1) {
		pcori_lock(&pcori_net.timer_lock);
		pcori_list_remove(&v->alive);
		pcori_unlock(&pcori_net.timer_lock);
		rndv_idle(v);
		/* Each read holds a reference: none can write into it now. */
		rndv_free(v);
	}
}

void pcori_rndv_reap(void)
{
	while (!pcori_list_empty(&pcori_net.rndvs)) {
		pcori_list_t *n = pcori_net.rndvs.next;
		pcori_list_remove(n);
		rndv_free(PCORI_CONTAINER_OF(n, pcori_rndv_t, alive));
	}
}

/* Ask v's sender for window w of its fragments. */
static void ask_window(pcori_rndv_t *v, uint32_t w)
{
	pcori_wire_hdr_t ref = {.total_size = v->size,
				.frag_count = v->reasm.nfrags};
	pcori_send_ctl(v->peer, PCORI_W_CTS, v->key.src_thid, 0, v->cookie, w,
		       &ref);
}

static void send_fin(pcori_rndv_t *v)
{
	pcori_send_ctl(v->peer, PCORI_W_FIN, v->key.src_thid, 0, v->cookie, 0,
		       NULL);
}

/* Make the next watch scan no later than at. */
static void watch_next_lower(uint64_t at)
{
	uint64_t cur = atomic_load(&pcori_net.watch_next_ns);
	while ((!cur || at < cur) && !atomic_compare_exchange_weak(
					 &pcori_net.watch_next_ns, &cur, at))
		;
}

/* The next look at v: one retransmission timeout on, doubling. */
static void watch_arm(pcori_rndv_t *v)
{
	uint32_t shift =
	    atomic_load_explicit(&v->watch_shift, memory_order_relaxed);
	uint64_t at = pcori_now_ns() + ((uint64_t)pcori_rt.cfg.rto_ms * 1000000u
					<< PCORI_MIN(shift, 4u));
	atomic_store_explicit(&v->watch_ns, at, memory_order_relaxed);
	watch_next_lower(at);
}

/* Rendezvous whose FIN the sender has not acknowledged yet. */
int pcori_rndv_unsettled(void)
{
	int n = 0;
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_t *pos;
	pcori_list_foreach (pos, &pcori_net.rndvs) {
		pcori_rndv_t *v = PCORI_CONTAINER_OF(pos, pcori_rndv_t, alive);
		n += atomic_load(&v->fin_sent) && atomic_load(&v->watched) &&
		     atomic_load(&v->peer->state) != PCORI_PEER_LOST;
	}
	pcori_unlock(&pcori_net.timer_lock);
	return n;
}

/* Stop watching v (drops the watch's reference). */
static void unwatch(pcori_rndv_t *v)
{
	if (atomic_exchange(&v->watched, false)) {
		atomic_fetch_sub(&pcori_net.nwatched, 1);
		pcori_rndv_unref(v);
	}
}

/*
 * Complete the receive once.  tell: the sender hears FIN, whatever the
 * status, so that it lets go of its data (not when the sender is gone).
 * The caller holds a reference besides the watch's.  Data in a block of
 * ours reaches the receiver only whole (a recvDMA gets the block, a
 * recvCopy a copy); otherwise the block stays with v, which reads still
 * out keep alive, and is freed with v.
 */
void pcori_rndv_complete(pcori_rndv_t *v, int status, bool tell)
{
	if (atomic_exchange(&v->done, true))
		return;
	/* Failed: whatever its reads do, the dispatcher need not spin. */
	if (atomic_load(&v->fail))
		rndv_idle(v);
	pcori_deferred_t d = {0};
	if (tell) {
		atomic_store(&v->fin_sent, true);
		atomic_store_explicit(&v->watch_shift, 0, memory_order_relaxed);
		watch_arm(v);
		send_fin(v);
	} else {
		unwatch(v);
	}
	void *block = NULL;
	if (status == PCOR_OK && v->req->kind == PCORI_REQ_RECV_DMA) {
		block = v->own_dma;
		v->own_dma = NULL;
	} else if (status == PCOR_OK && v->ours) {
		/* All is in: nothing writes into the block any more. */
		memcpy(v->req->buf, v->own_dma, v->take);
		pcori_dma_free(v->own_dma);
		v->own_dma = NULL;
	}
	pcori_recv_finish(v->req, &v->key, v->size, block, status, &d);
	pcori_run_deferred(&d);
}

/* Take v out of its peer's table; true if this call did. */
static bool rndv_unlist(pcori_rndv_t *v)
{
	pcori_peer_t *peer = v->peer;
	pcori_rndv_t *found;
	pcori_lock(&peer->rx_lock);
	HASH_FIND(hh, peer->rndv, &v->cookie, sizeof(v->cookie), found);
	if (found == v)
		HASH_DEL(peer->rndv, v);
	pcori_unlock(&peer->rx_lock);
	return found == v;
}

static void rndv_finish(pcori_rndv_t *v, int status, bool tell)
{
	pcori_rndv_complete(v, status, tell);
	if (rndv_unlist(v))
		pcori_rndv_unref(v);
}

pcori_rndv_t *pcori_rndv_new(pcori_req_t *r, pcori_peer_t *peer,
			     const pcori_mkey_t *k, size_t size,
			     const pcori_wire_rts_t *rts, uint64_t cookie,
			     uint32_t nfrags)
{
	pcori_rndv_t *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	pcori_route_t *rt = pcori_peer_route(peer);
	if (!rt) {
		free(v);
		return NULL;
	}
	v->ctx.kind = PCORI_CTX_READ;
	v->cookie = cookie;
	v->peer = peer;
	v->port = rt->port;
	v->src_dest = rt->dest;
	v->req = r;
	v->key = *k;
	v->size = size;
	v->raddr = rts->addr;
	v->rkey = rts->key;
	v->readable = (rts->flags & PCORI_RTS_READABLE) && rt->hops == 1 &&
		      rt->port->can_read && !pcori_net.force_stream;
	pcori_reasm_init(&v->reasm, nfrags);
	pcori_list_init(&v->qlink);
	atomic_init(&v->refs, 2); /* the peer's table and the watch */
	atomic_init(&v->watched, true);
	atomic_fetch_add(&pcori_net.nwatched, 1);
	atomic_fetch_add(&v->port->busy, 1);
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_push_back(&pcori_net.rndvs, &v->alive);
	pcori_unlock(&pcori_net.timer_lock);
	return v;
}

/*
 * Every read is back.  A read that failed while the sender still counts
 * as alive falls back to the stream: if the sender died, its failure
 * ends the stream with PCOR_ERR_PEER_LOST; if its memory was merely
 * unreadable, the data still comes.
 */
static void rndv_reads_over(pcori_rndv_t *v)
{
	if (atomic_exchange(&v->reads_over, true))
		return;
	pcori_peer_t *peer = v->peer;
	int f = atomic_load(&v->fail);
	if (f) {
		rndv_finish(v, f, false);
		return;
	}
	/*
	 * Lost, though the failure is not recorded on v yet: reads that
	 * failed before the loss was known failed of it.
	 */
	bool lost = atomic_load(&peer->state) == PCORI_PEER_LOST;
	if (lost && v->status != PCOR_OK)
		v->status = PCOR_ERR_PEER_LOST;
	if (v->status == PCOR_OK || v->status == PCOR_ERR_NOMEM || lost) {
		rndv_finish(v, v->status, v->status != PCOR_ERR_PEER_LOST);
		return;
	}
	PCORI_INFO(PCORI_SUB_DISPATCH,
		   "peer %d: a read failed (%s); streaming instead", peer->pid,
		   pcor_strerror(v->status));
	pcori_lock(&peer->rx_lock);
	v->readable = false;
	v->status = PCOR_OK;
	pcori_unlock(&peer->rx_lock);
	watch_arm(v);
	ask_window(v, 0);
}

/*
 * Drop a read that came back, or a hold.  The last one out finishes a
 * failed rendezvous -- no read can write into its buffer any more -- or
 * hands a whole set of reads to rndv_reads_over.
 */
static void rndv_reads_drop(pcori_rndv_t *v)
{
	if (atomic_fetch_sub(&v->reads, 1) != 1)
		return;
	int f = atomic_load(&v->fail);
	if (f)
		rndv_finish(v, f, false);
	else if (v->next_off >= v->take)
		rndv_reads_over(v);
}

/* Issue reads from next_off on.  Runs in any thread, no lock held. */
static void rndv_read_more(pcori_rndv_t *v)
{
	/*
	 * Ours while we look at v, with a hold on its reads: the last read
	 * may complete meanwhile, and the peer may fail (then no read
	 * starts, and the last one out finishes).
	 */
	atomic_fetch_add(&v->refs, 1);
	atomic_fetch_add(&v->reads, 1);
	while (!atomic_load(&v->fail) && v->next_off < v->take) {
		size_t off = v->next_off;
		size_t n = PCORI_MIN(READ_CHUNK, v->take - off);
		atomic_fetch_add(&v->refs, 1);
		atomic_fetch_add(&v->reads, 1);
		int rc = v->port->ops->read(v->port, v->src_dest,
					    (char *)v->dst + off, n,
					    v->raddr + off, v->rkey, &v->ctx);
		if (rc) {
			atomic_fetch_sub(&v->reads, 1);
			atomic_fetch_sub(&v->refs, 1);
			if (rc == PCOR_ERR_AGAIN) {
				/* Try again from the timers: the queue drains.
				 */
				pcori_lock(&pcori_net.timer_lock);
				if (pcori_list_empty(&v->qlink)) {
					atomic_fetch_add(&v->refs, 1);
					pcori_list_push_back(&pcori_net.readq,
							     &v->qlink);
					atomic_fetch_add(&pcori_net.nreadq, 1);
				}
				pcori_unlock(&pcori_net.timer_lock);
				break;
			}
			v->next_off = v->take;
			if (v->status == PCOR_OK)
				v->status = rc;
			break;
		}
		atomic_fetch_add_explicit(&v->port->st.rma_reads, 1,
					  memory_order_relaxed);
		v->next_off = off + n;
	}
	/* All asked for (or given up): the last completion, or this. */
	rndv_reads_drop(v);
	pcori_rndv_unref(v);
}

/* Start moving the data of rendezvous v. */
static void rndv_go(pcori_rndv_t *v)
{
	pcori_req_t *r = v->req;
	pcori_peer_t *peer = v->peer;
	v->status = PCOR_OK;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		v->dst = r->buf;
		v->take = PCORI_MIN(v->size, r->len);
		/*
		 * A port that may keep a read from a dead peer for good reads
		 * into a block of ours, copied over once all is in; without
		 * one, the data streams.
		 */
		if (v->readable && v->port->reads_may_hang && v->take) {
			if (pcori_dma_alloc(v->take, &v->own_dma) == PCOR_OK)
				v->dst = v->own_dma;
			else
				v->readable = false;
		}
	} else {
		v->take = v->size;
		if (v->size && pcori_dma_alloc(v->size, &v->own_dma)) {
			pcori_rndv_complete(v, PCOR_ERR_NOMEM, true);
			pcori_rndv_unref(v);
			return;
		}
		v->dst = v->own_dma;
	}
	v->ours = v->own_dma != NULL;
	/* Listed so a peer failure finds it; the list holds v's reference. */
	pcori_lock(&peer->rx_lock);
	HASH_ADD(hh, peer->rndv, cookie, sizeof(v->cookie), v);
	pcori_unlock(&peer->rx_lock);
	if (atomic_load(&peer->state) == PCORI_PEER_LOST) {
		rndv_finish(v, PCOR_ERR_PEER_LOST, false); /* no read yet */
		return;
	}
	if (v->readable) {
		rndv_read_more(v);
		return;
	}
	watch_arm(v);
	ask_window(v, 0);
}

void pcori_rndv_start(pcori_req_t *r, pcori_mcb_t *m)
{
	pcori_wire_rts_t rts = {m->rts_addr, m->rts_key, m->rts_flags, 0};
	pcori_rndv_t *v = pcori_rndv_new(r, m->origin, &m->hent.key, m->size,
					 &rts, m->cookie, m->reasm.nfrags);
	pcori_mkey_t k = m->hent.key;
	size_t size = m->size;
	pcori_mcb_release(m);
	if (v) {
		rndv_go(v);
	} else {
		pcori_deferred_t d = {0};
		pcori_recv_finish(r, &k, size, NULL, PCOR_ERR_NOMEM, &d);
		pcori_run_deferred(&d);
	}
}

void pcori_port_read_done(pcori_port_t *p, pcori_ctx_t *ctx, int status)
{
	(void)p;
	pcori_rndv_t *v = (pcori_rndv_t *)ctx;
	if (status && v->status == PCOR_OK)
		v->status = atomic_load(&v->peer->state) == PCORI_PEER_LOST
				? PCOR_ERR_PEER_LOST
				: status;
	rndv_reads_drop(v);
	pcori_rndv_unref(v);
}

/*
 * v's peer failed; v is out of its peer's table and the caller holds
 * the table's reference.  Reads still with the port may write into the
 * receive's buffer until they come back, so the receive completes when
 * the last of them does -- at once when none is out.  Reads into a
 * block of ours on a port that may keep them for good are not waited
 * for; others, kept a peer timeout longer, meet the watch
 * (rndv_overdue).
 */
void pcori_rndv_fail(pcori_rndv_t *v, int status)
{
	atomic_fetch_add(&v->reads, 1);
	int none = 0;
	atomic_compare_exchange_strong(&v->fail, &none, status);
	rndv_reads_drop(v);
	if (atomic_load(&v->done))
		return;
	if (v->ours && v->port->reads_may_hang) {
		pcori_rndv_complete(v, atomic_load(&v->fail), false);
		return;
	}
	uint64_t at =
	    pcori_now_ns() + (uint64_t)pcori_rt.cfg.peer_timeout_ms * 1000000u;
	atomic_store_explicit(&v->watch_ns, at, memory_order_relaxed);
	watch_next_lower(at);
}

/*
 * A failed rendezvous whose reads the provider still holds a peer
 * timeout later.  Into a block of ours: the receive completes now
 * without it, and the block stays with v until the reads are back or
 * the port is closed.  An application's buffer cannot be handed back
 * while the provider may still write into it: that receive waits for
 * its reads (ports that may keep them for good get no such buffer).
 */
static void rndv_overdue(pcori_rndv_t *v, int status)
{
	atomic_store_explicit(&v->watch_ns, 0, memory_order_relaxed);
	uint32_t n = atomic_load(&v->reads);
	if (!n) /* the last one out is finishing it */
		return;
	rndv_idle(v); /* no need to spin for reads that may never come */
	if (v->ours) {
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "peer %d: rendezvous %llx: %u reads still out "
			   "after the failure; the receive completes, its "
			   "block is kept until they are back",
			   v->peer->pid, (unsigned long long)v->cookie, n);
		pcori_rndv_complete(v, status, false);
	} else {
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "peer %d: rendezvous %llx: %u reads still out "
			   "after the failure; the receive completes when "
			   "they are back",
			   v->peer->pid, (unsigned long long)v->cookie, n);
	}
}

/* A fragment of a streamed rendezvous. */
void pcori_rx_stream(pcori_port_t *port, pcori_peer_t *peer,
		     const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	pcori_rndv_t *v;
	bool next = false, done = false;
	uint32_t w = 0;
	pcori_wire_hdr_t ref = {0};
	pcori_lock(&peer->rx_lock);
	HASH_FIND(hh, peer->rndv, &h->cookie, sizeof(h->cookie), v);
	if (!v || v->readable ||
	    pcori_reasm_accept(&v->reasm, h->frag_idx) != PCORI_FRAG_NEW) {
		atomic_fetch_add_explicit(&port->st.dup, 1,
					  memory_order_relaxed);
		pcori_unlock(&peer->rx_lock);
		return;
	}
	/* Data flows: the window request got through. */
	atomic_store_explicit(&v->watch_shift, 0, memory_order_relaxed);
	atomic_store_explicit(&v->watch_ns,
			      pcori_now_ns() +
				  (uint64_t)pcori_rt.cfg.rto_ms * 1000000u,
			      memory_order_relaxed);
	size_t off = (size_t)h->frag_idx * pcori_net.frag_size;
	if (off < v->take)
		memcpy((char *)v->dst + off, payload,
		       PCORI_MIN((size_t)h->frag_len, v->take - off));
	if (pcori_reasm_complete(&v->reasm)) {
		HASH_DEL(peer->rndv, v);
		done = true;
	} else if (pcori_reasm_window_done(&v->reasm)) {
		pcori_reasm_advance(&v->reasm);
		w = v->reasm.base / PCORI_FRAG_WINDOW;
		ref.total_size = v->size;
		ref.frag_count = v->reasm.nfrags;
		next = true;
	}
	pcori_unlock(&peer->rx_lock);
	if (next) /* the next window's request doubles as this one's ack */
		pcori_send_ctl(peer, PCORI_W_CTS, h->src_thid, 0, h->cookie, w,
			       &ref);
	if (done) {
		pcori_rndv_complete(v, PCOR_OK, true);
		pcori_rndv_unref(v);
	}
}

/* The sender has our FIN: the rendezvous is over on both sides. */
void pcori_on_finack(pcori_peer_t *peer, uint64_t cookie)
{
	pcori_rndv_t *found = NULL;
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_t *pos;
	pcori_list_foreach (pos, &pcori_net.rndvs) {
		pcori_rndv_t *v = PCORI_CONTAINER_OF(pos, pcori_rndv_t, alive);
		if (v->peer == peer && v->cookie == cookie &&
		    atomic_load(&v->fin_sent) && atomic_load(&v->watched)) {
			found = v;
			break;
		}
	}
	/* Ours to drop once taken from watched; v lives until then. */
	bool mine = found && atomic_exchange(&found->watched, false);
	pcori_unlock(&pcori_net.timer_lock);
	if (mine) {
		atomic_fetch_sub(&pcori_net.nwatched, 1);
		pcori_rndv_unref(found);
	}
}

/*
 * Retry rendezvous reads that found a full queue.  One at a time under
 * the lock (rndv_read_more tests qlink under it), at most as many as were
 * queued on entry: a read that fails again waits for the next round.
 */
int pcori_readq_run(void)
{
	int todo =
	    atomic_load_explicit(&pcori_net.nreadq, memory_order_relaxed);
	int n = 0;
	for (; n < todo; n++) {
		pcori_lock(&pcori_net.timer_lock);
		if (pcori_list_empty(&pcori_net.readq)) {
			pcori_unlock(&pcori_net.timer_lock);
			break;
		}
		pcori_rndv_t *v = PCORI_CONTAINER_OF(pcori_net.readq.next,
						     pcori_rndv_t, qlink);
		pcori_list_remove(&v->qlink);
		atomic_fetch_sub(&pcori_net.nreadq, 1);
		pcori_unlock(&pcori_net.timer_lock);
		if (!atomic_load(&v->done))
			rndv_read_more(v);
		pcori_rndv_unref(v); /* the queue's reference */
	}
	return n;
}

/*
 * Rendezvous we receive whose watch time passed: ask again for the
 * window (the CTS or its data was lost) or send FIN again (it or its
 * FINACK was lost).  Returns control messages sent.
 */
int pcori_watch_run(void)
{
	if (!atomic_load_explicit(&pcori_net.nwatched, memory_order_relaxed))
		return 0;
	uint64_t now = pcori_now_ns();
	uint64_t next = atomic_load(&pcori_net.watch_next_ns);
	/* Claimed: arms from now on set it anew, the scan sees the rest. */
	if (!next || next > now ||
	    !atomic_compare_exchange_strong(&pcori_net.watch_next_ns, &next, 0))
		return 0;
	pcori_rndv_t *due[16];
	int ndue = 0;
	uint64_t soonest = 0;
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_t *pos;
	pcori_list_foreach (pos, &pcori_net.rndvs) {
		pcori_rndv_t *v = PCORI_CONTAINER_OF(pos, pcori_rndv_t, alive);
		uint64_t at =
		    atomic_load_explicit(&v->watch_ns, memory_order_relaxed);
		if (!at || !atomic_load(&v->watched))
			continue;
		if (at <= now && ndue < (int)PCORI_ARRAY_LEN(due)) {
			/* Not one whose last reference went meanwhile. */
			uint32_t refs = atomic_load(&v->refs);
			while (refs && !atomic_compare_exchange_weak(
					   &v->refs, &refs, refs + 1))
				;
			if (!refs)
				continue;
			due[ndue++] = v;
			atomic_fetch_add_explicit(&v->watch_shift, 1,
						  memory_order_relaxed);
			continue; /* re-armed below */
		}
		if (!soonest || at < soonest)
			soonest = PCORI_MAX(at, now + 1);
	}
	pcori_unlock(&pcori_net.timer_lock);
	if (soonest)
		watch_next_lower(soonest);
	int n = 0;
	for (int i = 0; i < ndue; i++) {
		pcori_rndv_t *v = due[i];
		pcori_peer_t *peer = v->peer;
		int f = atomic_load(&v->fail);
		if (f && !atomic_load(&v->done)) {
			rndv_overdue(v, f);
		} else if (atomic_load(&peer->state) == PCORI_PEER_LOST) {
			unwatch(v);
		} else if (atomic_load(&v->fin_sent)) {
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "peer %d: rendezvous %llx: no FINACK, "
				   "sending FIN again",
				   peer->pid, (unsigned long long)v->cookie);
			watch_arm(v);
			send_fin(v);
			n++;
		} else if (!atomic_load(&v->done)) {
			pcori_lock(&peer->rx_lock);
			bool streaming = !v->readable;
			uint32_t w = v->reasm.base / PCORI_FRAG_WINDOW;
			pcori_unlock(&peer->rx_lock);
			if (streaming) {
				PCORI_INFO(
				    PCORI_SUB_DISPATCH,
				    "peer %d: rendezvous %llx: window %u "
				    "stalled, asking again",
				    peer->pid, (unsigned long long)v->cookie,
				    w);
				watch_arm(v);
				ask_window(v, w);
				n++;
			} else { /* reads: the fabric reports their fate */
				atomic_store_explicit(&v->watch_ns, 0,
						      memory_order_relaxed);
			}
		} else { /* done, FIN on its way or not owed */
			atomic_store_explicit(&v->watch_ns, 0,
					      memory_order_relaxed);
		}
		pcori_rndv_unref(v);
	}
	return n;
}
