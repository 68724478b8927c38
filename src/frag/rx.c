/*
 * rx.c -- arrivals: the ports' receive upcalls, the PCOR_DROP_EVERY test
 * loss, header checks, frames for other processes (ctl.c sends them on),
 * order within a stream (frames ahead of their turn held and replayed,
 * gaps asked for with selective NACKs, refusal when there is no room),
 * reassembly of eager messages into a posted receive or an MCB, the
 * fast path's common case, the hand-off of rendezvous requests to
 * rndv.c and of acks, NACKs, CTS and FIN to the sender's parts, and
 * failing what a lost peer was sending us.
 *
 * Locks: runs in port progress (that port's progress lock held).  A
 * peer's rx_lock guards its receive streams and their held frames; a
 * match queue's lock is taken inside it.  Requests are completed, and
 * acks riding on frames handled, after rx_lock is dropped.
 */
#include "proto.h"

/*
 * Frames held behind a gap before the receiver asks for what is missing
 * (more than one: a fabric that reorders should not cost a resend).
 */
#define GAP_HELD 2u
/*
 * Frames held since a gap was asked for before it is asked for again
 * (the NACK or the resend was lost too): many round trips' worth.
 */
#define GAP_REASK 64u

/* ------------------------------------------------------ receive side */

static pcori_rxstream_t *rxstream_of(pcori_peer_t *peer, int thid)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	pcori_rxstream_t *rs = peer->rx[thid];
	if (PCORI_LIKELY(rs))
		return rs;
	rs = calloc(1, sizeof(*rs));
	if (!rs)
		return NULL;
	rs->thid = thid;
	pcori_list_init(&rs->ack_link);
	pcori_list_init(&rs->held);
	pcori_list_init(&rs->gap_link);
	peer->rx[thid] = rs;
	return rs;
}

/*
 * Where a new message goes: a posted receive, or a fresh MCB.  A fast
 * message on a lossless hop (unrefusable: the sender kept no copy) that
 * finds the pool or budget exhausted takes an MCB from outside the pool
 * rather than stall the channel, which carries other streams' messages
 * too (one of them may be what lets the receiver drain the pool).  Its
 * stream is then throttled: its acks stop short of it until every such
 * MCB is gone, so the sender's fast window bounds them per stream.
 */
static int start_message(pcori_peer_t *peer, pcori_rxstream_t *rs,
			 const pcori_wire_hdr_t *h, const pcori_mkey_t *k,
			 bool rndv, const pcori_wire_rts_t *rts,
			 bool unrefusable, pcori_deferred_t *d)
{
	pcori_mq_t *mq = &pcori_msg.mqs[h->dst_thid];
	size_t size = (size_t)h->total_size;
	pcori_lock(&mq->lock);
	pcori_req_t *r = pcori_mq_take_posted(mq, k);
	pcori_mcb_t *m = NULL;
	if (!r) {
		size_t held = (!rndv && size > PCORI_MCB_INLINE) ? size : 0;
		uint64_t dl = 0;
		bool over = false;
		m = pcori_mcb_get(held, false, &dl);
		if (!m && unrefusable) {
			m = pcori_mcb_get_overflow(held);
			over = true;
		}
		if (m && held && pcori_dma_alloc(size, &m->data)) {
			/* Its budget goes back with it. */
			m->flags = PCORI_MCB_DMA_DATA;
			m->size = size;
			pcori_mcb_release(m);
			m = NULL;
		}
		if (!m) {
			pcori_unlock(&mq->lock);
			return PCOR_ERR_AGAIN;
		}
		if (over && !rs->throttled) {
			rs->throttled = true;
			rs->throttle_seq = h->seq;
		}
		m->hent.key = *k;
		m->size = size;
		m->seq = h->seq;
		m->origin = peer;
		if (rndv) {
			m->flags = PCORI_MCB_RNDV;
			m->rts_addr = rts->addr;
			m->rts_key = rts->key;
			m->rts_flags = rts->flags;
			m->cookie = h->cookie;
			m->reasm.nfrags = h->frag_count;
			atomic_store(&m->mstate, PCORI_MCB_COMPLETE);
		} else if (held) {
			m->flags = PCORI_MCB_DMA_DATA;
		} else {
			m->flags = PCORI_MCB_INLINE_DATA;
			m->data = m->inl;
		}
		pcori_mq_add_unexp(mq, m);
	}
	pcori_unlock(&mq->lock);

	rs->expected++;
	rs->req = r;
	rs->mcb = m;
	rs->size = size;
	if (rndv) {
		rs->active = false;
		rs->req = NULL;
		rs->mcb = NULL;
		if (r) {
			pcori_rndv_t *v = pcori_rndv_new(
			    r, peer, k, size, rts, h->cookie, h->frag_count);
			if (v)
				pcori_defer(d, PCORI_D_RNDV, r, 0, v);
			else
				pcori_recv_finish(r, k, size, NULL,
						  PCOR_ERR_NOMEM, d);
		}
		return PCOR_OK;
	}
	rs->active = true;
	pcori_reasm_init(&rs->reasm, h->frag_count);
	if (r && r->kind == PCORI_REQ_RECV_DMA) {
		r->buf = NULL;
		r->len = size;
		if (size && pcori_dma_alloc(size, &r->buf))
			r->buf = NULL; /* reported as NOMEM at the end */
	}
	return PCOR_OK;
}

/* A frame that arrived ahead of its turn, kept until its turn comes. */
typedef struct held {
	pcori_list_t link;
	uint32_t seq;
	bool first; /* a message's first frame (or its RTS) */
	size_t len;
	uint8_t msg[];
} held_t;

static void held_free(held_t *f)
{
	atomic_fetch_sub_explicit(&pcori_msg.unexp_bytes, (int64_t)f->len,
				  memory_order_relaxed);
	free(f);
}

/* Drop every held frame of a stream.  Lock held. */
static void held_clear(pcori_rxstream_t *rs)
{
	while (!pcori_list_empty(&rs->held)) {
		held_t *f = PCORI_CONTAINER_OF(rs->held.next, held_t, link);
		pcori_list_remove(&f->link);
		held_free(f);
	}
	rs->nheld = 0;
}

static void refuse(pcori_port_t *port, pcori_peer_t *peer, pcori_rxstream_t *rs,
		   const pcori_wire_hdr_t *h)
{
	atomic_fetch_add_explicit(&port->st.nack_sent, 1, memory_order_relaxed);
	/* Everything from here on will be sent again, in order. */
	rs->refused = true;
	held_clear(rs);
	pcori_send_ctl(peer, PCORI_W_NACK, h->src_thid, h->seq, 0, 0, NULL);
}

typedef enum order_verdict {
	ORDER_NOW,
	ORDER_DUP,
	ORDER_DROP,
	ORDER_HOLD
} order_verdict_t;

/*
 * Where a frame stands in its stream: its turn now, seen before, ahead
 * of its turn (held), or following a refused message (dropped: it will
 * be sent again).  Fabrics may reorder messages, so being ahead is not
 * an error.  Lock held.
 */
static order_verdict_t in_order(const pcori_rxstream_t *rs,
				const pcori_wire_hdr_t *h, bool first)
{
	uint32_t cur = rs->expected - 1; /* the message being assembled */
	if (first) {
		if (h->seq == rs->expected && !rs->active)
			return ORDER_NOW;
		if (pcori_seq_lt(h->seq, rs->expected))
			return ORDER_DUP;
	} else {
		if (rs->active && h->seq == cur)
			return ORDER_NOW;
		if (pcori_seq_lt(h->seq, cur) || (!rs->active && h->seq == cur))
			return ORDER_DUP;
	}
	return rs->refused ? ORDER_DROP : ORDER_HOLD;
}

/*
 * Ask for what held frames wait for, rather than at the sender's timeout:
 * the message the stream expects and, in a map of the 32 from it, every
 * later one of which no first frame is held, up to the last held (beyond
 * it nothing may have been sent yet).  The sender sends those again and
 * only those (selective repeat: what is held stays held).  Once per gap,
 * and again while frames keep coming behind it (the NACK or the resend
 * was lost as well) rather than wait for the sender's timeout.  Lock held.
 */
static void gap_nack(pcori_port_t *port, pcori_peer_t *peer,
		     pcori_rxstream_t *rs)
{
	uint32_t missing = rs->active ? rs->expected - 1 : rs->expected;
	if (rs->refused || !rs->nheld ||
	    (rs->gap_nacked == missing + 1 &&
	     rs->nheld < rs->gap_held + GAP_REASK))
		return;
	uint32_t have = 0, top = 0, seen = 0;
	pcori_list_t *pos;
	/* Held frames come mostly in order: the first ones tell. */
	pcori_list_foreach (pos, &rs->held) {
		const held_t *f = PCORI_CONTAINER_OF(pos, held_t, link);
		uint32_t d = f->seq - missing;
		if (++seen > 4 * 32)
			break;
		if (d >= 32)
			continue;
		if (f->first)
			have |= 1u << d;
		top = PCORI_MAX(top, d);
	}
	uint32_t want = 1; /* the message in progress: every fragment */
	for (uint32_t d = 1; d < top; d++)
		if (!(have & (1u << d)))
			want |= 1u << d;
	rs->gap_nacked = missing + 1;
	rs->gap_held = rs->nheld;
	atomic_fetch_add_explicit(&port->st.nack_sent, 1, memory_order_relaxed);
	pcori_send_ctl(peer, PCORI_W_NACK, rs->thid, missing, want,
		       PCORI_NACK_SELECTIVE, NULL);
	pcori_gap_watch(peer, rs, want);
}

/* Keep a copy of a frame ahead of its turn.  Lock held. */
static void hold(pcori_port_t *port, pcori_peer_t *peer, pcori_rxstream_t *rs,
		 const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	size_t len = PCORI_WIRE_HDR_SIZE + h->frag_len;
	int64_t now = atomic_fetch_add_explicit(
	    &pcori_msg.unexp_bytes, (int64_t)len, memory_order_relaxed);
	held_t *f = now + (int64_t)len <= pcori_msg.unexp_max
			? malloc(sizeof(*f) + len)
			: NULL;
	if (!f) {
		/* No room: make the sender go back to what we expect. */
		atomic_fetch_sub_explicit(&pcori_msg.unexp_bytes, (int64_t)len,
					  memory_order_relaxed);
		pcori_wire_hdr_t want = *h;
		want.seq = rs->active ? rs->expected - 1 : rs->expected;
		refuse(port, peer, rs, &want);
		return;
	}
	f->seq = h->seq;
	f->first = h->type == PCORI_W_RTS || h->frag_idx == 0;
	f->len = len;
	/* Kept as a frame: it may have come in another port's own form. */
	pcori_wire_encode(h, f->msg);
	if (h->frag_len)
		memcpy(f->msg + PCORI_WIRE_HDR_SIZE, payload, h->frag_len);
	uint32_t before = rs->nheld ? rs->held_top : rs->expected - 1;
	/*
	 * In sequence order (equal ones in arrival order), looked for from
	 * the tail: frames come mostly in order, and replay then finds the
	 * next one at the head instead of searching every held frame.
	 */
	pcori_list_t *at = rs->held.prev;
	while (at != &rs->held &&
	       pcori_seq_lt(h->seq, PCORI_CONTAINER_OF(at, held_t, link)->seq))
		at = at->prev;
	pcori_list_push_back(at->next, &f->link);
	rs->nheld++;
	/* Its sender is not quiet: a gap it asked for need not be again. */
	if (!pcori_list_empty(&rs->gap_link)) {
		rs->gap_ns = pcori_now_ns();
		rs->reasks = 0;
	}
	atomic_fetch_add_explicit(&port->st.held, 1, memory_order_relaxed);
	/*
	 * A later gap, seen as a jump between first frames held: ask for
	 * what it skipped at once, not when the replay reaches it (one round
	 * trip per gap, each behind the sender's whole queue).
	 */
	if (f->first && pcori_seq_lt(before, h->seq)) {
		rs->held_top = h->seq;
		uint32_t skip = h->seq - before - 1;
		if (skip && pcori_seq_lt(rs->expected, before + 1)) {
			uint32_t map =
			    skip >= 32 ? UINT32_MAX : (1u << skip) - 1;
			atomic_fetch_add_explicit(&port->st.nack_sent, 1,
						  memory_order_relaxed);
			pcori_send_ctl(peer, PCORI_W_NACK, rs->thid, before + 1,
				       map, PCORI_NACK_SELECTIVE, NULL);
		}
	}
	/*
	 * Frames behind the gap at the head: the missing ones were lost.  A
	 * lossless hop asks at the first, so that a gap it can never fill
	 * is watched (and given up) however few frames come behind it.
	 */
	if (rs->nheld >= GAP_HELD || port->lossless)
		gap_nack(port, peer, rs);
}

static void rs_abandon(pcori_peer_t *peer, pcori_rxstream_t *rs, int status,
		       pcori_deferred_t *d);

/* Sort out a frame by its place in the stream; true: process it now. */
static bool sequence(pcori_port_t *port, pcori_peer_t *peer,
		     pcori_rxstream_t *rs, const pcori_wire_hdr_t *h,
		     bool first, const uint8_t *payload, pcori_deferred_t *d)
{
	/*
	 * The sender failed what it had not seen acknowledged (its route to
	 * us had gone) and starts afresh here; its sequence never goes back.
	 */
	if (first && (h->flags & PCORI_WF_RESYNC) &&
	    !pcori_seq_lt(h->seq, rs->expected) &&
	    (h->seq != rs->expected || rs->active)) {
		if (rs->active)
			rs_abandon(peer, rs, PCOR_ERR_UNREACHABLE, d);
		held_clear(rs);
		rs->refused = false;
		rs->gap_nacked = 0;
		rs->expected = h->seq;
	}
	switch (in_order(rs, h, first)) {
	case ORDER_NOW:
		return true;
	case ORDER_DUP:
		/* A resend crossed our ack (or a duplicate): ack again. */
		atomic_fetch_add_explicit(&port->st.dup, 1,
					  memory_order_relaxed);
		if (first)
			pcori_ack_schedule(peer, rs, true);
		return false;
	case ORDER_HOLD:
		hold(port, peer, rs, h, payload);
		return false;
	case ORDER_DROP:
		return false;
	}
	return false;
}

/* false: a fast message with no room for it yet (see pcori_port_recv). */
static bool rx_data(pcori_port_t *port, pcori_peer_t *peer,
		    const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	pcori_deferred_t d = {0};
	uint32_t ack_thid = 0, ack_upto = 0;
	bool ack = false, taken = true;
	const bool fast = h->flags & PCORI_WF_FAST;
	pcori_mkey_t k = {h->src_pid, h->src_thid, h->dst_thid, h->tag, h->ctx};

	pcori_lock(&peer->rx_lock);
	pcori_rxstream_t *rs = rxstream_of(peer, h->src_thid);
	if (!rs)
		goto out;
	/* A piggybacked ack holds whatever becomes of the frame. */
	if (h->frag_idx == 0 && (h->flags & PCORI_WF_HAS_ACK)) {
		ack = true;
		ack_thid = (uint32_t)(h->cookie >> 32);
		ack_upto = (uint32_t)h->cookie;
	}
	if (!sequence(port, peer, rs, h, h->frag_idx == 0, payload, &d))
		goto out;
	if (h->frag_idx == 0) {
		if (start_message(peer, rs, h, &k, false, NULL,
				  fast && port->lossless, &d)) {
			/* A fast message cannot come again: keep it waiting. */
			if (fast && port->lossless) {
				taken = false;
				ack = false; /* it rides again with the frame */
				goto out;
			}
			refuse(port, peer, rs, h);
			goto out;
		}
		if (rs->refused) {
			/*
			 * The sender waits for this one's ack, and what we
			 * dropped after it must come again: say from where
			 * (its timeout may have sent this one alone).
			 */
			pcori_ack_schedule(peer, rs, true);
			pcori_send_ctl(peer, PCORI_W_NACK, h->src_thid,
				       rs->expected, 0, 0, NULL);
		}
		rs->refused = false;
	}
	pcori_frag_verdict_t v = pcori_reasm_accept(&rs->reasm, h->frag_idx);
	if (v != PCORI_FRAG_NEW) {
		atomic_fetch_add_explicit(&port->st.dup, 1,
					  memory_order_relaxed);
		goto out;
	}
	size_t off = (size_t)h->frag_idx * pcori_net.frag_size;
	size_t flen = h->frag_len;
	if (rs->req) {
		pcori_req_t *r = rs->req;
		if (r->buf && off < r->len)
			memcpy((char *)r->buf + off, payload,
			       PCORI_MIN(flen, r->len - off));
	} else {
		memcpy((char *)rs->mcb->data + off, payload, flen);
	}
	if (pcori_reasm_window_done(&rs->reasm) &&
	    !pcori_reasm_complete(&rs->reasm))
		pcori_reasm_advance(&rs->reasm);
	if (pcori_reasm_complete(&rs->reasm)) {
		rs->active = false;
		rs->unacked++;
		if (!fast)
			pcori_ack_schedule(peer, rs, false);
		else
			pcori_fast_ack(port, peer, rs);
		if (rs->req) {
			pcori_req_t *r = rs->req;
			int st = PCOR_OK;
			void *blk = NULL;
			if (r->kind == PCORI_REQ_RECV_DMA) {
				blk = r->buf;
				if (rs->size && !blk)
					st = PCOR_ERR_NOMEM;
			}
			pcori_recv_finish(r, &k, rs->size, blk, st, &d);
		} else {
			pcori_mcb_t *m = rs->mcb;
			if (atomic_fetch_or(&m->mstate, PCORI_MCB_COMPLETE) &
			    PCORI_MCB_CLAIMED)
				pcori_defer(&d, PCORI_D_DELIVER, m->rreq, 0, m);
		}
		rs->req = NULL;
		rs->mcb = NULL;
	}
out:
	pcori_unlock(&peer->rx_lock);
	pcori_run_deferred(&d);
	if (ack)
		pcori_on_ack(peer, (int32_t)ack_thid, ack_upto);
	return taken;
}

void pcori_rx_batch_release(pcori_rx_batch_t *b)
{
	if (b->mq) {
		pcori_unlock(&b->mq->lock);
		b->mq = NULL;
	}
	if (b->peer) {
		pcori_unlock(&b->peer->rx_lock);
		b->peer = NULL;
	}
}

/*
 * The common case of the fast path: a one-fragment fast message whose
 * turn it is, for a receive already posted.  It skips what rx_data keeps
 * for every other case (ordering by hold and replay, reassembly, MCBs).
 * false: not that case, nothing was changed and b is ended; rx_data
 * takes it.  b keeps the peer's stream lock and the thread's queue lock
 * held for the next record (NULL: one record, let go here).
 */
static bool rx_fast(const pcori_port_t *port, pcori_peer_t *peer,
		    const pcori_fast_hdr_t *f, const uint8_t *payload,
		    size_t size, pcori_rx_batch_t *b)
{
	pcori_rx_batch_t one = {0};
	if (!b)
		b = &one;
	pcori_mkey_t k = {peer->pid, f->src_thid, f->dst_thid, f->tag, f->ctx};
	pcori_mq_t *mq = &pcori_msg.mqs[f->dst_thid];
	if (b->peer != peer) {
		pcori_rx_batch_end(b);
		pcori_lock(&peer->rx_lock);
		b->peer = peer;
	}
	pcori_rxstream_t *rs = peer->rx[f->src_thid];
	if (PCORI_UNLIKELY(!rs || rs->active || rs->refused || rs->nheld ||
			   f->seq != rs->expected)) {
		pcori_rx_batch_end(b);
		return false;
	}
	if (b->mq != mq) {
		if (b->mq)
			pcori_unlock(&b->mq->lock);
		pcori_lock(&mq->lock);
		b->mq = mq;
	}
	pcori_req_t *r = pcori_mq_take_posted(mq, &k);
	if (!r) {
		pcori_rx_batch_end(b);
		return false;
	}
	rs->expected++;
	rs->unacked++;
	pcori_fast_ack(port, peer, rs);
	int st = PCOR_OK;
	void *blk = NULL;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		if (r->buf)
			pcori_copy_short(r->buf, payload,
					 PCORI_MIN(size, r->len));
	} else if (size && pcori_dma_alloc(size, &blk) == PCOR_OK) {
		pcori_copy_short(blk, payload, size);
	} else if (size) {
		st = PCOR_ERR_NOMEM;
	}
	/* Reported and judged for truncation here. */
	st = pcori_recv_settle(r, &k, size, blk, st);
	/* Under the batch's locks: nothing of it takes another. */
	pcori_req_complete(r, st);
	PCORI_HOP(PCORI_HOP_MATCHED);
	if (b == &one || (f->flags & PCORI_WF_HAS_ACK))
		pcori_rx_batch_end(b); /* the ack takes the sender's locks */
	if (f->flags & PCORI_WF_HAS_ACK)
		pcori_on_ack(peer, (int32_t)(f->cookie >> 32),
			     (uint32_t)f->cookie);
	return true;
}

static void rx_rts(pcori_port_t *port, pcori_peer_t *peer,
		   const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	pcori_deferred_t d = {0};
	pcori_wire_rts_t rts;
	pcori_wire_rts_decode(payload, &rts);
	pcori_mkey_t k = {h->src_pid, h->src_thid, h->dst_thid, h->tag, h->ctx};
	pcori_lock(&peer->rx_lock);
	pcori_rxstream_t *rs = rxstream_of(peer, h->src_thid);
	if (rs && sequence(port, peer, rs, h, true, payload, &d)) {
		if (start_message(peer, rs, h, &k, true, &rts, false, &d)) {
			refuse(port, peer, rs, h);
		} else {
			rs->unacked++;
			pcori_ack_schedule(peer, rs, rs->refused);
			rs->refused = false;
		}
	}
	pcori_unlock(&peer->rx_lock);
	pcori_run_deferred(&d);
}

/* ---------------------------------------------------------- arrivals */

/* Feed held frames whose turn has come, in order. */
static void replay(pcori_port_t *port, pcori_peer_t *peer, int32_t thid)
{
	for (;;) {
		held_t *take = NULL;
		pcori_wire_hdr_t h;
		pcori_lock(&peer->rx_lock);
		pcori_rxstream_t *rs = peer->rx[thid];
		pcori_list_t *pos, *tmp;
		if (rs)
			pcori_list_foreach_safe (pos, tmp, &rs->held) {
				held_t *f =
				    PCORI_CONTAINER_OF(pos, held_t, link);
				/* Sorted: nothing past this one is next. */
				if (pcori_seq_lt(rs->expected, f->seq))
					break;
				pcori_wire_hdr_t k = {.seq = f->seq};
				order_verdict_t v = in_order(rs, &k, f->first);
				if (v == ORDER_DUP) { /* held twice */
					pcori_list_remove(pos);
					rs->nheld--;
					held_free(f);
					continue;
				}
				if (v != ORDER_NOW)
					continue;
				pcori_wire_limits_t lim = pcori_net.lim;
				lim.nprocs = pcori_rt.nprocs;
				pcori_list_remove(pos);
				rs->nheld--;
				/* Encoded here: it decodes, unless memory broke. */
				if (pcori_wire_decode(f->msg, f->len, &lim,
						      &h) != PCORI_WE_OK) {
					held_free(f);
					continue;
				}
				take = f;
				break;
			}
		/* Stopped at the next gap: ask for it at once. */
		if (rs && !take)
			gap_nack(port, peer, rs);
		pcori_unlock(&peer->rx_lock);
		if (!take)
			return;
		const uint8_t *payload = take->msg + PCORI_WIRE_HDR_SIZE;
		if (h.type == PCORI_W_RTS)
			rx_rts(port, peer, &h, payload);
		else
			(void)rx_data(port, peer, &h, payload);
		held_free(take);
	}
}

/* Count a frame; true when PCOR_DROP_EVERY says to lose it. */
static bool test_drop(pcori_port_t *port)
{
	/* Frames come in under the port's progress lock: one writer. */
	uint64_t nrx = atomic_load_explicit(&port->st.rx, memory_order_relaxed);
	atomic_store_explicit(&port->st.rx, nrx + 1, memory_order_relaxed);
	int drop = pcori_rt.cfg.drop_every;
	if (PCORI_LIKELY(!drop) || nrx % (uint64_t)drop != (uint64_t)drop - 1)
		return false;
	atomic_fetch_add_explicit(&port->st.test_drop, 1, memory_order_relaxed);
	return true;
}

static bool recv_decoded(pcori_port_t *port, const pcori_wire_hdr_t *h,
			 const uint8_t *payload, const void *msg, size_t len);

bool pcori_port_recv(pcori_port_t *port, const void *msg, size_t len)
{
	pcori_wire_hdr_t h;
	if (PCORI_UNLIKELY(test_drop(port)))
		return true;
	pcori_wire_limits_t lim = pcori_net.lim;
	lim.nprocs = pcori_rt.nprocs; /* grows as processes join */
	pcori_wire_err_t e = pcori_wire_decode(msg, len, &lim, &h);
	if (PCORI_UNLIKELY(e != PCORI_WE_OK)) {
		atomic_fetch_add_explicit(&port->st.bad_hdr, 1,
					  memory_order_relaxed);
		PCORI_WARN_ONCE(PCORI_SUB_DISPATCH,
				"port %d: dropped a message with a bad header "
				"(%s); further ones are only counted",
				port->index, pcori_wire_err_str(e));
		/* The first few in full, to tell a corrupting fabric apart. */
		static _Atomic int shown;
		if (pcori_log_enabled(PCORI_LOG_INFO, PCORI_SUB_DISPATCH) &&
		    atomic_fetch_add_explicit(&shown, 1, memory_order_relaxed) <
			8) {
			char hex[2 * PCORI_WIRE_HDR_SIZE + 1] = "";
			size_t n = PCORI_MIN(len, (size_t)PCORI_WIRE_HDR_SIZE);
			for (size_t i = 0; i < n; i++)
				snprintf(hex + 2 * i, 3, "%02x",
					 ((const uint8_t *)msg)[i]);
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "port %d: bad header (%s), %zu bytes: %s",
				   port->index, pcori_wire_err_str(e), len,
				   hex);
		}
		return true;
	}
	return recv_decoded(
	    port, &h, (const uint8_t *)msg + PCORI_WIRE_HDR_SIZE, msg, len);
}

/* rx_fast for a fast message that came as a whole frame. */
static bool rx_fast_frame(const pcori_port_t *port, pcori_peer_t *peer,
			  const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	const pcori_fast_hdr_t f = {
	    .src_thid = h->src_thid,
	    .dst_thid = h->dst_thid,
	    .tag = h->tag,
	    .ctx = h->ctx,
	    .seq = h->seq,
	    .flags = h->flags,
	    .cookie = h->cookie,
	};
	return rx_fast(port, peer, &f, payload, h->frag_len, NULL);
}

/* Is peer one whose messages are taken?  (A lost one's are dropped.) */
static pcori_peer_t *rx_peer(int pid)
{
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer || atomic_load_explicit(&peer->state, memory_order_acquire) ==
			 PCORI_PEER_LOST)
		return NULL;
	if (PCORI_UNLIKELY(!pcori_peer_route(peer)) && pcori_peer_ready(peer))
		return NULL;
	return peer;
}

/* What pcori_wire_decode checks of a frame, for a fast record's fields. */
static inline bool fast_fields_bad(const pcori_fast_hdr_t *f, size_t len)
{
	uint32_t max = (uint32_t)pcori_rt.max_threads;
	return (uint32_t)f->src_thid >= max || (uint32_t)f->dst_thid >= max ||
	       f->tag < 0 ||
	       (f->flags & ~(PCORI_WF_FAST | PCORI_WF_HAS_ACK)) ||
	       !(f->flags & PCORI_WF_FAST) || len > pcori_net.frag_size;
}

int pcori_port_recv_fast(pcori_port_t *port, int src_pid,
			 const pcori_fast_hdr_t *f, const void *payload,
			 size_t len, pcori_rx_batch_t *b)
{
	if (PCORI_UNLIKELY(fast_fields_bad(f, len))) {
		pcori_rx_batch_end(b);
		return -1;
	}
	if (PCORI_UNLIKELY(test_drop(port))) {
		pcori_rx_batch_end(b);
		return 1;
	}
	pcori_peer_t *peer = b->peer;
	/* The batch's peer is known; a lost one's stream is still dropped. */
	if (!peer || peer->pid != src_pid ||
	    atomic_load_explicit(&peer->state, memory_order_acquire) ==
		PCORI_PEER_LOST) {
		pcori_rx_batch_end(b);
		peer = rx_peer(src_pid);
	}
	if (!peer)
		return 1;
	if (port->lossless && rx_fast(port, peer, f, payload, len, b))
		return 1;
	pcori_rx_batch_end(b);
	/* Not the common case: the full path, with the frame it stands for. */
	pcori_wire_hdr_t h = pcori_fast_wire(f, src_pid, pcori_rt.pid, len,
					     pcori_net.lim.key_check);
	if (!rx_data(port, peer, &h, payload))
		return 0;
	replay(port, peer, h.src_thid);
	return 1;
}

int pcori_port_take_fast(pcori_port_t *port, int src_pid,
			 const pcori_fast_hdr_t *f, const void *payload,
			 size_t len)
{
	/* PCOR_DROP_EVERY's losses and counts are pcori_port_recv_fast's. */
	if (PCORI_UNLIKELY(pcori_rt.cfg.drop_every) || !port->lossless ||
	    (f->flags & PCORI_WF_HAS_ACK) || fast_fields_bad(f, len))
		return 0;
	pcori_peer_t *peer = pcori_peer_get(src_pid);
	if (!peer ||
	    atomic_load_explicit(&peer->state, memory_order_acquire) ==
		PCORI_PEER_LOST ||
	    !pcori_peer_route(peer) ||
	    !rx_fast(port, peer, f, payload, len, NULL))
		return 0;
	/* Counted as test_drop counts (one writer: progress). */
	uint64_t nrx = atomic_load_explicit(&port->st.rx, memory_order_relaxed);
	atomic_store_explicit(&port->st.rx, nrx + 1, memory_order_relaxed);
	return 1;
}

/* msg/len: the whole frame as it came, if it did (forwarding needs it). */
static bool recv_decoded(pcori_port_t *port, const pcori_wire_hdr_t *h,
			 const uint8_t *payload, const void *msg, size_t len)
{
	if (PCORI_UNLIKELY(h->dst_pid != pcori_rt.pid)) {
		if (msg) /* only whole frames travel on */
			pcori_forward(port, msg, len, h);
		return true;
	}
	pcori_peer_t *peer = rx_peer(h->src_pid);
	if (!peer)
		return true;
	switch (h->type) {
	case PCORI_W_DATA:
		if (h->flags & PCORI_WF_RNDV) {
			pcori_rx_stream(port, peer, h, payload);
		} else if ((h->flags & PCORI_WF_FAST) && port->lossless &&
			   h->frag_count == 1 &&
			   rx_fast_frame(port, peer, h, payload)) {
			break;
		} else {
			if (!rx_data(port, peer, h, payload))
				return false;
			replay(port, peer, h->src_thid);
		}
		break;
	case PCORI_W_RTS:
		rx_rts(port, peer, h, payload);
		replay(port, peer, h->src_thid);
		break;
	case PCORI_W_ACK:
		pcori_on_ack(peer, h->dst_thid, h->seq);
		break;
	case PCORI_W_NACK:
		pcori_on_nack(port, peer, h->dst_thid, h->seq, h->frag_idx,
			      h->cookie);
		break;
	case PCORI_W_FIN:
		pcori_on_fin_frame(peer, h->dst_thid, h->cookie);
		break;
	case PCORI_W_FINACK:
		pcori_on_finack(peer, h->cookie);
		break;
	case PCORI_W_CTS:
		pcori_on_cts(peer, h->dst_thid, h->cookie, h->frag_idx);
		break;
	case PCORI_W_CTRL:
		pcori_ctrl_recv(peer, h, payload);
		break;
	}
	return true;
}

/* ------------------------------------------------------- peer failure */

/* The message a stream is assembling will not be finished.  Lock held. */
static void rs_abandon(pcori_peer_t *peer, pcori_rxstream_t *rs, int status,
		       pcori_deferred_t *d)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	pcori_mkey_t k = {peer->pid, rs->thid, 0, 0, 0};
	rs->active = false;
	if (rs->req) {
		pcori_req_t *r = rs->req;
		pcori_recv_finish(r, &k, rs->size,
				  r->kind == PCORI_REQ_RECV_DMA ? r->buf : NULL,
				  status, d);
	} else if (rs->mcb) {
		pcori_mcb_t *m = rs->mcb;
		pcori_mq_t *mq = &pcori_msg.mqs[m->hent.key.dst_thid];
		pcori_lock(&mq->lock);
		uint32_t st = atomic_fetch_or(&m->mstate, PCORI_MCB_COMPLETE);
		if (!(st & PCORI_MCB_CLAIMED))
			pcori_mq_remove_unexp(mq, m);
		pcori_unlock(&mq->lock);
		if (st & PCORI_MCB_CLAIMED)
			pcori_recv_finish(m->rreq, &m->hent.key, m->size, NULL,
					  status, d);
		if (m->flags & PCORI_MCB_DMA_DATA)
			pcori_dma_free(m->data);
		pcori_mcb_release(m);
	}
	rs->req = NULL;
	rs->mcb = NULL;
}

void pcori_rx_fail(pcori_peer_t *peer, int status)
{
	pcori_rndv_t *rl = NULL, *v, *tmp;
	int t = 0;
	do {
		pcori_deferred_t d = {0};
		pcori_lock(&peer->rx_lock);
		/* A few at a time: completions run outside the lock. */
		for (; t < pcori_rt.max_threads && d.n < 6; t++) {
			pcori_rxstream_t *rs = peer->rx[t];
			if (!rs)
				continue;
			held_clear(rs);
			if (rs->active)
				rs_abandon(peer, rs, status, &d);
		}
		if (t >= pcori_rt.max_threads)
			HASH_ITER(hh, peer->rndv, v, tmp)
			{
				HASH_DEL(peer->rndv, v);
				v->hh.next = rl; /* a private list now */
				rl = v;
			}
		pcori_unlock(&peer->rx_lock);
		pcori_run_deferred(&d);
	} while (t < pcori_rt.max_threads);
	/* Each completes once no read into the application's buffer is left. */
	while (rl) {
		v = rl;
		rl = v->hh.next;
		pcori_rndv_fail(v, status);
		pcori_rndv_unref(v); /* the table's reference */
	}
}
