/*
 * proto.c -- the inter-process message protocol.
 *
 * Design notes
 *  - Streams.  Messages from one thread to one process form a stream with
 *    consecutive sequence numbers.  The receiver starts messages strictly
 *    in sequence, so matching (done when a message starts) keeps the
 *    sender's order; fabrics are asked for send-after-send ordering.
 *  - Eager messages (up to PCOR_EAGER_MAX) go as fragments of at most
 *    PCOR_FRAG_SIZE, straight into a posted receive when one matches the
 *    first fragment, else into an MCB (the unexpected queue keeps its
 *    place from the first fragment on).  A 32-bit bitmap per window
 *    records what has arrived: duplicates and strays are dropped.
 *  - Refusal.  A receiver with no MCB (or budget) for a new message sends
 *    a NACK and drops that message and everything after it in the stream.
 *    The sender goes back to the refused message and resends from there
 *    after a back-off that doubles (the paper's retransmission on lack of
 *    resources).  So nothing is lost and receiver memory stays bounded.
 *  - Acknowledgements are cumulative per stream.  They ride on the first
 *    fragment of a message going the other way when one leaves soon
 *    enough (PCOR_ACK_DELAY_NS), else go alone; every 32 messages at the
 *    latest, and always before a dispatcher goes to sleep.  A send
 *    completes once the receiving process has accepted its message: ack
 *    for eager sends and copied rendezvous sends, FIN for sendDMA
 *    rendezvous (the buffer is the sender's until the data is taken).
 *  - Rendezvous.  Larger messages send only a request (RTS).  When a
 *    receive takes it, the receiver pulls the data with remote reads
 *    straight into the receive's buffer, or -- with no remote reads on
 *    the path -- asks for windows of 32 fragments (CTS) and acknowledges
 *    each; FIN ends it.
 *  - Send budget.  A message on the full path is charged against
 *    PCOR_SEND_BYTES from the send call until its record is freed (what
 *    counts: pcori_tx_cost).  One that does not fit waits up to
 *    PCOR_BACKPRESSURE_MS, driving progress (acks free records), then
 *    fails with PCOR_ERR_AGAIN before it takes a sequence number: nothing
 *    of it was sent.  Fast-path messages keep nothing and are not charged.
 *    A copy larger than the whole budget could never fit: one such at a
 *    time is let past it, charged for its record only, so the memory
 *    held stays below the budget plus the largest message.
 *  - Every request touched here is completed outside the stream and
 *    queue locks, through a small list of deferred actions.
 */
#include "dispatch.h"

#define ACK_EVERY      32u /* messages before an ack must go */
#define BACKOFF_MIN_US 100u
#define BACKOFF_MAX_US 50000u
#define READ_CHUNK     ((size_t)8 << 20)
/*
 * Frames held behind a gap before the receiver asks for what is missing
 * (more than one: a fabric that reorders should not cost a resend).
 */
#define GAP_HELD       2u
/*
 * Frames held since a gap was asked for before it is asked for again
 * (the NACK or the resend was lost too): many round trips' worth.
 */
#define GAP_REASK      64u
/* A NACK's frag_idx: 0 refused (go back), this: selective (cookie map). */
#define NACK_SELECTIVE 1u
/*
 * Fast path (lossless ports): messages a stream may have sent without an
 * acknowledgement, and how often the receiver acknowledges them.  The
 * window bounds what a receiver must take in without being able to
 * refuse it; acks come in batches, usually riding on replies.
 */
#define FAST_WINDOW    256u
#define FAST_ACK_EVERY 64u
/*
 * Fast messages on ports without `unsettled` are also acknowledged this
 * long after the first unacknowledged one (for the sender's finalize):
 * long enough for a reply to carry it in any ping-pong.
 */
#define FAST_ACK_DELAY_NS 2000000u
/*
 * A rendezvous request's bytes, kept for resends apart from the streamed
 * fragments' headers (a resend may come while those are written).
 */
#define RTS_ROOM 128u
_Static_assert(RTS_ROOM >= PCORI_WIRE_HDR_SIZE + PCORI_WIRE_RTS_SIZE,
	       "room for a rendezvous request");

pcori_net_t pcori_net;

static inline bool seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* ------------------------------------------------------------ helpers */

/* Fill a header with this job's constants. */
static void hdr_init(pcori_wire_hdr_t *h, uint8_t type, int dst_pid)
{
	memset(h, 0, sizeof(*h));
	h->version = PCORI_WIRE_VERSION;
	h->type = type;
	h->hops = PCORI_WIRE_MAX_HOPS;
	h->key_check = pcori_net.lim.key_check;
	h->src_pid = pcori_rt.pid;
	h->dst_pid = dst_pid;
}

/* Control messages that could not be posted yet wait here. */
typedef struct ctlmsg {
	pcori_ctx_t ctx; /* PCORI_CTX_TXCTL */
	pcori_list_t link;
	pcori_peer_t *peer;
	size_t len;
	uint8_t buf[];
} ctlmsg_t;

static struct {
	pcori_lock_t lock; /* guards list */
	pcori_list_t list;
	_Atomic int n;
	_Atomic size_t bytes; /* queued, for the forwarding bound */
} ctlq = {.lock = PCORI_LOCK_INITIALIZER, .list = {&ctlq.list, &ctlq.list}};

/* Frames a gateway keeps queued for the next hop at most (then drops). */
#define FWD_QUEUE_MAX ((size_t)64 << 20)

static void ctlq_push(ctlmsg_t *c)
{
	pcori_lock(&ctlq.lock);
	pcori_list_push_back(&ctlq.list, &c->link);
	atomic_fetch_add(&ctlq.n, 1);
	atomic_fetch_add(&ctlq.bytes, c->len);
	pcori_unlock(&ctlq.lock);
	pcori_dispatch_kick();
}

/*
 * Post a header plus body as one control message; if the send queue is
 * full, keep a copy and post it later (control messages are never lost).
 */
static int ctl_post(pcori_peer_t *peer, const uint8_t *hdr, const void *body,
		    size_t blen)
{
	pcori_route_t *rt = pcori_peer_route(peer);
	if (!rt)
		return PCOR_ERR_UNREACHABLE;
	pcori_port_t *p = rt->port;
	size_t len = PCORI_WIRE_HDR_SIZE + blen;
	int rc;
	if (len <= p->inject_max && len <= 512) {
		uint8_t tmp[512];
		memcpy(tmp, hdr, PCORI_WIRE_HDR_SIZE);
		if (blen)
			memcpy(tmp + PCORI_WIRE_HDR_SIZE, body, blen);
		rc = p->ops->inject(p, rt->dest, tmp, len);
		if (rc != PCOR_ERR_AGAIN)
			return rc;
	}
	ctlmsg_t *c = malloc(sizeof(*c) + len);
	if (!c)
		return PCOR_ERR_NOMEM;
	c->ctx.kind = PCORI_CTX_TXCTL;
	c->peer = peer;
	c->len = len;
	memcpy(c->buf, hdr, PCORI_WIRE_HDR_SIZE);
	if (blen)
		memcpy(c->buf + PCORI_WIRE_HDR_SIZE, body, blen);
	if (len > p->inject_max) {
		struct iovec iov = {c->buf, len};
		rc = p->ops->sendv(p, rt->dest, &iov, 1, &c->ctx);
		if (rc == PCOR_OK)
			return PCOR_OK;
		if (rc != PCOR_ERR_AGAIN) {
			free(c);
			return rc;
		}
	}
	ctlq_push(c);
	return PCOR_OK;
}

/* Retry queued control messages.  Returns how many went out. */
static int ctlq_run(void)
{
	if (!atomic_load_explicit(&ctlq.n, memory_order_relaxed))
		return 0;
	int done = 0;
	pcori_lock(&ctlq.lock);
	while (!pcori_list_empty(&ctlq.list)) {
		ctlmsg_t *c =
		    PCORI_CONTAINER_OF(ctlq.list.next, ctlmsg_t, link);
		/*
		 * Off the list before it is posted: a sendv'd message is freed
		 * at its completion, which another thread may see at once.
		 */
		pcori_list_remove(&c->link);
		pcori_route_t *rt = pcori_peer_route(c->peer);
		size_t len = c->len;
		bool inject = rt && len <= rt->port->inject_max;
		int rc;
		if (atomic_load(&c->peer->state) == PCORI_PEER_LOST || !rt) {
			rc = PCOR_ERR_PEER_LOST;
		} else if (inject) {
			rc = rt->port->ops->inject(rt->port, rt->dest, c->buf,
						   len);
		} else {
			struct iovec iov = {c->buf, len};
			rc = rt->port->ops->sendv(rt->port, rt->dest, &iov, 1,
						  &c->ctx);
		}
		if (rc == PCOR_ERR_AGAIN) { /* back in front, in order */
			pcori_list_push_back(ctlq.list.next, &c->link);
			break;
		}
		atomic_fetch_sub(&ctlq.n, 1);
		atomic_fetch_sub(&ctlq.bytes, len);
		if (rc != PCOR_OK || inject)
			free(c);
		done++;
	}
	pcori_unlock(&ctlq.lock);
	return done;
}

static void send_ctl(pcori_peer_t *peer, uint8_t type, int32_t thid,
		     uint32_t seq, uint64_t cookie, uint32_t frag_idx,
		     const pcori_wire_hdr_t *ref)
{
	pcori_wire_hdr_t h;
	uint8_t buf[PCORI_WIRE_HDR_SIZE];
	hdr_init(&h, type, peer->pid);
	h.src_thid = 0;
	h.dst_thid = thid;
	h.seq = seq;
	h.cookie = cookie;
	h.frag_idx = frag_idx;
	if (ref) { /* CTS repeats the message geometry */
		h.total_size = ref->total_size;
		h.frag_count = ref->frag_count;
	}
	pcori_wire_encode(&h, buf);
	int rc = ctl_post(peer, buf, NULL, 0);
	if (rc && rc != PCOR_ERR_PEER_LOST)
		PCORI_WARN(PCORI_SUB_DISPATCH, "peer %d: control send: %s",
			   peer->pid, pcor_strerror(rc));
}

int pcori_ctrl_send(pcori_peer_t *peer, uint32_t op, const void *body,
		    size_t len)
{
	pcori_wire_hdr_t h;
	uint8_t hb[PCORI_WIRE_HDR_SIZE];
	hdr_init(&h, PCORI_W_CTRL, peer->pid);
	h.src_thid = pcori_self_thid() >= 0 ? pcori_self_thid() : 0;
	h.ctx = op;
	h.frag_len = (uint32_t)len;
	pcori_wire_encode(&h, hb);
	return ctl_post(peer, hb, body, len);
}

/* ------------------------------------------------------ deferred work */

/* Completions gathered under locks and carried out after them. */
typedef struct deferred {
	int n;
	struct {
		enum { D_COMPLETE, D_DELIVER, D_RNDV } what;
		pcori_req_t *req;
		int status;
		void *obj; /* D_DELIVER: the MCB; D_RNDV: the rendezvous */
	} a[8];
} deferred_t;

static void defer(deferred_t *d, int what, pcori_req_t *r, int st, void *obj)
{
	PCORI_ASSERT(d->n < (int)PCORI_ARRAY_LEN(d->a));
	d->a[d->n].what = what;
	d->a[d->n].req = r;
	d->a[d->n].status = st;
	d->a[d->n].obj = obj;
	d->n++;
}

static void rndv_go(pcori_rndv_t *v);

static void run_deferred(deferred_t *d)
{
	for (int i = 0; i < d->n; i++) {
		switch (d->a[i].what) {
		case D_COMPLETE:
			pcori_req_complete(d->a[i].req, d->a[i].status);
			break;
		case D_DELIVER:
			pcori_mcb_deliver(d->a[i].req, d->a[i].obj);
			break;
		case D_RNDV:
			rndv_go(d->a[i].obj);
			break;
		}
	}
	d->n = 0;
}

/* A receive got its whole message (or gave up): report and complete. */
static void recv_finish(pcori_req_t *r, const pcori_mkey_t *k, size_t size,
			void *dma_block, int status, deferred_t *d)
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
	defer(d, D_COMPLETE, r, status, NULL);
}

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
/* Header room of a message's record (after the pcori_txmsg_t). */
static size_t tx_hdr_bytes(size_t len)
{
	/* Rendezvous: the request's bytes, then two banks of a window. */
	if (len > pcori_net.eager_max)
		return RTS_ROOM + 2 * PCORI_FRAG_WINDOW * PCORI_WIRE_HDR_SIZE;
	return pcori_frag_count(len, pcori_net.frag_size) * PCORI_WIRE_HDR_SIZE;
}

size_t pcori_tx_cost(bool copy, size_t len)
{
	return sizeof(pcori_txmsg_t) + tx_hdr_bytes(len) + sizeof(pcori_req_t) +
	       (copy ? len : 0);
}

static void txb_put(size_t n)
{
	/* seq_cst, then the waiters: see pcori_drive_until's word. */
	atomic_fetch_sub(&pcori_net.txb.held, (int64_t)n);
	if (atomic_load(&pcori_net.txb.waiters)) {
		atomic_fetch_add(&pcori_net.txb.word, 1);
		pcori_futex_wake(&pcori_net.txb.word, INT_MAX);
	}
}

static void txb_oversize_put(void)
{
	atomic_store(&pcori_net.txb.oversize, false);
	if (atomic_load(&pcori_net.txb.waiters)) {
		atomic_fetch_add(&pcori_net.txb.word, 1);
		pcori_futex_wake(&pcori_net.txb.word, INT_MAX);
	}
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
	txb_put(ask->n);
	if (ask->oversize)
		txb_oversize_put();
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
	if (wait) {
		atomic_fetch_add(&pcori_net.txb.waiters, 1);
		ok = pcori_drive_until(txb_try, &ask, &pcori_net.txb.word,
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

static void txm_free(pcori_txmsg_t *m)
{
	/* Exposed (and kept busy) through the port of its first post. */
	pcori_port_t *p = m->busy_port;
	if (p)
		atomic_fetch_sub(&p->busy, 1);
	if (m->reg && p)
		p->ops->unexpose(p, m->reg);
	if (m->flags & PCORI_TXM_OWNDMA)
		pcori_dma_free(m->data);
	size_t held = m->held;
	bool oversize = m->flags & PCORI_TXM_OVERSIZE;
	free(m);
	/* After the memory went: what the budget admits next is on top. */
	if (held)
		txb_put(held);
	if (oversize)
		txb_oversize_put();
}

/* Done with m?  Stream lock held.  Unlinks it; caller frees after unlock. */
static bool txm_done(pcori_txmsg_t *m)
{
	if (atomic_load_explicit(&m->inflight, memory_order_acquire))
		return false;
	if (m->flags & PCORI_TXM_DEAD)
		return true;
	if (!(m->flags & PCORI_TXM_ACKED))
		return false;
	return !(m->flags & PCORI_TXM_RNDV) || (m->flags & PCORI_TXM_FINNED);
}

/* The id a rendezvous is named by on the wire (never a raw pointer). */
static uint64_t txm_cookie(const pcori_txmsg_t *m)
{
	return ((uint64_t)m->ts->thid << 32 | m->seq) ^
	       ((uint64_t)pcori_net.lim.key_check << 16);
}

static void hdr_for(const pcori_txmsg_t *m, pcori_wire_hdr_t *h, uint8_t type)
{
	hdr_init(h, type, m->ts->peer->pid);
	h->src_thid = m->ts->thid;
	h->dst_thid = m->dst_thid;
	h->tag = m->tag;
	h->ctx = m->mctx;
	h->seq = m->seq;
	h->total_size = m->size;
	h->frag_count = m->nfrags;
}

/* Written under rx_lock only, so no locked add is needed. */
static inline void nacks_add(pcori_peer_t *peer, int delta)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	atomic_store_explicit(
	    &peer->nacks,
	    atomic_load_explicit(&peer->nacks, memory_order_relaxed) + delta,
	    memory_order_relaxed);
}

/*
 * What an ack of rs covers now: every message started and complete -- but
 * not past one held outside the MCB pool while any such is left (see
 * start_message).  Peer rx_lock held.
 */
static uint32_t ack_point(pcori_rxstream_t *rs)
{
	if (PCORI_UNLIKELY(rs->throttled)) {
		if (atomic_load(&pcori_msg.overflow))
			return rs->throttle_seq;
		rs->throttled = false;
	}
	return rs->active ? rs->expected - 1 : rs->expected;
}

/* The stream's pending ack is no longer lazy (or gone).  Lock held. */
static void ack_unlazy(pcori_rxstream_t *rs)
{
	if (rs->ack_lazy) {
		rs->ack_lazy = false;
		atomic_fetch_sub(&pcori_net.acks_lazy, 1);
	}
}

/* Take one due ack of the peer's to ride along.  Stream lock held. */
static bool piggyback(pcori_peer_t *peer, pcori_wire_hdr_t *h)
{
	if (!atomic_load_explicit(&peer->nacks, memory_order_relaxed) ||
	    !pcori_trylock(&peer->rx_lock))
		return false;
	bool got = false;
	if (!pcori_list_empty(&peer->acks)) {
		pcori_rxstream_t *rs = PCORI_CONTAINER_OF(
		    peer->acks.next, pcori_rxstream_t, ack_link);
		uint32_t upto = ack_point(rs);
		ack_unlazy(rs);
		pcori_list_remove(&rs->ack_link);
		nacks_add(peer, -1);
		atomic_fetch_sub(&pcori_net.acks_pending, 1);
		rs->ack_due_ns = 0;
		rs->acked = upto;
		rs->unacked = 0;
		h->flags |= PCORI_WF_HAS_ACK;
		h->cookie = (uint64_t)(uint32_t)rs->thid << 32 | upto;
		got = true;
	}
	pcori_unlock(&peer->rx_lock);
	return got;
}

static void ack_schedule(pcori_peer_t *peer, pcori_rxstream_t *rs, bool now);

/*
 * A fragment that did not leave gives back the ack it was to carry, or
 * that stream would never be acknowledged (acks are cumulative: should
 * it go twice, the second is harmless).  Stream lock held.
 */
static void piggyback_undo(pcori_peer_t *peer, const pcori_wire_hdr_t *h)
{
	if (!(h->flags & PCORI_WF_HAS_ACK))
		return;
	uint32_t thid = (uint32_t)(h->cookie >> 32);
	pcori_lock(&peer->rx_lock);
	pcori_rxstream_t *rs =
	    thid < (uint32_t)pcori_rt.max_threads ? peer->rx[thid] : NULL;
	if (rs)
		ack_schedule(peer, rs, true);
	pcori_unlock(&peer->rx_lock);
}

/*
 * Post m (from where it stopped).  Stream lock held.  PCOR_ERR_AGAIN
 * leaves m->window/progress so the next call continues.
 */
static int txm_post(pcori_txmsg_t *m)
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

	/* Eager: fragments window..nfrags-1 (window counts posted ones). */
	for (uint32_t i = m->window; i < m->nfrags; i++) {
		size_t off, flen;
		pcori_frag_bounds(m->size, pcori_net.frag_size, i, &off, &flen);
		hdr_for(m, &h, PCORI_W_DATA);
		h.frag_idx = i;
		h.frag_len = (uint32_t)flen;
		if (i == 0) {
			piggyback(peer, &h);
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
				piggyback_undo(peer, &h);
			return rc;
		}
		m->window = (uint16_t)(i + 1);
		atomic_fetch_add_explicit(&p->st.tx, 1, memory_order_relaxed);
	}
	m->flags |= PCORI_TXM_SENT;
	return PCOR_OK;
}

static void timer_list(pcori_txstream_t *ts)
{
	pcori_lock(&pcori_net.timer_lock);
	if (pcori_list_empty(&ts->timer_link)) {
		pcori_list_push_back(&pcori_net.timers, &ts->timer_link);
		atomic_fetch_add(&pcori_net.ntimers, 1);
	}
	pcori_unlock(&pcori_net.timer_lock);
}

/*
 * The retransmission timeout: smoothed round trip plus four times its
 * variation (RFC 6298) once measured, at least RTO_MIN_NS, and never more
 * than PCOR_RTO_MS, which is also the value before the first sample (a
 * loaded fabric's queue makes the round trip; a fixed second made every
 * loss at the tail of a burst cost a second).  The floor is for a
 * rendezvous, acknowledged only once its data is in, and for a loaded
 * machine's scheduling: a timeout too eager only sends a duplicate.
 */
#define RTO_MIN_NS 50000000u
static uint64_t rto_base(const pcori_txstream_t *ts)
{
	uint64_t max = (uint64_t)pcori_rt.cfg.rto_ms * 1000000u;
	if (!ts->srtt_ns)
		return max;
	uint64_t r = ts->srtt_ns + 4 * ts->rttvar_ns;
	return PCORI_MIN(PCORI_MAX(r, (uint64_t)RTO_MIN_NS), max);
}

/* A round-trip sample from a message acknowledged on its first send. */
static void rtt_sample(pcori_txstream_t *ts, uint64_t r)
{
	if (!ts->srtt_ns) {
		ts->srtt_ns = r;
		ts->rttvar_ns = r / 2;
		return;
	}
	uint64_t dev = r > ts->srtt_ns ? r - ts->srtt_ns : ts->srtt_ns - r;
	ts->rttvar_ns = (3 * ts->rttvar_ns + dev) / 4;
	ts->srtt_ns = (7 * ts->srtt_ns + r) / 8;
}

/* Arm the retransmission timeout for the oldest unacknowledged. */
static void rto_arm(pcori_txstream_t *ts)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	uint64_t rto = rto_base(ts) << PCORI_MIN(ts->rto_shift, 4u);
	bool listed = ts->rto_ns || ts->resume_ns;
	atomic_store_explicit(&ts->rto_ns, pcori_now_ns() + rto,
			      memory_order_relaxed);
	if (!listed)
		timer_list(ts);
}

static void timer_arm(pcori_txstream_t *ts, uint64_t when)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	atomic_store_explicit(&ts->resume_ns, when ? when : 1,
			      memory_order_relaxed);
	pcori_lock(&pcori_net.timer_lock);
	if (pcori_list_empty(&ts->timer_link)) {
		pcori_list_push_back(&pcori_net.timers, &ts->timer_link);
		atomic_fetch_add(&pcori_net.ntimers, 1);
	}
	pcori_unlock(&pcori_net.timer_lock);
	pcori_dispatch_kick();
}

/* Post waiting messages in order until one does not go.  Lock held. */
static int flush_waiting(pcori_txstream_t *ts)
{
	int n = 0;
	while (!pcori_list_empty(&ts->waiting)) {
		pcori_txmsg_t *m =
		    PCORI_CONTAINER_OF(ts->waiting.next, pcori_txmsg_t, link);
		bool again = m->flags & PCORI_TXM_SENT;
		int rc = txm_post(m);
		if (rc == PCOR_ERR_AGAIN) {
			timer_arm(ts, pcori_now_ns() + 20000);
			break;
		}
		pcori_list_remove(&m->link);
		if (rc) {
			/* The fabric refused it for good: fail the send. */
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "peer %d: message seq %u lost: %s",
				   ts->peer->pid, m->seq, pcor_strerror(rc));
			m->flags |= PCORI_TXM_DEAD;
			if (m->req)
				pcori_req_complete(m->req, rc);
			m->req = NULL;
			if (txm_done(m))
				txm_free(m);
			continue;
		}
		if (again)
			m->flags |= PCORI_TXM_RETX;
		m->posted_ns = pcori_now_ns();
		pcori_list_push_back(&ts->sent, &m->link);
		if (!ts->rto_ns)
			rto_arm(ts);
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
	pcori_txstream_t *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	pcori_lock_init(&n->lock);
	n->peer = peer;
	n->thid = thid;
	pcori_list_init(&n->sent);
	pcori_list_init(&n->waiting);
	pcori_list_init(&n->waiting_fin);
	pcori_list_init(&n->streaming);
	pcori_list_init(&n->orphans);
	pcori_list_init(&n->timer_link);
	n->backoff_us = BACKOFF_MIN_US;
	if (!atomic_compare_exchange_strong(&peer->tx[thid], &ts, n)) {
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
 * FAST_WINDOW fast messages wait for their batched ack.  Returns
 * PCOR_ERR_AGAIN when the message must take the full path.
 */
static int fast_send(pcori_txstream_t *ts, const pcori_route_t *rt,
		     pcori_req_kind_t kind, int thid, int tag, uint32_t ctx,
		     const void *buf, size_t len, unsigned flags,
		     pcor_handle_t *h_p)
{
	pcori_port_t *p = rt->port;
	pcori_req_t *s = pcori_req_alloc();
	if (PCORI_UNLIKELY(!s))
		return PCOR_ERR_AGAIN;
	int rc = PCOR_ERR_AGAIN;
	pcori_lock(&ts->lock);
	if (PCORI_LIKELY(
		pcori_list_empty(&ts->sent) && pcori_list_empty(&ts->waiting) &&
		!atomic_load_explicit(&ts->resume_ns, memory_order_relaxed) &&
		!ts->resync && ts->next_seq - ts->acked < FAST_WINDOW)) {
		pcori_wire_hdr_t h;
		hdr_init(&h, PCORI_W_DATA, ts->peer->pid);
		h.flags = PCORI_WF_FAST;
		h.src_thid = ts->thid;
		h.dst_thid = thid;
		h.tag = tag;
		h.ctx = ctx;
		h.seq = ts->next_seq;
		h.total_size = len;
		h.frag_count = 1;
		h.frag_len = (uint32_t)len;
		piggyback(ts->peer, &h);
		rc = p->ops->inject_hdr(p, rt->dest, &h, buf);
		if (PCORI_LIKELY(rc == PCOR_OK)) {
			ts->next_seq++;
			atomic_fetch_add_explicit(&p->st.tx, 1,
						  memory_order_relaxed);
		} else {
			piggyback_undo(ts->peer, &h);
		}
	}
	pcori_unlock(&ts->lock);
	if (PCORI_UNLIKELY(rc)) {
		pcori_req_free(s);
		return rc;
	}
	/* The bytes are in the channel: the buffer is the caller's again. */
	if (kind == PCORI_REQ_SEND_DMA && (flags & PCOR_SEND_HANDOVER))
		pcori_dma_free((void *)buf);
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

	if (len <= pcori_net.fast_max) {
		pcori_route_t *rt = pcori_peer_route(peer);
		if (PCORI_LIKELY(rt && rt->port->lossless && rt->hops == 1 &&
				 len <= rt->port->fast_max)) {
			rc = fast_send(ts, rt, kind, thid, tag, ctx, buf, len,
				       flags, h_p);
			if (rc != PCOR_ERR_AGAIN)
				return rc;
		}
	}

	const bool copy = kind == PCORI_REQ_SEND_COPY;
	const bool rndv = len > pcori_net.eager_max;
	uint32_t nfrags = pcori_frag_count(len, pcori_net.frag_size);
	size_t hbytes = tx_hdr_bytes(len);
	size_t inline_copy = copy && !rndv ? len : 0;
	/*
	 * Charged before anything is allocated: a refusal sends nothing.  A
	 * copy that alone exceeds the budget would never fit: one such at a
	 * time goes past it, charged for its record only.
	 */
	size_t cost = pcori_tx_cost(copy, len);
	bool oversize = copy && cost > (uint64_t)pcori_net.txb.max;
	if (oversize)
		cost -= len;
	rc = txb_take(cost, oversize);
	if (rc)
		return rc;
	pcori_txmsg_t *m = malloc(sizeof(*m) + hbytes + inline_copy);
	if (!m) {
		txb_put(cost);
		if (oversize)
			txb_oversize_put();
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
		pcori_route_t *rt = pcori_peer_route(peer);
		m->busy_port = rt ? rt->port : NULL;
		if (m->busy_port)
			atomic_fetch_add(&m->busy_port->busy, 1);
	}
	if (copy && !rndv) {
		/* Eager copies live in the same allocation as the message. */
		m->data = m->hdrs + hbytes;
		if (len)
			memcpy(m->data, buf, len);
	} else if (copy) {
		/* A rendezvous copy must be readable: DMA memory. */
		rc = pcori_dma_alloc(len, &m->data);
		if (rc) {
			m->data = NULL;
			txm_free(m); /* gives back its budget and busy port */
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
		txm_free(m);
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
		flush_waiting(ts);
	pcori_unlock(&ts->lock);
	return PCOR_OK;
}

/* Complete what an ack covers.  Stream lock held. */
static void ack_upto(pcori_txstream_t *ts, uint32_t upto, pcori_list_t *dead,
		     deferred_t *d)
{
	bool moved = seq_lt(ts->acked, upto) && !seq_lt(ts->next_seq, upto);
	if (moved)
		ts->acked = upto;
	/*
	 * From the head each time: the lock may go while completions run,
	 * and then other threads change the list (a saved next is stale).
	 */
	uint64_t sent_ns = 0;
	while (!pcori_list_empty(&ts->sent)) {
		pcori_txmsg_t *m =
		    PCORI_CONTAINER_OF(ts->sent.next, pcori_txmsg_t, link);
		if (!seq_lt(m->seq, upto))
			break;
		if (!(m->flags & PCORI_TXM_RETX)) /* Karn: first sends only */
			sent_ns = m->posted_ns;
		m->flags |= PCORI_TXM_ACKED;
		ts->probing = false; /* the receiver takes messages again */
		/* sendDMA rendezvous: the buffer is needed until FIN. */
		bool wait_fin = (m->flags & PCORI_TXM_RNDV) &&
				!(m->flags & PCORI_TXM_FINNED) && m->req &&
				m->req->kind == PCORI_REQ_SEND_DMA &&
				!(m->req->flags & PCOR_SEND_HANDOVER);
		if (m->req && !wait_fin) {
			defer(d, D_COMPLETE, m->req, PCOR_OK, NULL);
			m->req = NULL;
		}
		pcori_list_remove(&m->link);
		if (txm_done(m))
			pcori_list_push_back(dead, &m->link);
		else if (m->flags & PCORI_TXM_RNDV)
			pcori_list_push_back(&ts->waiting_fin, &m->link);
		/* else: provider completions outstanding; tx_done frees */
		if (d->n == (int)PCORI_ARRAY_LEN(d->a)) {
			pcori_unlock(&ts->lock);
			run_deferred(d);
			pcori_lock(&ts->lock);
		}
	}
	uint64_t now = pcori_now_ns();
	if (sent_ns)
		rtt_sample(ts, now - sent_ns);
	ts->backoff_us = BACKOFF_MIN_US;
	ts->resync = false; /* the receiver follows us again */
	/* Progress: the timeout restarts from now (backed off no more). */
	if (moved)
		ts->rto_shift = 0;
	if (pcori_list_empty(&ts->sent))
		atomic_store_explicit(&ts->rto_ns, 0, memory_order_relaxed);
	else
		rto_arm(ts);
}

static void free_list(pcori_list_t *l)
{
	while (!pcori_list_empty(l)) {
		pcori_list_t *n = l->next;
		pcori_list_remove(n);
		txm_free(PCORI_CONTAINER_OF(n, pcori_txmsg_t, link));
	}
}

/* Something came back from peer over the data path (see peer->heard). */
static inline void heard_from(pcori_peer_t *peer)
{
	/* One writer at a time is not needed: only a change is looked for. */
	atomic_store_explicit(
	    &peer->heard,
	    atomic_load_explicit(&peer->heard, memory_order_relaxed) + 1,
	    memory_order_relaxed);
}

static void on_ack(pcori_peer_t *peer, int32_t thid, uint32_t upto)
{
	heard_from(peer);
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	if (!ts)
		return;
	pcori_list_t dead;
	deferred_t d = {0};
	pcori_list_init(&dead);
	pcori_lock(&ts->lock);
	bool was_probing = ts->probing;
	ack_upto(ts, upto, &dead, &d);
	if (was_probing && !ts->probing && !ts->resume_ns)
		flush_waiting(ts);
	pcori_unlock(&ts->lock);
	run_deferred(&d);
	free_list(&dead);
}

static void go_back(pcori_txstream_t *ts, uint32_t seq);

/*
 * Post again the messages of sent marked PCORI_TXM_RESEND, in order; a
 * full queue leaves the rest marked for the timer.  Lock held.
 */
static void resend_marked(pcori_port_t *port, pcori_txstream_t *ts)
{
	ts->resend = false;
	uint64_t now = pcori_now_ns();
	pcori_list_t *pos;
	pcori_list_foreach (pos, &ts->sent) {
		pcori_txmsg_t *m = PCORI_CONTAINER_OF(pos, pcori_txmsg_t, link);
		if (!(m->flags & PCORI_TXM_RESEND))
			continue;
		m->window = 0;
		if (txm_post(m) != PCOR_OK) {
			ts->resend = true;
			timer_arm(ts, pcori_now_ns() + 20000);
			return;
		}
		m->flags &= (uint16_t)~PCORI_TXM_RESEND;
		m->flags |= PCORI_TXM_RETX;
		m->posted_ns = now;
		if (port)
			atomic_fetch_add_explicit(&port->st.retx, 1,
						  memory_order_relaxed);
	}
}

/*
 * A selective NACK: send again the messages of map (bit d: seq + d) that
 * are still unacknowledged, and nothing else -- the receiver holds the
 * rest.  Lock held.
 */
static void resend_some(pcori_port_t *port, pcori_txstream_t *ts,
			uint32_t seq, uint32_t map)
{
	pcori_list_t *pos;
	pcori_list_foreach (pos, &ts->sent) {
		pcori_txmsg_t *m = PCORI_CONTAINER_OF(pos, pcori_txmsg_t, link);
		uint32_t d = m->seq - seq;
		if (d < 32 && (map & (1u << d)))
			m->flags |= PCORI_TXM_RESEND;
	}
	resend_marked(port, ts);
}

static void on_nack(pcori_port_t *port, pcori_peer_t *peer, int32_t thid,
		    uint32_t seq, uint32_t frag_idx, uint64_t map)
{
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	heard_from(peer);
	if (!ts)
		return;
	atomic_fetch_add_explicit(&port->st.nack_rcvd, 1, memory_order_relaxed);
	pcori_lock(&ts->lock);
	if (frag_idx == NACK_SELECTIVE) {
		resend_some(port, ts, seq, (uint32_t)map);
		pcori_unlock(&ts->lock);
		return;
	}
	go_back(ts, seq);
	uint64_t when = pcori_now_ns() + (uint64_t)ts->backoff_us * 1000;
	ts->backoff_us = PCORI_MIN(ts->backoff_us * 2, BACKOFF_MAX_US);
	ts->probing = true;
	timer_arm(ts, when);
	pcori_unlock(&ts->lock);
}

/*
 * Go back to seq: every posted message from there on returns to the
 * front of the waiting list, in order, to be sent again.  Lock held.
 */
static void go_back(pcori_txstream_t *ts, uint32_t seq)
{
	pcori_list_t back;
	pcori_list_init(&back);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe (pos, tmp, &ts->sent) {
		pcori_txmsg_t *m = PCORI_CONTAINER_OF(pos, pcori_txmsg_t, link);
		if (seq_lt(m->seq, seq))
			continue;
		pcori_list_remove(pos);
		m->window = 0;
		m->flags &= (uint16_t)~PCORI_TXM_RESEND; /* all go again */
		pcori_list_push_back(&back, pos);
	}
	if (!pcori_list_empty(&back)) {
		/* Splice back in front of what never left. */
		back.prev->next = ts->waiting.next;
		ts->waiting.next->prev = back.prev;
		ts->waiting.next = back.next;
		back.next->prev = &ts->waiting;
	}
	if (pcori_list_empty(&ts->sent))
		atomic_store_explicit(&ts->rto_ns, 0, memory_order_relaxed);
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
	deferred_t d = {0};
	pcori_txmsg_t *dead = NULL;
	pcori_lock(&ts->lock);
	pcori_txmsg_t *m = find_rndv(ts, cookie);
	if (m) {
		m->flags |= PCORI_TXM_FINNED;
		if (m->req) {
			defer(&d, D_COMPLETE, m->req, PCOR_OK, NULL);
			m->req = NULL;
		}
		if (txm_done(m)) {
			pcori_list_remove(&m->link);
			dead = m;
		}
	}
	pcori_unlock(&ts->lock);
	run_deferred(&d);
	if (dead)
		txm_free(dead);
}

/*
 * The receiver sends FIN until we say we have it (a repeat finds no
 * message here and is acknowledged all the same).
 */
static void on_fin_frame(pcori_peer_t *peer, int32_t thid, uint64_t cookie)
{
	on_fin(peer, thid, cookie);
	send_ctl(peer, PCORI_W_FINACK, 0, 0, cookie, 0, NULL);
}

static void rndv_unref(pcori_rndv_t *v);

/* The sender has our FIN: the rendezvous is over on both sides. */
static void on_finack(pcori_peer_t *peer, uint64_t cookie)
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
		rndv_unref(found);
	}
}

/* Post the pending fragments of a streamed rendezvous.  Lock held. */
static void stream_post(pcori_txmsg_t *m)
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
		    m->hdrs + RTS_ROOM +
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
				if (pcori_list_empty(&m->slink))
					pcori_list_push_back(&ts->streaming,
							     &m->slink);
				timer_arm(ts, pcori_now_ns() + 20000);
				return;
			}
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "peer %d: streamed fragment %u not sent: %s",
				   peer->pid, i, pcor_strerror(rc));
			m->sfrag = m->send;
			break;
		}
		atomic_fetch_add_explicit(&p->st.tx, 1, memory_order_relaxed);
		m->sfrag++;
	}
	if (!pcori_list_empty(&m->slink))
		pcori_list_remove(&m->slink);
}

/* The receiver wants window w of a streamed rendezvous. */
static void on_cts(pcori_peer_t *peer, int32_t thid, uint64_t cookie,
		   uint32_t w)
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
		stream_post(m);
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
	deferred_t d = {0};
	pcori_route_t *rt = status ? pcori_peer_route(ts->peer) : NULL;
	pcori_lock(&ts->lock);
	if (status && rt && rt->next_hop != ts->peer->pid &&
	    atomic_load(&ts->peer->state) != PCORI_PEER_LOST) {
		/*
		 * Sent through a gateway: its failure says nothing of the
		 * destination.  The frame is lost like any other and resent,
		 * on the rebuilt route, or failed if none is left.
		 */
	} else if (status && !(m->flags & PCORI_TXM_DEAD)) {
		/* A send the fabric failed: the peer is likely gone. */
		m->flags |= PCORI_TXM_DEAD;
		if (m->req) {
			defer(&d, D_COMPLETE, m->req,
			      atomic_load(&ts->peer->state) == PCORI_PEER_LOST
				  ? PCOR_ERR_PEER_LOST
				  : status,
			      NULL);
			m->req = NULL;
		}
	}
	if (atomic_fetch_sub_explicit(&m->inflight, 1, memory_order_acq_rel) ==
		1 &&
	    txm_done(m)) {
		pcori_list_remove(&m->link);
		dead = true;
	}
	pcori_unlock(&ts->lock);
	run_deferred(&d);
	if (dead)
		txm_free(m);
}

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
	peer->rx[thid] = rs;
	return rs;
}

/*
 * An ack due delay_ns from now unless one is listed already.  lazy: it
 * is for fast messages only, which nobody waits for but a finalize, so
 * a thread going to sleep need not send it first (it is due within
 * FAST_ACK_DELAY_NS, and sleepers wake for it).
 */
static void ack_schedule_in(pcori_peer_t *peer, pcori_rxstream_t *rs,
			    uint64_t delay_ns, bool lazy)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	uint64_t due = pcori_now_ns() + delay_ns;
	if (pcori_list_empty(&rs->ack_link)) {
		pcori_list_push_back(&peer->acks, &rs->ack_link);
		nacks_add(peer, 1);
		atomic_fetch_add(&pcori_net.acks_pending, 1);
		rs->ack_due_ns = due;
		if (lazy) {
			rs->ack_lazy = true;
			atomic_fetch_add(&pcori_net.acks_lazy, 1);
		}
	} else if (!lazy && rs->ack_lazy) {
		ack_unlazy(rs);
		rs->ack_due_ns = PCORI_MIN(rs->ack_due_ns, due);
	}
}

static void ack_schedule(pcori_peer_t *peer, pcori_rxstream_t *rs, bool now)
{
	ack_schedule_in(peer, rs, (uint64_t)pcori_rt.cfg.ack_delay_ns, false);
	if (now || rs->unacked >= ACK_EVERY)
		rs->ack_due_ns = 1;
}

/* Send due acks of one peer (all of them if force).  Returns count. */
/* Threads between taking acks off a list and handing them to a port. */
static _Atomic int acks_sending;

bool pcori_ctl_drained(void)
{
	return !atomic_load(&acks_sending) && !atomic_load(&ctlq.n);
}

static int acks_flush_peer(pcori_peer_t *peer, uint64_t now, bool force)
{
	struct {
		int32_t thid;
		uint32_t upto;
	} out[16];
	int n = 0;
	pcori_lock(&peer->rx_lock);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe (pos, tmp, &peer->acks) {
		pcori_rxstream_t *rs =
		    PCORI_CONTAINER_OF(pos, pcori_rxstream_t, ack_link);
		if ((!force || rs->ack_lazy) && rs->ack_due_ns > now)
			continue;
		if (n == (int)PCORI_ARRAY_LEN(out))
			break;
		uint32_t upto = ack_point(rs);
		ack_unlazy(rs);
		pcori_list_remove(pos);
		nacks_add(peer, -1);
		atomic_fetch_sub(&pcori_net.acks_pending, 1);
		rs->ack_due_ns = 0;
		rs->acked = upto;
		rs->unacked = 0;
		out[n].thid = rs->thid;
		out[n].upto = upto;
		n++;
	}
	/* Counted before the lock goes: a BYE must not overtake these. */
	if (n)
		atomic_fetch_add(&acks_sending, 1);
	pcori_unlock(&peer->rx_lock);
	pcori_route_t *rt = n ? pcori_peer_route(peer) : NULL;
	if (rt)
		atomic_fetch_add_explicit(&rt->port->st.ack_tx, (uint64_t)n,
					  memory_order_relaxed);
	for (int i = 0; i < n; i++)
		send_ctl(peer, PCORI_W_ACK, out[i].thid, out[i].upto, 0, 0,
			 NULL);
	if (n)
		atomic_fetch_sub(&acks_sending, 1);
	return n;
}

void pcori_txstreams_rerouted(pcori_peer_t *peer)
{
	for (int t = 0; t < pcori_rt.max_threads; t++) {
		pcori_txstream_t *ts = atomic_load(&peer->tx[t]);
		if (!ts)
			continue;
		pcori_lock(&ts->lock);
		if (!pcori_list_empty(&ts->sent)) {
			pcori_txmsg_t *m = PCORI_CONTAINER_OF(
			    ts->sent.next, pcori_txmsg_t, link);
			go_back(ts, m->seq);
			if (!ts->resume_ns)
				flush_waiting(ts);
		}
		pcori_unlock(&ts->lock);
	}
}

void pcori_acks_repeat(void)
{
	pcori_peer_t *peer;
	for (int i = 0; (peer = pcori_peer_next_ready(&i));) {
		pcori_lock(&peer->rx_lock);
		for (int t = 0; t < pcori_rt.max_threads; t++) {
			pcori_rxstream_t *rs = peer->rx[t];
			if (!rs || !rs->expected)
				continue;
			/*
			 * Finalizing: nothing more is taken, so nothing needs
			 * holding back -- what came is acknowledged in full.
			 */
			rs->throttled = false;
			ack_schedule(peer, rs, true);
		}
		pcori_unlock(&peer->rx_lock);
	}
}

size_t pcori_acks_final(pcori_peer_t *peer, uint8_t *buf, size_t cap)
{
	size_t n = 0;
	pcori_lock(&peer->rx_lock);
	for (int t = 0; t < pcori_rt.max_threads && n + 8 <= cap; t++) {
		pcori_rxstream_t *rs = peer->rx[t];
		if (!rs || !rs->expected)
			continue;
		rs->throttled = false; /* leaving: nothing more is taken */
		pcori_put32(buf + n, (uint32_t)t);
		pcori_put32(buf + n + 4, ack_point(rs));
		n += 8;
	}
	pcori_unlock(&peer->rx_lock);
	return n;
}

void pcori_acks_final_in(pcori_peer_t *peer, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint32_t thid = pcori_get32(b + i);
		if (thid < (uint32_t)pcori_rt.max_threads)
			on_ack(peer, (int32_t)thid, pcori_get32(b + i + 4));
	}
}

int pcori_acks_flush(bool force)
{
	if (!atomic_load_explicit(&pcori_net.acks_pending,
				  memory_order_relaxed))
		return 0;
	uint64_t now = pcori_now_ns();
	int n = 0, np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **peers = atomic_load(&pcori_net.peers);
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = pcori_peer_slot(peers, i);
		if (p && atomic_load_explicit(&p->nacks, memory_order_relaxed))
			n += acks_flush_peer(p, now, force);
	}
	return n;
}

static pcori_rndv_t *rndv_new(pcori_req_t *r, pcori_peer_t *peer,
			      const pcori_mkey_t *k, size_t size,
			      const pcori_wire_rts_t *rts, uint64_t cookie,
			      uint32_t nfrags);

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
			 bool unrefusable, deferred_t *d)
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
			pcori_rndv_t *v = rndv_new(r, peer, k, size, rts,
						   h->cookie, h->frag_count);
			if (v)
				defer(d, D_RNDV, r, 0, v);
			else
				recv_finish(r, k, size, NULL, PCOR_ERR_NOMEM,
					    d);
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
	send_ctl(peer, PCORI_W_NACK, h->src_thid, h->seq, 0, 0, NULL);
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
		if (seq_lt(h->seq, rs->expected))
			return ORDER_DUP;
	} else {
		if (rs->active && h->seq == cur)
			return ORDER_NOW;
		if (seq_lt(h->seq, cur) || (!rs->active && h->seq == cur))
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
	send_ctl(peer, PCORI_W_NACK, rs->thid, missing, want, NACK_SELECTIVE,
		 NULL);
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
	pcori_list_push_back(&rs->held, &f->link);
	rs->nheld++;
	atomic_fetch_add_explicit(&port->st.held, 1, memory_order_relaxed);
	/*
	 * A later gap, seen as a jump between first frames held: ask for
	 * what it skipped at once, not when the replay reaches it (one round
	 * trip per gap, each behind the sender's whole queue).
	 */
	if (f->first && seq_lt(before, h->seq)) {
		rs->held_top = h->seq;
		uint32_t skip = h->seq - before - 1;
		if (skip && seq_lt(rs->expected, before + 1)) {
			uint32_t map = skip >= 32 ? UINT32_MAX
						  : (1u << skip) - 1;
			atomic_fetch_add_explicit(&port->st.nack_sent, 1,
						  memory_order_relaxed);
			send_ctl(peer, PCORI_W_NACK, rs->thid, before + 1,
				 map, NACK_SELECTIVE, NULL);
		}
	}
	/* Frames behind the gap at the head: the missing ones were lost. */
	if (rs->nheld >= GAP_HELD)
		gap_nack(port, peer, rs);
}

static void rs_abandon(pcori_peer_t *peer, pcori_rxstream_t *rs, int status,
		       deferred_t *d);

/* Sort out a frame by its place in the stream; true: process it now. */
static bool sequence(pcori_port_t *port, pcori_peer_t *peer,
		     pcori_rxstream_t *rs, const pcori_wire_hdr_t *h,
		     bool first, const uint8_t *payload, deferred_t *d)
{
	/*
	 * The sender failed what it had not seen acknowledged (its route to
	 * us had gone) and starts afresh here; its sequence never goes back.
	 */
	if (first && (h->flags & PCORI_WF_RESYNC) &&
	    !seq_lt(h->seq, rs->expected) &&
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
			ack_schedule(peer, rs, true);
		return false;
	case ORDER_HOLD:
		hold(port, peer, rs, h, payload);
		return false;
	case ORDER_DROP:
		return false;
	}
	return false;
}

/*
 * A fast message was taken: acknowledge every FAST_ACK_EVERY.  A port
 * that cannot tell the sender's finalize what was taken (no `unsettled`:
 * libfabric) is also acknowledged after the ack delay, so the sender's
 * stream settles before it leaves.  Lock held.
 */
static void fast_ack(const pcori_port_t *port, pcori_peer_t *peer,
		     pcori_rxstream_t *rs)
{
	if (rs->unacked >= FAST_ACK_EVERY)
		ack_schedule(peer, rs, true);
	else if (!port->ops->unsettled)
		ack_schedule_in(peer, rs, FAST_ACK_DELAY_NS, true);
}

/* false: a fast message with no room for it yet (see pcori_port_recv). */
static bool rx_data(pcori_port_t *port, pcori_peer_t *peer,
		    const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	deferred_t d = {0};
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
			ack_schedule(peer, rs, true);
			send_ctl(peer, PCORI_W_NACK, h->src_thid, rs->expected,
				 0, 0, NULL);
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
			ack_schedule(peer, rs, false);
		else
			fast_ack(port, peer, rs);
		if (rs->req) {
			pcori_req_t *r = rs->req;
			int st = PCOR_OK;
			void *blk = NULL;
			if (r->kind == PCORI_REQ_RECV_DMA) {
				blk = r->buf;
				if (rs->size && !blk)
					st = PCOR_ERR_NOMEM;
			}
			recv_finish(r, &k, rs->size, blk, st, &d);
		} else {
			pcori_mcb_t *m = rs->mcb;
			if (atomic_fetch_or(&m->mstate, PCORI_MCB_COMPLETE) &
			    PCORI_MCB_CLAIMED)
				defer(&d, D_DELIVER, m->rreq, 0, m);
		}
		rs->req = NULL;
		rs->mcb = NULL;
	}
out:
	pcori_unlock(&peer->rx_lock);
	run_deferred(&d);
	if (ack)
		on_ack(peer, (int32_t)ack_thid, ack_upto);
	return taken;
}

/*
 * The common case of the fast path: a one-fragment fast message whose
 * turn it is, for a receive already posted.  It skips what rx_data keeps
 * for every other case (ordering by hold and replay, reassembly, MCBs).
 * false: not that case, and nothing was changed; rx_data takes it.
 */
static bool rx_fast(const pcori_port_t *port, pcori_peer_t *peer,
		    const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	pcori_mkey_t k = {h->src_pid, h->src_thid, h->dst_thid, h->tag, h->ctx};
	pcori_mq_t *mq = &pcori_msg.mqs[h->dst_thid];
	pcori_lock(&peer->rx_lock);
	pcori_rxstream_t *rs = peer->rx[h->src_thid];
	if (PCORI_UNLIKELY(!rs || rs->active || rs->refused || rs->nheld ||
			   h->seq != rs->expected)) {
		pcori_unlock(&peer->rx_lock);
		return false;
	}
	pcori_lock(&mq->lock);
	pcori_req_t *r = pcori_mq_take_posted(mq, &k);
	pcori_unlock(&mq->lock);
	if (!r) {
		pcori_unlock(&peer->rx_lock);
		return false;
	}
	rs->expected++;
	rs->unacked++;
	fast_ack(port, peer, rs);
	size_t size = h->frag_len;
	int st = PCOR_OK;
	void *blk = NULL;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		if (r->buf)
			memcpy(r->buf, payload, PCORI_MIN(size, r->len));
	} else if (size && pcori_dma_alloc(size, &blk) == PCOR_OK) {
		memcpy(blk, payload, size);
	} else if (size) {
		st = PCOR_ERR_NOMEM;
	}
	/* recv_finish reports, judges truncation and defers completion. */
	deferred_t d;
	d.n = 0;
	recv_finish(r, &k, size, blk, st, &d);
	pcori_unlock(&peer->rx_lock);
	run_deferred(&d);
	if (h->flags & PCORI_WF_HAS_ACK)
		on_ack(peer, (int32_t)(h->cookie >> 32), (uint32_t)h->cookie);
	return true;
}

static void rx_rts(pcori_port_t *port, pcori_peer_t *peer,
		   const pcori_wire_hdr_t *h, const uint8_t *payload)
{
	deferred_t d = {0};
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
			ack_schedule(peer, rs, rs->refused);
			rs->refused = false;
		}
	}
	pcori_unlock(&peer->rx_lock);
	run_deferred(&d);
}

/* -------------------------------------------------------- rendezvous */

static void rndv_unref(pcori_rndv_t *v)
{
	if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1) {
		pcori_lock(&pcori_net.timer_lock);
		pcori_list_remove(&v->alive);
		pcori_unlock(&pcori_net.timer_lock);
		atomic_fetch_sub(&v->port->busy, 1);
		free(v);
	}
}

void pcori_rndv_reap(void)
{
	while (!pcori_list_empty(&pcori_net.rndvs)) {
		pcori_list_t *n = pcori_net.rndvs.next;
		pcori_list_remove(n);
		free(PCORI_CONTAINER_OF(n, pcori_rndv_t, alive));
	}
}

/* Ask v's sender for window w of its fragments. */
static void ask_window(pcori_rndv_t *v, uint32_t w)
{
	pcori_wire_hdr_t ref = {.total_size = v->size,
				.frag_count = v->reasm.nfrags};
	send_ctl(v->peer, PCORI_W_CTS, v->key.src_thid, 0, v->cookie, w, &ref);
}

static void send_fin(pcori_rndv_t *v)
{
	send_ctl(v->peer, PCORI_W_FIN, v->key.src_thid, 0, v->cookie, 0, NULL);
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
		rndv_unref(v);
	}
}

/*
 * Complete the receive once.  tell: the sender hears FIN, whatever the
 * status, so that it lets go of its data (not when the sender is gone).
 * The caller holds a reference besides the watch's.
 */
static void rndv_complete(pcori_rndv_t *v, int status, bool tell)
{
	if (atomic_exchange(&v->done, true))
		return;
	deferred_t d = {0};
	if (tell) {
		atomic_store(&v->fin_sent, true);
		atomic_store_explicit(&v->watch_shift, 0, memory_order_relaxed);
		watch_arm(v);
		send_fin(v);
	} else {
		unwatch(v);
	}
	recv_finish(v->req, &v->key, v->size, v->own_dma, status, &d);
	run_deferred(&d);
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

static void rndv_finish(pcori_rndv_t *v, int status)
{
	rndv_complete(v, status, status != PCOR_ERR_PEER_LOST);
	if (rndv_unlist(v))
		rndv_unref(v);
}

static pcori_rndv_t *rndv_new(pcori_req_t *r, pcori_peer_t *peer,
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
	if (v->status == PCOR_OK || v->status == PCOR_ERR_NOMEM ||
	    atomic_load(&peer->state) == PCORI_PEER_LOST) {
		rndv_finish(v, v->status);
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

/* Issue reads from next_off on.  Runs in any thread, no lock held. */
static void rndv_read_more(pcori_rndv_t *v)
{
	/* Ours while we look at v: the last read may complete meanwhile. */
	atomic_fetch_add(&v->refs, 1);
	while (v->next_off < v->take) {
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
				rndv_unref(v);
				return;
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
	/* All asked for; the last completion (or this) finishes. */
	if (atomic_load(&v->reads) == 0 && v->next_off >= v->take)
		rndv_reads_over(v);
	rndv_unref(v);
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
	} else {
		v->take = v->size;
		if (v->size && pcori_dma_alloc(v->size, &v->own_dma)) {
			rndv_complete(v, PCOR_ERR_NOMEM, true);
			rndv_unref(v);
			return;
		}
		v->dst = v->own_dma;
	}
	/* Listed so a peer failure finds it; the list holds v's reference. */
	pcori_lock(&peer->rx_lock);
	HASH_ADD(hh, peer->rndv, cookie, sizeof(v->cookie), v);
	pcori_unlock(&peer->rx_lock);
	if (atomic_load(&peer->state) == PCORI_PEER_LOST) {
		rndv_finish(v, PCOR_ERR_PEER_LOST);
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
	pcori_rndv_t *v = rndv_new(r, m->origin, &m->hent.key, m->size, &rts,
				   m->cookie, m->reasm.nfrags);
	pcori_mkey_t k = m->hent.key;
	size_t size = m->size;
	pcori_mcb_release(m);
	if (v) {
		rndv_go(v);
	} else {
		deferred_t d = {0};
		recv_finish(r, &k, size, NULL, PCOR_ERR_NOMEM, &d);
		run_deferred(&d);
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
	if (atomic_fetch_sub(&v->reads, 1) == 1 && v->next_off >= v->take)
		rndv_reads_over(v);
	rndv_unref(v);
}

/* A fragment of a streamed rendezvous. */
static void rx_stream(pcori_port_t *port, pcori_peer_t *peer,
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
		send_ctl(peer, PCORI_W_CTS, h->src_thid, 0, h->cookie, w, &ref);
	if (done) {
		rndv_complete(v, PCOR_OK, true);
		rndv_unref(v);
	}
}

/* ---------------------------------------------------------- arrivals */

/*
 * A frame for another process: send it on along our route to it,
 * unchanged but for one hop less (store and forward, per fragment).
 * Frames out of hops, with no route, or beyond the queue bound are
 * dropped and counted; the ends' resends make up for them.
 */
static void forward(pcori_port_t *port, const uint8_t *msg, size_t len,
		    const pcori_wire_hdr_t *h)
{
	pcori_peer_t *dst = pcori_peer_get(h->dst_pid);
	if (h->hops <= 1 || !dst ||
	    atomic_load(&dst->state) == PCORI_PEER_LOST ||
	    (!pcori_peer_route(dst) && pcori_peer_ready(dst)) ||
	    atomic_load(&ctlq.bytes) > FWD_QUEUE_MAX) {
		atomic_fetch_add_explicit(&port->st.fwd_drop, 1,
					  memory_order_relaxed);
		return;
	}
	uint8_t hb[PCORI_WIRE_HDR_SIZE];
	memcpy(hb, msg, sizeof(hb));
	hb[3] = (uint8_t)(h->hops - 1); /* the hop count's byte */
	if (ctl_post(dst, hb, msg + PCORI_WIRE_HDR_SIZE,
		     len - PCORI_WIRE_HDR_SIZE) == PCOR_OK)
		atomic_fetch_add_explicit(&port->st.fwd, 1,
					  memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&port->st.fwd_drop, 1,
					  memory_order_relaxed);
}

/* Feed held frames whose turn has come, in order. */
static void replay(pcori_port_t *port, pcori_peer_t *peer, int32_t thid)
{
	for (;;) {
		held_t *take = NULL;
		pcori_wire_hdr_t h;
		pcori_lock(&peer->rx_lock);
		pcori_rxstream_t *rs = peer->rx[thid];
		pcori_list_t *pos;
		if (rs)
			pcori_list_foreach (pos, &rs->held) {
				held_t *f =
				    PCORI_CONTAINER_OF(pos, held_t, link);
				if (f->seq != rs->expected &&
				    f->seq != rs->expected - 1)
					continue;
				pcori_wire_limits_t lim = pcori_net.lim;
				lim.nprocs = pcori_rt.nprocs;
				if (pcori_wire_decode(f->msg, f->len, &lim,
						      &h) != PCORI_WE_OK)
					continue;
				if (in_order(rs, &h,
					     h.type == PCORI_W_RTS ||
						 h.frag_idx == 0) ==
				    ORDER_NOW) {
					pcori_list_remove(pos);
					rs->nheld--;
					take = f;
					break;
				}
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

bool pcori_port_recv_hdr(pcori_port_t *port, const pcori_wire_hdr_t *h,
			 const void *payload)
{
	if (PCORI_UNLIKELY(test_drop(port)))
		return true;
	return recv_decoded(port, h, payload, NULL, 0);
}

/* msg/len: the whole frame as it came, if it did (forwarding needs it). */
static bool recv_decoded(pcori_port_t *port, const pcori_wire_hdr_t *h,
			 const uint8_t *payload, const void *msg, size_t len)
{
	if (PCORI_UNLIKELY(h->dst_pid != pcori_rt.pid)) {
		if (msg) /* only whole frames travel on */
			forward(port, msg, len, h);
		return true;
	}
	pcori_peer_t *peer = pcori_peer_get(h->src_pid);
	if (!peer || atomic_load_explicit(&peer->state, memory_order_acquire) ==
			 PCORI_PEER_LOST)
		return true;
	if (PCORI_UNLIKELY(!pcori_peer_route(peer)) && pcori_peer_ready(peer))
		return true;
	switch (h->type) {
	case PCORI_W_DATA:
		if (h->flags & PCORI_WF_RNDV) {
			rx_stream(port, peer, h, payload);
		} else if ((h->flags & PCORI_WF_FAST) && port->lossless &&
			   h->frag_count == 1 &&
			   rx_fast(port, peer, h, payload)) {
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
		on_ack(peer, h->dst_thid, h->seq);
		break;
	case PCORI_W_NACK:
		on_nack(port, peer, h->dst_thid, h->seq, h->frag_idx,
			h->cookie);
		break;
	case PCORI_W_FIN:
		on_fin_frame(peer, h->dst_thid, h->cookie);
		break;
	case PCORI_W_FINACK:
		on_finack(peer, h->cookie);
		break;
	case PCORI_W_CTS:
		on_cts(peer, h->dst_thid, h->cookie, h->frag_idx);
		break;
	case PCORI_W_CTRL:
		pcori_ctrl_recv(peer, h, payload);
		break;
	}
	return true;
}

/* ------------------------------------------------------------ timers */

/*
 * Retry rendezvous reads that found a full queue.  One at a time under
 * the lock (rndv_read_more tests qlink under it), at most as many as were
 * queued on entry: a read that fails again waits for the next round.
 */
static int readq_run(void)
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
		rndv_unref(v); /* the queue's reference */
	}
	return n;
}

/*
 * Rendezvous we receive whose watch time passed: ask again for the
 * window (the CTS or its data was lost) or send FIN again (it or its
 * FINACK was lost).  Returns control messages sent.
 */
static int watch_run(void)
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
		if (atomic_load(&peer->state) == PCORI_PEER_LOST) {
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
		rndv_unref(v);
	}
	return n;
}

/*
 * How long a stream may resend while its peer sends back no ack or nack
 * at all, for any stream: then the data path to that peer is taken for
 * broken, whatever the directory says (it may see the peer alive over
 * another network).
 */
static uint64_t stall_bound_ns(void)
{
	uint64_t a = (uint64_t)pcori_rt.cfg.peer_timeout_ms * 2000000u;
	uint64_t b = (uint64_t)pcori_rt.cfg.rto_ms * 4000000u;
	return PCORI_MAX(a, b);
}

/*
 * Whether resends are what carries ts's messages to peer.  A lossless
 * port's provider delivers or reports an error itself, and a peer that
 * reads slowly (a 2-core machine under a flood stalls a connection for
 * seconds) is congestion, not a lost path: there, the directory alone
 * tells a silent peer from a slow one.
 */
static bool lossy_route(pcori_peer_t *peer)
{
	const pcori_route_t *rt = pcori_peer_route(peer);
	return !rt || !rt->port->lossless;
}

/*
 * The data path to ts's peer took nothing for the stall bound: fail what
 * the stream holds with PCOR_ERR_UNREACHABLE (later sends start afresh).
 * Called with the stream lock held; returns with it released.
 */
static void give_up(pcori_txstream_t *ts, uint64_t now)
{
	PCORI_WARN(PCORI_SUB_DISPATCH,
		   "peer %d: nothing acknowledged for %llu ms over the data "
		   "path despite %u resends: failing its thread %d's messages "
		   "(unreachable)",
		   ts->peer->pid,
		   (unsigned long long)((now - ts->stalled_ns) / 1000000u),
		   ts->rto_shift, ts->thid);
	ts->rto_shift = 0;
	pcori_unlock(&ts->lock);
	pcori_txstream_fail(ts, PCOR_ERR_UNREACHABLE, true);
}

/* Resend what waits for its time.  Returns messages posted. */
int pcori_timers_run(void)
{
	if (PCORI_UNLIKELY(atomic_load_explicit(&pcori_net.routes_stale,
						memory_order_relaxed)) &&
	    pcori_now_ns() >= atomic_load(&pcori_net.routes_retry_ns))
		pcori_routes_rebuild();
	int n = readq_run() + ctlq_run() + pcori_peers_reap() + watch_run();
	if (!atomic_load_explicit(&pcori_net.ntimers, memory_order_relaxed))
		return n;
	uint64_t now = pcori_now_ns();
	pcori_list_t due;
	pcori_list_init(&due);
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe (pos, tmp, &pcori_net.timers) {
		pcori_txstream_t *ts =
		    PCORI_CONTAINER_OF(pos, pcori_txstream_t, timer_link);
		if ((ts->resume_ns && ts->resume_ns <= now) ||
		    (ts->rto_ns && ts->rto_ns <= now) ||
		    (!ts->resume_ns && !ts->rto_ns)) {
			pcori_list_remove(pos);
			atomic_fetch_sub(&pcori_net.ntimers, 1);
			pcori_list_push_back(&due, pos);
		}
	}
	pcori_unlock(&pcori_net.timer_lock);
	while (!pcori_list_empty(&due)) {
		pcori_txstream_t *ts =
		    PCORI_CONTAINER_OF(due.next, pcori_txstream_t, timer_link);
		/* Under the stream lock: timer_arm tests the link under it. */
		pcori_lock(&ts->lock);
		pcori_list_remove(&ts->timer_link);
		if (ts->rto_ns && ts->rto_ns <= now &&
		    !pcori_list_empty(&ts->sent)) {
			uint32_t heard = atomic_load_explicit(
			    &ts->peer->heard, memory_order_relaxed);
			/* Counted from the first timeout, or the last word. */
			if (!ts->rto_shift || heard != ts->stall_heard) {
				ts->stalled_ns = now;
				ts->stall_heard = heard;
			}
			if (now - ts->stalled_ns >= stall_bound_ns() &&
			    lossy_route(ts->peer)) {
				give_up(ts, now);
				continue; /* unlocked; off every list */
			}
			/*
			 * No ack for too long: the fabric lost the oldest, or
			 * the NACK for it.  Only it goes again: the receiver
			 * holds what follows or asks for it once this is in
			 * (a path that changed under a window: see
			 * pcori_txstreams_rerouted).
			 */
			pcori_txmsg_t *m = PCORI_CONTAINER_OF(
			    ts->sent.next, pcori_txmsg_t, link);
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "peer %d: no ack for seq %u: sending again",
				   ts->peer->pid, m->seq);
			m->flags |= PCORI_TXM_RESEND;
			ts->resend = true;
			ts->rto_shift++;
			rto_arm(ts); /* from now, backed off */
			atomic_store_explicit(&ts->resume_ns, 0,
					      memory_order_relaxed);
		}
		if (ts->resume_ns <= now)
			atomic_store_explicit(&ts->resume_ns, 0,
					      memory_order_relaxed);
		if (!pcori_list_empty(&ts->waiting) && !ts->resume_ns)
			if (pcori_peer_route(ts->peer))
				atomic_fetch_add_explicit(
				    &pcori_peer_route(ts->peer)->port->st.retx,
				    1, memory_order_relaxed);
		if (ts->resend && !ts->resume_ns)
			resend_marked(NULL, ts);
		if (!ts->resume_ns)
			n += flush_waiting(ts);
		while (!pcori_list_empty(&ts->streaming) && !ts->resume_ns) {
			pcori_txmsg_t *m = PCORI_CONTAINER_OF(
			    ts->streaming.next, pcori_txmsg_t, slink);
			stream_post(m);
			n++;
		}
		/* Still waiting for something: stay on the list. */
		if (ts->resume_ns || ts->rto_ns)
			timer_list(ts);
		pcori_unlock(&ts->lock);
	}
	return n;
}

int64_t pcori_timers_next(void)
{
	if (atomic_load(&pcori_net.nreadq) || atomic_load(&ctlq.n))
		return 0;
	if (atomic_load(&pcori_net.nleaving))
		return 10000000; /* look again in 10 ms */
	int64_t best = INT64_MAX;
	uint64_t now = pcori_now_ns();
	uint64_t watch = atomic_load(&pcori_net.nwatched)
			     ? atomic_load(&pcori_net.watch_next_ns)
			     : 0;
	if (watch)
		best = watch > now ? (int64_t)(watch - now) : 0;
	/* Lazy acks are not sent before sleeping: wake for them. */
	if (atomic_load(&pcori_net.acks_lazy))
		best = PCORI_MIN(best, (int64_t)FAST_ACK_DELAY_NS);
	if (!atomic_load(&pcori_net.ntimers))
		return best == INT64_MAX ? -1 : best;
	pcori_lock(&pcori_net.timer_lock);
	pcori_list_t *pos;
	pcori_list_foreach (pos, &pcori_net.timers) {
		pcori_txstream_t *ts =
		    PCORI_CONTAINER_OF(pos, pcori_txstream_t, timer_link);
		uint64_t at = ts->resume_ns && ts->rto_ns
				  ? PCORI_MIN(ts->resume_ns, ts->rto_ns)
				  : ts->resume_ns | ts->rto_ns;
		int64_t left = at > now ? (int64_t)(at - now) : 0;
		best = PCORI_MIN(best, left);
	}
	pcori_unlock(&pcori_net.timer_lock);
	return best == INT64_MAX ? -1 : best;
}

/* ------------------------------------------------------- peer failure */

void pcori_txstream_fail(pcori_txstream_t *ts, int status, bool resync)
{
	pcori_list_t dead;
	deferred_t d = {0};
	pcori_list_init(&dead);
	pcori_lock(&ts->lock);
	pcori_list_t *lists[] = {&ts->sent, &ts->waiting, &ts->waiting_fin};
	for (int i = 0; i < 3; i++) {
		while (!pcori_list_empty(lists[i])) {
			pcori_txmsg_t *m = PCORI_CONTAINER_OF(
			    lists[i]->next, pcori_txmsg_t, link);
			pcori_list_remove(&m->link);
			if (!pcori_list_empty(&m->slink))
				pcori_list_remove(&m->slink);
			m->flags |= PCORI_TXM_DEAD;
			if (m->req) {
				defer(&d, D_COMPLETE, m->req, status, NULL);
				m->req = NULL;
			}
			/* Completions still owed by the fabric free it later.
			 */
			pcori_list_push_back(txm_done(m) ? &dead : &ts->orphans,
					     &m->link);
			if (d.n == (int)PCORI_ARRAY_LEN(d.a)) {
				pcori_unlock(&ts->lock);
				run_deferred(&d);
				pcori_lock(&ts->lock);
			}
		}
	}
	ts->probing = false;
	atomic_store_explicit(&ts->resume_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&ts->rto_ns, 0, memory_order_relaxed);
	ts->resync = resync;
	/* Nothing sent so far is waited for any more (fast ones included). */
	ts->acked = ts->next_seq;
	pcori_unlock(&ts->lock);
	run_deferred(&d);
	free_list(&dead);
}

/* The message a stream is assembling will not be finished.  Lock held. */
static void rs_abandon(pcori_peer_t *peer, pcori_rxstream_t *rs, int status,
		       deferred_t *d)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	pcori_mkey_t k = {peer->pid, rs->thid, 0, 0, 0};
	rs->active = false;
	if (rs->req) {
		pcori_req_t *r = rs->req;
		recv_finish(r, &k, rs->size,
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
			recv_finish(m->rreq, &m->hent.key, m->size, NULL,
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
		deferred_t d = {0};
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
		run_deferred(&d);
	} while (t < pcori_rt.max_threads);
	while (rl) {
		v = rl;
		rl = v->hh.next;
		rndv_complete(v, status, false);
		rndv_unref(v); /* the table's reference */
	}
}
