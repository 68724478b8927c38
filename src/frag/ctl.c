/*
 * ctl.c -- control frames: the protocol's own messages (ACK, NACK, CTS,
 * FIN, FINACK, CTRL) and the frames a gateway forwards for other
 * processes.  Each is handed to the port at once when it takes it, else
 * copied onto one queue that the timers retry in order: control frames
 * are never lost here.  Forwarded frames share that queue, bounded by
 * FWD_QUEUE_MAX.
 *
 * Locks: ctlq.lock guards the queue and comes after every protocol lock:
 * pcori_send_ctl is called with a peer's rx_lock held.  Only the port's
 * send-side locks (leaves) are taken under it, by pcori_ctlq_run.  Calls
 * only timers.c (the kick that wakes a sleeping sender for a queued frame);
 * the timers read the queue's length in pcori_net, not here.
 */
#include "proto.h"

/* The inter-process state (net.h). */
pcori_net_t pcori_net;

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
	pcori_list_t list; /* its length: pcori_net.nctlq */
	_Atomic size_t bytes; /* queued, for the forwarding bound */
} ctlq = {.lock = PCORI_LOCK_INITIALIZER, .list = {&ctlq.list, &ctlq.list}};

/* Frames a gateway keeps queued for the next hop at most (then drops). */
#define FWD_QUEUE_MAX ((size_t)64 << 20)

static void ctlq_push(ctlmsg_t *c)
{
	pcori_lock(&ctlq.lock);
	pcori_list_push_back(&ctlq.list, &c->link);
	atomic_fetch_add(&pcori_net.nctlq, 1);
	atomic_fetch_add(&ctlq.bytes, c->len);
	pcori_unlock(&ctlq.lock);
	pcori_timers_kick();
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
int pcori_ctlq_run(void)
{
	if (!atomic_load_explicit(&pcori_net.nctlq, memory_order_relaxed))
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
		atomic_fetch_sub(&pcori_net.nctlq, 1);
		atomic_fetch_sub(&ctlq.bytes, len);
		if (rc != PCOR_OK || inject)
			free(c);
		done++;
	}
	pcori_unlock(&ctlq.lock);
	return done;
}

void pcori_send_ctl(pcori_peer_t *peer, uint8_t type, int32_t thid,
		    uint32_t seq, uint64_t cookie, uint32_t frag_idx,
		    const pcori_wire_hdr_t *ref)
{
	pcori_wire_hdr_t h;
	uint8_t buf[PCORI_WIRE_HDR_SIZE];
	pcori_hdr_init(&h, type, peer->pid);
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
	pcori_hdr_init(&h, PCORI_W_CTRL, peer->pid);
	h.src_thid = pcori_self_thid() >= 0 ? pcori_self_thid() : 0;
	h.ctx = op;
	h.frag_len = (uint32_t)len;
	pcori_wire_encode(&h, hb);
	return ctl_post(peer, hb, body, len);
}

/*
 * Finalize, the ports closed: what never found room is dropped, so that
 * no frame naming a freed peer waits for the next init.
 */
void pcori_ctlq_fini(void)
{
	pcori_lock(&ctlq.lock);
	while (!pcori_list_empty(&ctlq.list)) {
		ctlmsg_t *c =
		    PCORI_CONTAINER_OF(ctlq.list.next, ctlmsg_t, link);
		pcori_list_remove(&c->link);
		free(c);
	}
	atomic_store(&pcori_net.nctlq, 0);
	atomic_store(&ctlq.bytes, 0);
	pcori_unlock(&ctlq.lock);
}

/* Control frames queued (the ack drain's test; the timers read nctlq). */
int pcori_ctlq_len(void)
{
	return atomic_load(&pcori_net.nctlq);
}

/*
 * A frame for another process: send it on along our route to it,
 * unchanged but for one hop less (store and forward, per fragment).
 * Frames out of hops, with no route, or beyond the queue bound are
 * dropped and counted; the ends' resends make up for them.
 */
void pcori_forward(pcori_port_t *port, const uint8_t *msg, size_t len,
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
