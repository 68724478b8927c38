/*
 * tx.c -- the send side: the send budget, message records
 * (pcori_txmsg_t) and send streams (pcori_txstream_t), cutting messages
 * into fragments and posting them, the lossless fast path, the sending
 * half of a rendezvous (its request, streamed windows on CTS, FIN), and
 * the ports' send completions.
 *
 * Locks: a stream's lock guards the stream and its messages; messages
 * are posted to the port, and the stream's timers armed (ack.c,
 * timers.c), under it.  The send budget is atomics: a sender waits for
 * room holding no lock.  Calls ack.c, timers.c, rndv.c (deferred
 * completions) and ctl.c.
 */
#include "proto.h"

/*
 * A rendezvous request's bytes, kept for resends apart from the streamed
 * fragments' headers (a resend may come while those are written).
 */
#define RTS_ROOM 128u
_Static_assert(RTS_ROOM >= PCORI_WIRE_HDR_SIZE + PCORI_WIRE_RTS_SIZE,
	       "room for a rendezvous request");

/* ------------------------------------------------------- send budget */

/*
 * What counts: from the send call until its record is freed (the message
 * acknowledged -- for a rendezvous, its data taken -- and every fabric
 * completion in), a message to another process holds its record, its
 * headers and its request slot, plus its data when pcor copied it (an
 * eager sendCopy, in the record's allocation; a rendezvous sendCopy, in
 * DMA memory).  A sendDMA's data is the caller's memory, handed over or
 * not, and is not counted.  The fast path keeps nothing: once the call
 * returns the bytes are in the port's channel, whose memory is fixed.
 * Not counted either: control messages (acks, FIN, spawn requests),
 * frames a gateway forwards (FWD_QUEUE_MAX bounds those) and what a
 * libfabric provider buffers of a message once it took it.
 */
/*
 * Whether a message of len bytes over rt goes by rendezvous: above
 * PCOR_EAGER_MAX, or, for a sendDMA, above the port's read_above where
 * the receiver can read straight from the sender (a single copy beats
 * the channel's two).  A sendCopy makes its copy either way -- into the
 * channel, or into DMA memory for the receiver to read -- and the
 * channel's pipelined pair of copies wins below PCOR_EAGER_MAX (pcor-shm,
 * 16-64 KiB: 13.5-16.5 GB/s through cells, 6.6-8.6 by rendezvous).
 */
static bool goes_rndv(const pcori_route_t *rt, size_t len, bool copy)
{
	if (len > pcori_net.eager_max)
		return true;
	return !copy && rt && len > rt->port->read_above && rt->hops == 1 &&
	       rt->port->can_read && !pcori_net.force_stream;
}

/*
 * Header room of a message's record (after the pcori_txmsg_t): one
 * header a fragment, or a rendezvous's request.
 */
static size_t tx_hdr_bytes(size_t len, bool rndv)
{
	if (rndv)
		return RTS_ROOM;
	return pcori_frag_count(len, pcori_net.frag_size) * PCORI_WIRE_HDR_SIZE;
}

/*
 * A streamed rendezvous's headers, two banks of a window, allocated when
 * it is streamed: one the receiver reads never needs them, and a window
 * of such records freed at once (4 KiB more each) made the heap shrink
 * and fault back in at every window.
 */
#define STREAM_BANKS (2 * PCORI_FRAG_WINDOW * PCORI_WIRE_HDR_SIZE)

static size_t tx_cost(bool copy, size_t len, bool rndv)
{
	/* The banks are charged up front: a refusal comes before the send. */
	return sizeof(pcori_txmsg_t) + tx_hdr_bytes(len, rndv) +
	       (rndv ? STREAM_BANKS : 0) + sizeof(pcori_req_t) +
	       (copy ? len : 0);
}

size_t pcori_tx_cost(int pid, bool copy, size_t len)
{
	pcori_peer_t *peer = pcori_peer_get(pid);
	pcori_route_t *rt = peer ? pcori_peer_route(peer) : NULL;
	return tx_cost(copy, len, goes_rndv(rt, len, copy));
}

/* Give back n bytes, and the oversize place if held. */
static void txb_put(size_t n, bool oversize)
{
	/* seq_cst, then the waiters: see the drive ops' until. */
	atomic_fetch_sub(&pcori_net.txb.held, (int64_t)n);
	if (oversize)
		atomic_store(&pcori_net.txb.oversize, false);
	if (atomic_load(&pcori_net.txb.waiters))
		pcori_wake_word_bump(&pcori_net.txb.room, INT_MAX);
}

typedef struct txb_ask {
	size_t n;      /* bytes to charge */
	bool oversize; /* and the one place for data past the budget */
} txb_ask_t;

/*
 * Take what a (a txb_ask_t) asks for if it fits -- or if nothing at all
 * is held, so that even a budget smaller than a record lets one go.
 */
static bool txb_try(void *a)
{
	const txb_ask_t *ask = a;
	if (ask->oversize && atomic_exchange(&pcori_net.txb.oversize, true))
		return false;
	int64_t n = (int64_t)ask->n;
	int64_t was = atomic_fetch_add(&pcori_net.txb.held, n);
	if (was <= 0 || was + n <= pcori_net.txb.max)
		return true;
	txb_put(ask->n, ask->oversize);
	return false;
}

/*
 * Charge n bytes (and take the oversize place if asked), waiting up to
 * PCOR_BACKPRESSURE_MS for room, driving progress meanwhile: acks free
 * records.  PCOR_OK or PCOR_ERR_AGAIN.  No lock held.
 */
static int txb_take(size_t n, bool oversize)
{
	txb_ask_t ask = {n, oversize};
	if (PCORI_LIKELY(txb_try(&ask)))
		return PCOR_OK;
	uint64_t wait = (uint64_t)pcori_rt.cfg.backpressure_ms * 1000000u;
	bool ok = false;
	/* No driver once the dispatchers are stopped: nothing frees room. */
	const pcori_drive_ops_t *d =
	    atomic_load_explicit(&pcori_drive, memory_order_acquire);
	if (wait && d) {
		atomic_fetch_add(&pcori_net.txb.waiters, 1);
		ok = d->until(txb_try, &ask, &pcori_net.txb.room,
			      pcori_now_ns() + wait);
		atomic_fetch_sub(&pcori_net.txb.waiters, 1);
	}
	if (ok)
		return PCOR_OK;
	if (atomic_fetch_add_explicit(&pcori_net.txb.refused, 1,
				      memory_order_relaxed) == 0)
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "send budget: %lld of %lld bytes held, a message "
			   "needing %zu more refused with PCOR_ERR_AGAIN "
			   "(first time; PCOR_SEND_BYTES)",
			   (long long)atomic_load(&pcori_net.txb.held),
			   (long long)pcori_net.txb.max, n);
	return PCOR_ERR_AGAIN;
}

/* --------------------------------------------------------- send side */

/* Eager copies up to this size live in their record (see in_record). */
#define TXM_INLINE_MAX 1024

/* A record's memory, nothing else. */
static void txm_discard(pcori_txmsg_t *m)
{
	if (m->flags & PCORI_TXM_OWNDMA)
		pcori_dma_free(m->data);
	free(m->banks);
	free(m);
}

void pcori_txstream_discard(pcori_txstream_t *ts)
{
	pcori_txstream_count(ts, NULL);
	pcori_list_t *lists[] = {&ts->sent, &ts->waiting, &ts->waiting_fin,
				 &ts->orphans};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
		while (!pcori_list_empty(lists[i])) {
			pcori_list_t *n = lists[i]->next;
			pcori_list_remove(n);
			txm_discard(PCORI_CONTAINER_OF(n, pcori_txmsg_t, link));
		}
	free(ts);
}

void pcori_txm_free(pcori_txmsg_t *m)
{
	/* Exposed (and kept busy) through the port of its first post. */
	pcori_port_t *p = m->busy_port;
	if (p)
		atomic_fetch_sub(&p->busy, 1);
	if (m->reg && p)
		p->ops->unexpose(p, m->reg);
	size_t held = m->held;
	bool oversize = m->flags & PCORI_TXM_OVERSIZE;
	txm_discard(m);
	/* After the memory went: what the budget admits next is on top. */
	if (held || oversize)
		txb_put(held, oversize);
}

/* Done with m?  Stream lock held.  Unlinks it; caller frees after unlock. */
bool pcori_txm_done(pcori_txmsg_t *m)
{
	if (atomic_load_explicit(&m->inflight, memory_order_acquire))
		return false;
	if (m->flags & PCORI_TXM_DEAD)
		return true;
	if (!(m->flags & PCORI_TXM_ACKED))
		return false;
	return !(m->flags & PCORI_TXM_RNDV) || (m->flags & PCORI_TXM_FINNED);
}

/*
 * Complete m's send once all it waits for holds: accepted (an ack, or a
 * rendezvous's FIN); a sendDMA from the caller's own memory also needs
 * its FIN and no fabric operation still reading that memory (a resend
 * may sit in the provider's queue when the ack comes, and the caller may
 * reuse the buffer as soon as the handle completes).  Stream lock held.
 */
void pcori_txm_settle(pcori_txmsg_t *m, pcori_deferred_t *d)
{
	if (!m->req || !(m->flags & (PCORI_TXM_ACKED | PCORI_TXM_FINNED)))
		return;
	bool callers = m->req->kind == PCORI_REQ_SEND_DMA &&
		       !(m->req->flags & PCOR_SEND_HANDOVER);
	if (callers && (((m->flags & PCORI_TXM_RNDV) &&
			 !(m->flags & PCORI_TXM_FINNED)) ||
			atomic_load_explicit(&m->inflight,
					     memory_order_acquire)))
		return;
	pcori_defer(d, PCORI_D_COMPLETE, m->req, PCOR_OK, NULL);
	m->req = NULL;
}

/* Settle m after an event; true when it is done, unlinked, to be freed. */
static bool settle_unlink(pcori_txmsg_t *m, pcori_deferred_t *d)
{
	pcori_txm_settle(m, d);
	if (!pcori_txm_done(m))
		return false;
	pcori_list_remove(&m->link);
	return true;
}

/* The id a rendezvous is named by on the wire (never a raw pointer). */
static uint64_t txm_cookie(const pcori_txmsg_t *m)
{
	return ((uint64_t)m->ts->thid << 32 | m->seq) ^
	       ((uint64_t)pcori_net.lim.key_check << 16);
}

static void hdr_for(const pcori_txmsg_t *m, pcori_wire_hdr_t *h, uint8_t type)
{
	pcori_hdr_init(h, type, m->ts->peer->pid);
	h->src_thid = m->ts->thid;
	h->dst_thid = m->dst_thid;
	h->tag = m->tag;
	h->ctx = m->mctx;
	h->seq = m->seq;
	h->total_size = m->size;
	h->frag_count = m->nfrags;
}

/*
 * Post m (from where it stopped).  Stream lock held.  PCOR_ERR_AGAIN
 * leaves m->window/progress so the next call continues.
 */
int pcori_txm_post(pcori_txmsg_t *m)
{
	pcori_peer_t *peer = m->ts->peer;
	pcori_route_t *rt = pcori_peer_route(peer);
	if (!rt)
		return PCOR_ERR_UNREACHABLE;
	pcori_port_t *p = rt->port;
	pcori_wire_hdr_t h;
	int rc;

	if (m->flags & PCORI_TXM_RNDV) {
		uint8_t *b = m->hdrs;
		size_t len = PCORI_WIRE_HDR_SIZE + PCORI_WIRE_RTS_SIZE;
		if (!(m->flags & PCORI_TXM_BUILT)) {
			/* Built once; a resend after a NACK reuses the bytes.
			 */
			pcori_wire_rts_t rts = {0};
			hdr_for(m, &h, PCORI_W_RTS);
			h.frag_len = PCORI_WIRE_RTS_SIZE;
			h.cookie = txm_cookie(m);
			if (m->ts->resync)
				h.flags |= PCORI_WF_RESYNC;
			pcori_wire_encode(&h, b);
			/* Readable only where the receiver is one hop away. */
			if (!pcori_net.force_stream && p->can_read && m->size &&
			    rt->hops == 1 && p == m->busy_port &&
			    p->ops->expose(p, m->data, m->size, &rts.addr,
					   &rts.key, &m->reg) == PCOR_OK)
				rts.flags = PCORI_RTS_READABLE;
			pcori_wire_rts_encode(&rts, b + PCORI_WIRE_HDR_SIZE);
			m->flags |= PCORI_TXM_BUILT;
		}
		if (len <= p->inject_max) {
			rc = p->ops->inject(p, rt->dest, b, len);
		} else {
			struct iovec iov = {b, len};
			atomic_fetch_add(&m->inflight, 1);
			rc = p->ops->sendv(p, rt->dest, &iov, 1, &m->ctx);
			if (rc)
				atomic_fetch_sub(&m->inflight, 1);
		}
		if (rc == PCOR_OK) {
			m->flags |= PCORI_TXM_SENT;
			atomic_fetch_add_explicit(&p->st.tx, 1,
						  memory_order_relaxed);
		}
		return rc;
	}

	/*
	 * Going again from the first fragment while an earlier post of this
	 * message is still with the provider: the headers would be rewritten
	 * under a send that reads them in place.  Its completion comes first.
	 */
	if (m->window == 0 &&
	    atomic_load_explicit(&m->inflight, memory_order_acquire))
		return PCOR_ERR_AGAIN;
	/* Eager: fragments window..nfrags-1 (window counts posted ones). */
	for (uint32_t i = m->window; i < m->nfrags; i++) {
		size_t off, flen;
		pcori_frag_bounds(m->size, pcori_net.frag_size, i, &off, &flen);
		hdr_for(m, &h, PCORI_W_DATA);
		h.frag_idx = i;
		h.frag_len = (uint32_t)flen;
		if (i == 0) {
			if (pcori_piggyback(peer, &h.cookie))
				h.flags |= PCORI_WF_HAS_ACK;
			if (m->ts->resync)
				h.flags |= PCORI_WF_RESYNC;
		}
		uint8_t *hb = m->hdrs + (size_t)i * PCORI_WIRE_HDR_SIZE;
		pcori_wire_encode(&h, hb);
		const char *src = (const char *)m->data + off;
		if (PCORI_WIRE_HDR_SIZE + flen <= p->inject_max) {
			uint8_t tmp[PCORI_WIRE_HDR_SIZE + 256];
			if (flen <= 256) {
				memcpy(tmp, hb, PCORI_WIRE_HDR_SIZE);
				if (flen) /* a zero-byte DMA send has no data */
					memcpy(tmp + PCORI_WIRE_HDR_SIZE, src,
					       flen);
				rc = p->ops->inject(p, rt->dest, tmp,
						    PCORI_WIRE_HDR_SIZE + flen);
				goto posted;
			}
		}
		struct iovec iov[2] = {{hb, PCORI_WIRE_HDR_SIZE},
				       {(void *)src, flen}};
		atomic_fetch_add(&m->inflight, 1);
		rc = p->ops->sendv(p, rt->dest, iov, flen ? 2 : 1, &m->ctx);
		if (rc)
			atomic_fetch_sub(&m->inflight, 1);
	posted:
		if (rc) {
			if (i == 0)
				pcori_piggyback_undo(peer, h.flags, h.cookie);
			return rc;
		}
		m->window = (uint16_t)(i + 1);
		atomic_fetch_add_explicit(&p->st.tx, 1, memory_order_relaxed);
	}
	m->flags |= PCORI_TXM_SENT;
	return PCOR_OK;
}

/* Post waiting messages in order until one does not go.  Lock held. */
int pcori_flush_waiting(pcori_txstream_t *ts)
{
	int n = 0;
	while (!pcori_list_empty(&ts->waiting)) {
		pcori_txmsg_t *m =
		    PCORI_CONTAINER_OF(ts->waiting.next, pcori_txmsg_t, link);
		bool again = m->flags & PCORI_TXM_SENT;
		uint16_t window = m->window;
		int rc = pcori_txm_post(m);
		if (rc == PCOR_ERR_AGAIN) {
			if (m->window != window)
				pcori_timer_accepted(ts); /* some fragments went */
			pcori_timer_refused(ts);
			break;
		}
		pcori_list_remove(&m->link);
		pcori_timer_accepted(ts);
		if (rc) {
			/* The fabric refused it for good: fail the send. */
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "peer %d: message seq %u lost: %s",
				   ts->peer->pid, m->seq, pcor_strerror(rc));
			m->flags |= PCORI_TXM_DEAD;
			if (m->req)
				pcori_req_complete(m->req, rc);
			m->req = NULL;
			if (pcori_txm_done(m))
				pcori_txm_free(m);
			continue;
		}
		if (again)
			m->flags |= PCORI_TXM_RETX;
		m->posted_ns = pcori_now_ns();
		pcori_list_push_back(&ts->sent, &m->link);
		if (!ts->rto_ns)
			pcori_rto_arm(ts);
		n++;
		if (ts->probing)
			break; /* the rest when this one is acknowledged */
	}
	return n;
}

static pcori_txstream_t *txstream_of(pcori_peer_t *peer, int thid)
{
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	if (PCORI_LIKELY(ts))
		return ts;
	if (!pcori_timers_reserve())
		return NULL;
	pcori_txstream_t *n = calloc(1, sizeof(*n));
	if (!n) {
		pcori_timers_unreserve();
		return NULL;
	}
	pcori_lock_init(&n->lock);
	n->peer = peer;
	n->thid = thid;
	pcori_list_init(&n->sent);
	pcori_list_init(&n->waiting);
	pcori_list_init(&n->waiting_fin);
	pcori_list_init(&n->streaming);
	pcori_list_init(&n->orphans);
	pcori_list_init(&n->timer_link);
	atomic_init(&n->timer_slot, PCORI_TIMER_UNLISTED);
	n->backoff_us = PCORI_BACKOFF_MIN_US;
	if (!atomic_compare_exchange_strong(&peer->tx[thid], &ts, n)) {
		pcori_timers_unreserve();
		free(n);
		return ts;
	}
	return n;
}

/*
 * The lossless fast path: a small message to a peer one lossless hop
 * away is one frame handed straight to the port, with no record kept, no
 * timer and no ack of its own; its send is complete when the port took
 * it.  Only while nothing of the stream is unacknowledged on the full
 * path (a refused message there makes the receiver drop what follows,
 * and a fast message could not be sent again) and while fewer than
 * PCORI_FAST_WINDOW fast messages wait for their batched ack.  Returns
 * PCOR_ERR_AGAIN when the message must take the full path.
 */
static int fast_send(pcori_txstream_t *ts, const pcori_route_t *rt,
		     pcori_req_kind_t kind, int thid, int tag, uint32_t ctx,
		     const void *buf, size_t len, unsigned flags,
		     pcor_handle_t *h_p)
{
	pcori_port_t *p = rt->port;
	/* Complete at once: a done token, a request only when none is free. */
	pcor_handle_t h = pcori_req_done_handle();
	pcori_req_t *s = h ? NULL : pcori_req_alloc();
	if (PCORI_UNLIKELY(!h && !s))
		return PCOR_ERR_AGAIN;
	int rc = PCOR_ERR_AGAIN;
	pcori_lock(&ts->lock);
	if (PCORI_LIKELY(
		pcori_list_empty(&ts->sent) && pcori_list_empty(&ts->waiting) &&
		!atomic_load_explicit(&ts->resume_ns, memory_order_relaxed) &&
		!ts->resync && ts->next_seq - ts->acked < PCORI_FAST_WINDOW)) {
		pcori_fast_hdr_t f = {
		    .src_thid = ts->thid,
		    .dst_thid = thid,
		    .tag = tag,
		    .ctx = ctx,
		    .seq = ts->next_seq,
		    .flags = PCORI_WF_FAST,
		};
		if (pcori_piggyback(ts->peer, &f.cookie))
			f.flags |= PCORI_WF_HAS_ACK;
		rc = p->ops->inject_fast(p, rt->dest, ts->peer->pid, &f, buf,
					 len);
		if (PCORI_LIKELY(rc == PCOR_OK)) {
			ts->next_seq++;
			if (PCORI_UNLIKELY(ts->fast_port != p))
				pcori_txstream_count(ts, p);
			ts->fast_tx++;
		} else {
			pcori_piggyback_undo(ts->peer, f.flags, f.cookie);
		}
	}
	pcori_unlock(&ts->lock);
	if (PCORI_UNLIKELY(rc)) {
		if (s)
			pcori_req_free(s);
		else
			pcori_req_done_undo(h);
		return rc;
	}
	/* The bytes are in the channel: the buffer is the caller's again. */
	if (kind == PCORI_REQ_SEND_DMA && (flags & PCOR_SEND_HANDOVER))
		pcori_dma_free((void *)buf);
	if (PCORI_LIKELY(h)) {
		*h_p = h;
		return PCOR_OK;
	}
	s->kind = (uint16_t)kind;
	s->pid = ts->peer->pid;
	s->thid = thid;
	s->tag = tag;
	s->ctx = ctx;
	pcori_req_complete_unseen(s, PCOR_OK);
	*h_p = pcori_req_handle(s);
	return PCOR_OK;
}

int pcori_remote_send(pcori_req_kind_t kind, int pid, int thid, int tag,
		      uint32_t ctx, const void *buf, size_t len, unsigned flags,
		      pcor_handle_t *h_p)
{
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer)
		return PCOR_ERR_BADPID;
	int rc = pcori_peer_ready(peer);
	if (rc)
		return rc;
	int self = pcori_self_thid();
	pcori_txstream_t *ts = txstream_of(peer, self);
	if (!ts)
		return PCOR_ERR_NOMEM;

	pcori_route_t *rt = pcori_peer_route(peer);
	const bool copy = kind == PCORI_REQ_SEND_COPY;
	const bool rndv = goes_rndv(rt, len, copy);
	if (len <= pcori_net.fast_max && !rndv) {
		if (PCORI_LIKELY(pcori_route_fast(rt) &&
				 len <= rt->port->fast_max)) {
			rc = fast_send(ts, rt, kind, thid, tag, ctx, buf, len,
				       flags, h_p);
			if (rc != PCOR_ERR_AGAIN)
				return rc;
		}
	}

	uint32_t nfrags = pcori_frag_count(len, pcori_net.frag_size);
	size_t hbytes = tx_hdr_bytes(len, rndv);
	/*
	 * A small eager copy lives in the record.  A larger one goes to DMA
	 * memory, whose slabs are kept once made: in records, a window of
	 * them freed at once passed glibc's trim threshold, went back to
	 * the kernel and was faulted in again by the next window, a page at
	 * a time (sendCopy of 4-64 KiB streamed at 130-360 MB/s over net).
	 */
	const bool in_record = copy && !rndv && len <= TXM_INLINE_MAX;
	size_t inline_copy = in_record ? len : 0;
	/*
	 * Charged before anything is allocated: a refusal sends nothing.  A
	 * copy that alone exceeds the budget would never fit: one such at a
	 * time goes past it, charged for its record only.
	 */
	size_t cost = tx_cost(copy, len, rndv);
	bool oversize = copy && cost > (uint64_t)pcori_net.txb.max;
	if (oversize)
		cost -= len;
	rc = txb_take(cost, oversize);
	if (rc)
		return rc;
	pcori_txmsg_t *m = malloc(sizeof(*m) + hbytes + inline_copy);
	if (!m) {
		txb_put(cost, oversize);
		return PCOR_ERR_NOMEM;
	}
	memset(m, 0, sizeof(*m));
	m->held = cost;
	if (oversize)
		m->flags |= PCORI_TXM_OVERSIZE;
	m->ctx.kind = PCORI_CTX_TX;
	m->ts = ts;
	m->dst_thid = thid;
	m->tag = tag;
	m->mctx = ctx;
	m->size = len;
	m->nfrags = nfrags;
	m->hdrs = (uint8_t *)(m + 1);
	pcori_list_init(&m->link);
	pcori_list_init(&m->slink);
	if (rndv) {
		m->flags |= PCORI_TXM_RNDV;
		m->busy_port = rt ? rt->port : NULL;
		if (m->busy_port)
			atomic_fetch_add(&m->busy_port->busy, 1);
	}
	if (in_record) {
		m->data = m->hdrs + hbytes;
		if (len)
			memcpy(m->data, buf, len);
	} else if (copy) {
		/* A rendezvous copy must be readable; see in_record. */
		rc = pcori_dma_alloc(len, &m->data);
		if (rc) {
			m->data = NULL;
			/* gives back its budget and busy port */
			pcori_txm_free(m);
			return rc == PCOR_ERR_BADSIZE ? rc : PCOR_ERR_NOMEM;
		}
		if (len) /* an empty message may come from NULL */
			memcpy(m->data, buf, len);
		m->flags |= PCORI_TXM_OWNDMA;
	} else {
		m->data = (void *)buf;
		if (flags & PCOR_SEND_HANDOVER)
			m->flags |= PCORI_TXM_OWNDMA;
	}

	pcori_req_t *s = pcori_req_alloc();
	if (!s) {
		pcori_txm_free(m);
		return PCOR_ERR_AGAIN;
	}
	s->kind = (uint16_t)kind;
	pcori_req_flags(s, flags | PCORI_REQF_REMOTE);
	s->pid = pid;
	s->thid = thid;
	s->tag = tag;
	s->ctx = ctx;
	m->req = s;
	*h_p = pcori_req_handle(s);

	pcori_lock(&ts->lock);
	m->seq = ts->next_seq++;
	bool queued = !pcori_list_empty(&ts->waiting) || ts->resume_ns;
	pcori_list_push_back(&ts->waiting, &m->link);
	if (!queued)
		pcori_flush_waiting(ts);
	pcori_unlock(&ts->lock);
	return PCOR_OK;
}

/* Find a rendezvous message of a stream by its cookie.  Lock held. */
static pcori_txmsg_t *find_rndv(pcori_txstream_t *ts, uint64_t cookie)
{
	pcori_list_t *lists[] = {&ts->sent, &ts->waiting_fin};
	for (int i = 0; i < 2; i++) {
		pcori_list_t *pos;
		pcori_list_foreach (pos, lists[i]) {
			pcori_txmsg_t *m =
			    PCORI_CONTAINER_OF(pos, pcori_txmsg_t, link);
			if ((m->flags & PCORI_TXM_RNDV) &&
			    txm_cookie(m) == cookie)
				return m;
		}
	}
	return NULL;
}

static void on_fin(pcori_peer_t *peer, int32_t thid, uint64_t cookie)
{
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	if (!ts)
		return;
	pcori_deferred_t d = {0};
	pcori_txmsg_t *dead = NULL;
	pcori_lock(&ts->lock);
	pcori_txmsg_t *m = find_rndv(ts, cookie);
	if (m) {
		m->flags |= PCORI_TXM_FINNED;
		if (settle_unlink(m, &d))
			dead = m;
	}
	pcori_unlock(&ts->lock);
	pcori_run_deferred(&d);
	if (dead)
		pcori_txm_free(dead);
}

/*
 * The receiver sends FIN until we say we have it (a repeat finds no
 * message here and is acknowledged all the same).
 */
void pcori_on_fin_frame(pcori_peer_t *peer, int32_t thid, uint64_t cookie)
{
	on_fin(peer, thid, cookie);
	pcori_send_ctl(peer, PCORI_W_FINACK, 0, 0, cookie, 0, NULL);
}

/* Try m's fragments again shortly (the port or memory was short). */
static void stream_later(pcori_txstream_t *ts, pcori_txmsg_t *m)
{
	if (pcori_list_empty(&m->slink))
		pcori_list_push_back(&ts->streaming, &m->slink);
	pcori_timer_refused(ts);
}

/* Post the pending fragments of a streamed rendezvous.  Lock held. */
void pcori_stream_post(pcori_txmsg_t *m)
{
	pcori_txstream_t *ts = m->ts;
	pcori_peer_t *peer = ts->peer;
	pcori_route_t *rt = pcori_peer_route(peer);
	if (!rt) {
		m->sfrag = m->send; /* the loss of the peer ends it */
		if (!pcori_list_empty(&m->slink))
			pcori_list_remove(&m->slink);
		return;
	}
	pcori_port_t *p = rt->port;
	if (!m->banks && m->sfrag < m->send &&
	    !(m->banks = malloc(STREAM_BANKS))) {
		stream_later(ts, m);
		return;
	}
	while (m->sfrag < m->send) {
		uint32_t i = m->sfrag;
		size_t off, flen;
		pcori_wire_hdr_t h;
		pcori_frag_bounds(m->size, pcori_net.frag_size, i, &off, &flen);
		hdr_for(m, &h, PCORI_W_DATA);
		h.flags = PCORI_WF_RNDV;
		h.cookie = txm_cookie(m);
		h.frag_idx = i;
		h.frag_len = (uint32_t)flen;
		/* Two banks: a window's headers live until the next is asked.
		 */
		uint8_t *hb =
		    m->banks +
		    ((size_t)((i / PCORI_FRAG_WINDOW) & 1) * PCORI_FRAG_WINDOW +
		     i % PCORI_FRAG_WINDOW) *
			PCORI_WIRE_HDR_SIZE;
		pcori_wire_encode(&h, hb);
		struct iovec iov[2] = {{hb, PCORI_WIRE_HDR_SIZE},
				       {(char *)m->data + off, flen}};
		atomic_fetch_add(&m->inflight, 1);
		int rc = p->ops->sendv(p, rt->dest, iov, 2, &m->ctx);
		if (rc) {
			atomic_fetch_sub(&m->inflight, 1);
			if (rc == PCOR_ERR_AGAIN) {
				stream_later(ts, m);
				return;
			}
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "peer %d: streamed fragment %u not sent: %s",
				   peer->pid, i, pcor_strerror(rc));
			m->sfrag = m->send;
			break;
		}
		pcori_timer_accepted(ts);
		atomic_fetch_add_explicit(&p->st.tx, 1, memory_order_relaxed);
		m->sfrag++;
	}
	if (!pcori_list_empty(&m->slink))
		pcori_list_remove(&m->slink);
}

/* The receiver wants window w of a streamed rendezvous. */
void pcori_on_cts(pcori_peer_t *peer, int32_t thid, uint64_t cookie, uint32_t w)
{
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	if (!ts)
		return;
	pcori_lock(&ts->lock);
	pcori_txmsg_t *m = find_rndv(ts, cookie);
	uint32_t first = w * PCORI_FRAG_WINDOW;
	/*
	 * A request for an older window is stale.  A repeated one (the
	 * receiver lost something) is served once the window's earlier posts
	 * are done: the provider may still read their headers, and
	 * completions in send order mean that, once the receiver has the
	 * next window, the repeat has left too (two header banks suffice).
	 */
	bool repeat = m && w == m->cts_w && m->send > first;
	if (m && first < m->nfrags && w >= m->cts_w &&
	    !(repeat && atomic_load(&m->inflight))) {
		m->cts_w = w;
		m->sfrag = first;
		m->send = PCORI_MIN(first + PCORI_FRAG_WINDOW, m->nfrags);
		pcori_stream_post(m);
	}
	pcori_unlock(&ts->lock);
}

void pcori_port_tx_done(pcori_port_t *p, pcori_ctx_t *ctx, int status)
{
	(void)p;
	if (ctx->kind == PCORI_CTX_TXCTL) {
		free(ctx);
		return;
	}
	pcori_txmsg_t *m = (pcori_txmsg_t *)ctx;
	pcori_txstream_t *ts = m->ts;
	bool dead = false;
	pcori_deferred_t d = {0};
	pcori_route_t *rt = status ? pcori_peer_route(ts->peer) : NULL;
	pcori_lock(&ts->lock);
	if (status && rt && rt->next_hop != ts->peer->pid &&
	    atomic_load(&ts->peer->state) != PCORI_PEER_LOST) {
		/*
		 * Sent through a gateway: its failure says nothing of the
		 * destination.  The frame is lost like any other and resent,
		 * on the rebuilt route, or failed if none is left.
		 */
	} else if (status && !(m->flags & PCORI_TXM_DEAD) &&
		   !((m->flags & PCORI_TXM_ACKED) &&
		     (!(m->flags & PCORI_TXM_RNDV) ||
		      (m->flags & PCORI_TXM_FINNED)))) {
		/*
		 * A send the fabric failed: the peer is likely gone.  (A
		 * resend of what was accepted already changes nothing.)
		 */
		m->flags |= PCORI_TXM_DEAD;
		if (m->req) {
			pcori_defer(&d, PCORI_D_COMPLETE, m->req,
				    atomic_load(&ts->peer->state) ==
					    PCORI_PEER_LOST
					? PCOR_ERR_PEER_LOST
					: status,
				    NULL);
			m->req = NULL;
		}
	}
	if (atomic_fetch_sub_explicit(&m->inflight, 1, memory_order_acq_rel) ==
	    1)
		dead = settle_unlink(m, &d);
	pcori_unlock(&ts->lock);
	pcori_run_deferred(&d);
	if (dead)
		pcori_txm_free(m);
}
