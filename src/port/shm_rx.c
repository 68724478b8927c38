/*
 * shm_rx.c -- the pcor-shm port's receiving side: resolving the sender
 * of each receive slot, draining rings (compact fast records, inline
 * frames, cell runs), parking a ring whose head the protocol cannot take
 * yet, releasing departed peers, progress, and sleeping in the port
 * (waiters and the dispatcher) until a sender wakes it.
 */
#include "shm_port.h"

#include <sys/mman.h>

/* Reset receive slot s of our segment for a future sender.  Progress. */
void shmp_rslot_reset(shm_port_t *p, uint32_t s)
{
	shm_rslot_t *rs = &p->rslots[s];
	if (rs->peer)
		atomic_store_explicit(&rs->peer->rx_slot, -1,
				      memory_order_relaxed);
	rs->peer = NULL;
	rs->head = rs->published = rs->retry_ns = rs->parked_ns = 0;
	rs->broken = false;
	atomic_store_explicit(&rs->quiet, false, memory_order_relaxed);
	atomic_store_explicit(&p->heads[s], 0, memory_order_relaxed);
	pcori_shm_ring_t ring = {.buf = p->rings + (uint64_t)s * p->g.ring_size,
				 .size = p->g.ring_size};
	pcori_shm_ring_reset(&ring);
	/* Release: the ring is empty before anyone can claim it. */
	atomic_store_explicit(&p->owners[s], 0, memory_order_release);
}

/*
 * Release peer d, which the directory reported gone.  Progress only.
 * What it wrote into its ring before it went is handed up first: its
 * last acks and message ends are valid, and the protocol is told of the
 * loss only after this (see on_member).
 */
static void release_one(shm_port_t *p, shm_peer_t *d)
{
	pcori_lock(&d->tx_lock);
	d->gone = true;
	pcori_unlock(&d->tx_lock);
	uint32_t hwm = PCORI_MIN(atomic_load(&p->hdr->hwm), p->g.nslots);
	for (uint32_t s = 0; s < hwm; s++) {
		shm_rslot_t *rs = &p->rslots[s];
		if (rs->peer != d &&
		    atomic_load(&p->owners[s]) != (uint64_t)d->pid + 1)
			continue;
		/* Bounded: at most a ring's worth of records. */
		for (uint32_t k = 0; k <= p->g.ring_size / PCORI_SHM_SLOT; k++)
			if (rs->broken || !shmp_drain(p, s))
				break;
		shmp_rslot_reset(p, s);
	}
	/* dead is set: a reader that counted itself first is let finish. */
	while (atomic_load(&d->readers))
		sched_yield();
	if (d->base) {
		munmap(d->base, d->size);
		d->base = NULL;
	}
	atomic_store_explicit(&d->released, true, memory_order_release);
	PCORI_INFO(PCORI_SUB_DISPATCH,
		   "port %d (pcor-shm): process %d released", p->base.index,
		   d->pid);
}

int shmp_release_dead(shm_port_t *p)
{
	if (!atomic_load_explicit(&p->ndead, memory_order_acquire))
		return 0;
	int n = 0;
	for (;;) {
		/* Not under peers_lock: draining calls the protocol. */
		shm_peer_t *d;
		pcori_lock(&p->peers_lock);
		for (d = p->peers; d; d = d->next)
			if (atomic_load(&d->dead) && !atomic_load(&d->released))
				break;
		pcori_unlock(&p->peers_lock);
		if (!d)
			break;
		release_one(p, d);
		atomic_fetch_sub(&p->ndead, 1);
		n++;
	}
	/* The cells it had not consumed come back (once its process ended). */
	pcori_lock(&p->pool_lock);
	pcori_shm_pool_sweep(&p->pool, true, shmp_cells_free);
	pcori_unlock(&p->pool_lock);
	return n;
}

/*
 * The fields of a one-slot fast record at data (pcori_shm_fast_s_t),
 * read once, into our own: the peer may rewrite the record.
 */
static inline void fast_s_read(pcori_fast_hdr_t *f, const uint8_t *data)
{
	pcori_shm_fast_s_t s;
	memcpy(&s, data, sizeof(s));
	f->src_thid = s.src_thid;
	f->dst_thid = s.dst_thid;
	f->tag = s.tag;
	f->ctx = s.ctx;
	f->seq = s.seq;
	f->flags = PCORI_WF_FAST;
	f->cookie = 0;
}

/*
 * Hand up a fast record from peer d (its fields are the protocol's, see
 * shm_inject_fast).  Returns what pcori_port_recv_fast does.
 */
static int fast_recv(shm_port_t *p, const shm_peer_t *d,
		     const pcori_shm_rec_t *rec, pcori_rx_batch_t *b)
{
	pcori_fast_hdr_t f;
	if (rec->kind == PCORI_SHM_REC_FAST_S) {
		/* pcori_shm_ring_next checked its length. */
		fast_s_read(&f, rec->data);
		size_t off = sizeof(pcori_shm_fast_s_t);
		return pcori_port_recv_fast(&p->base, d->pid, &f,
					    rec->data + off, rec->len - off, b);
	}
	size_t off = sizeof(pcori_shm_fast_t);
	if (rec->len < off)
		return -1;
	/* Read once, into our own: the peer may rewrite the record. */
	memcpy(&f, rec->data, sizeof(pcori_shm_fast_t));
	f.cookie = 0;
	if (f.flags & PCORI_WF_HAS_ACK) {
		if (rec->len < off + 8)
			return -1;
		memcpy(&f.cookie, rec->data + off, 8);
		off += 8;
	}
	return pcori_port_recv_fast(&p->base, d->pid, &f, rec->data + off,
				    rec->len - off, b);
}

/* --------------------------------------------------------- progress */

/* Resolve the sender of slot s.  false: not now. */
static bool rslot_attach(shm_port_t *p, uint32_t s)
{
	shm_rslot_t *rs = &p->rslots[s];
	if (rs->retry_ns && pcori_now_ns() < rs->retry_ns)
		return false;
	uint64_t owner =
	    atomic_load_explicit(&p->owners[s], memory_order_acquire);
	if (owner == 0 || owner > (uint64_t)INT32_MAX) {
		rs->broken = true;
		atomic_store_explicit(&rs->quiet, true, memory_order_relaxed);
		return false;
	}
	int pid = (int)(owner - 1);
	shm_addr_t a;
	shm_peer_t *d = NULL;
	int rc = shmp_peer_lookup(p, pid, &a);
	if (!rc && a.pid != pid)
		rc = PCOR_ERR_PROTO;
	if (!rc)
		rc = shmp_peer_get(p, &a, &d);
	if (rc == PCOR_ERR_PEER_LOST) {
		/*
		 * It left while its messages waited.  What is in the ring is
		 * still good (its last words may be there); cell runs in its
		 * segment, which nobody can map any more, are not.
		 */
		pcori_lock(&p->peers_lock);
		d = shmp_peer_find(p, pid);
		if (!d)
			d = shmp_peer_new(p, pid);
		pcori_unlock(&p->peers_lock);
		if (!d) {
			shmp_rslot_reset(p, s);
			return false;
		}
		rc = PCOR_OK;
	}
	if (rc) {
		PCORI_WARN_ONCE(PCORI_SUB_DISPATCH,
				"pcor-shm: cannot resolve the sender in slot "
				"%u (process %d): %s; retrying",
				s, pid, pcor_strerror(rc));
		rs->retry_ns = pcori_now_ns() + SHM_RETRY_NS;
		return false;
	}
	rs->retry_ns = 0;
	rs->peer = d;
	atomic_store_explicit(&d->rx_slot, (int32_t)s, memory_order_relaxed);
	return true;
}

/* Is slot s the only one of this segment claimed in owner's name? */
static bool sole_slot(shm_port_t *p, uint32_t s, uint64_t owner)
{
	uint32_t hwm = PCORI_MIN(atomic_load(&p->hdr->hwm), p->g.nslots);
	for (uint32_t k = 0; k < hwm; k++)
		if (k != s && atomic_load(&p->owners[k]) == owner)
			return false;
	return true;
}

static void rslot_broken(shm_port_t *p, uint32_t s, const char *why)
{
	shm_rslot_t *rs = &p->rslots[s];
	rs->broken = true;
	atomic_store_explicit(&rs->quiet, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->base.st.bad_hdr, 1, memory_order_relaxed);
	PCORI_WARN(PCORI_SUB_DISPATCH,
		   "port %d (pcor-shm): ring of slot %u is malformed (%s): "
		   "abandoned",
		   p->base.index, s, why);
	/*
	 * Its sender's messages to us all come through this ring: the ones
	 * behind the bad record cannot be read, so what waits for them must
	 * fail, not wait until it leaves.  A sender claims one slot per
	 * receiver: a second slot in its name was claimed by someone else,
	 * so which of the two lies cannot be told, and only the ring goes.
	 */
	int pid = rs->peer ? rs->peer->pid : -1;
	if (pid >= 0 && sole_slot(p, s, (uint64_t)pid + 1))
		pcori_port_peer_fault(&p->base, pid);
}

/*
 * The length a hop probe is told a fast record has: a slot's (FAST_S,
 * or FAST without data) leaves no spare end in its line for the
 * sender's stamp (it may be the next slot's).
 */
static inline size_t hop_len(const pcori_shm_rec_t *rec)
{
	return pcori_shm_rec_size(rec->len) > PCORI_SHM_SLOT
		       ? PCORI_SHM_REC_HDR + rec->len
		       : PCORI_SHM_LINE;
}

/* The record at the ring's head was refused for now: retry later. */
static void park(shm_port_t *p, shm_rslot_t *rs)
{
	rs->parked_ns = pcori_now_ns() + SHM_PARK_NS;
	atomic_store_explicit(&rs->quiet, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->base.st.parked, 1, memory_order_relaxed);
}

/* Hand the records of slot s up to the protocol.  Progress only. */
PCORI_NOINLINE int shmp_drain(shm_port_t *p, uint32_t s)
{
	shm_rslot_t *rs = &p->rslots[s];
	if (rs->broken || (!rs->peer && !rslot_attach(p, s)))
		return 0;
	shm_peer_t *d = rs->peer;
	if (PCORI_UNLIKELY(rs->parked_ns)) {
		if (pcori_now_ns() < rs->parked_ns)
			return 0;
		rs->parked_ns = 0;
		atomic_store_explicit(&rs->quiet, false, memory_order_relaxed);
	}
	uint64_t head = rs->head;
	pcori_shm_ring_t ring = {
	    .buf = p->rings + (uint64_t)s * p->g.ring_size,
	    .size = p->g.ring_size,
	};
	int n = 0;
	/* A run of fast records takes the receiving locks once. */
	pcori_rx_batch_t b = {0};
	while (n < SHM_DRAIN_BUDGET) {
		pcori_shm_rec_t rec;
		uint64_t next;
		int got = pcori_shm_ring_next(&ring, head, &rec, &next);
		if (got < 0) {
			pcori_rx_batch_end(&b); /* no receiving lock held */
			rslot_broken(p, s, "record");
			break;
		}
		if (!got)
			break;
		if (rec.kind == PCORI_SHM_REC_WRAP ||
		    rec.kind == PCORI_SHM_REC_PAD) {
			head = next;
			continue;
		}
		bool cells = rec.kind == PCORI_SHM_REC_CELLS ||
			     rec.kind == PCORI_SHM_REC_FAST_CELLS;
		if (cells) {
			const pcori_shm_geom_t *g = &d->g;
			if (!d->base && atomic_load(&d->dead)) {
				/* Its sender's segment is gone with it. */
				PCORI_INFO(PCORI_SUB_DISPATCH,
					   "pcor-shm: process %d left before "
					   "a %u-byte message of its was read",
					   d->pid, rec.len);
				head = next;
				n++;
				continue;
			}
			if (!d->base || rec.first >= g->ncells ||
			    rec.count == 0 ||
			    rec.count > g->ncells - rec.first ||
			    rec.len > (uint64_t)rec.count * g->cell_size) {
				pcori_rx_batch_end(&b); /* no receiving lock held */
				rslot_broken(p, s, "cell run");
				break;
			}
			rec.data = d->cells + (uint64_t)rec.first * g->cell_size;
		}
		if (rec.kind == PCORI_SHM_REC_FAST ||
		    rec.kind == PCORI_SHM_REC_FAST_S)
			PCORI_HOP_SEEN_REC(ring.buf + (head & (ring.size - 1)),
					   hop_len(&rec));
		/* Compact records (in the ring or in cells) or whole frames. */
		int r;
		if (rec.kind == PCORI_SHM_REC_FAST ||
		    rec.kind == PCORI_SHM_REC_FAST_S ||
		    rec.kind == PCORI_SHM_REC_FAST_CELLS) {
			r = fast_recv(p, d, &rec, &b);
		} else {
			pcori_rx_batch_end(&b);
			r = pcori_port_recv(&p->base, rec.data, rec.len);
		}
		if (r <= 0)
			pcori_rx_batch_end(&b);
		if (r < 0) {
			rslot_broken(p, s, "fast record");
			break;
		}
		if (!r) {
			/* No room for it yet: the ring waits. */
			park(p, rs);
			break;
		}
		if (cells)
			pcori_shm_mark_done(d->marks, rec.first);
		pcori_shm_ring_consumed(&ring, head, next);
		head = next;
		n++;
		/* Give room back early when a lot was consumed. */
		if (head - rs->published >= p->g.ring_size / 4) {
			atomic_store_explicit(&p->heads[s], head,
					      memory_order_release);
			rs->published = head;
		}
	}
	pcori_rx_batch_end(&b);
	/* It answered: our next send to it starts a new run (ring_end). */
	if (n && atomic_load_explicit(&d->sent_run, memory_order_relaxed))
		atomic_store_explicit(&d->sent_run, 0, memory_order_relaxed);
	rs->head = head;
	if (rs->published != head) {
		atomic_store_explicit(&p->heads[s], head, memory_order_release);
		rs->published = head;
	}
	return n;
}

static pcori_shm_ring_t ring_of(const shm_port_t *p, uint32_t s)
{
	return (pcori_shm_ring_t){
	    .buf = p->rings + (uint64_t)s * p->g.ring_size,
	    .size = p->g.ring_size,
	};
}

/*
 * One look at the line at each ring's head: an idle ring's line stays
 * in our cache, so only rings with news cost a transfer.
 */
static int scan(shm_port_t *p)
{
	uint32_t hwm = atomic_load_explicit(&p->hdr->hwm, memory_order_acquire);
	hwm = PCORI_MIN(hwm, p->g.nslots);
	int n = 0;
	for (uint32_t s = 0; s < hwm; s++) {
		const shm_rslot_t *rs = &p->rslots[s];
		pcori_shm_ring_t ring = ring_of(p, s);
		if (!rs->broken && pcori_shm_ring_ready(&ring, rs->head))
			n += shmp_drain(p, s);
	}
	return n;
}

/* Peers gone and completions: what a poll handles besides the rings. */
static inline int port_events(shm_port_t *p)
{
	/* Tested here, not in the callees: most rounds find neither. */
	int n = 0;
	if (PCORI_UNLIKELY(
		atomic_load_explicit(&p->ndead, memory_order_acquire)))
		n += shmp_release_dead(p);
	if (atomic_load_explicit(&p->cq_ready, memory_order_acquire))
		n += shmp_cq_drain(p);
	return n;
}

static int poll_once(shm_port_t *p)
{
	return port_events(p) + scan(p);
}

int shmp_progress(pcori_port_t *bp, int timeout_ms)
{
	shm_port_t *p = (shm_port_t *)bp;
	PCORI_ASSERT_LOCKED(&bp->progress_lock);
	int n = poll_once(p);
	if (n || timeout_ms <= 0)
		return n;
	bp->ops->wait(bp, timeout_ms, NULL, 0);
	return poll_once(p);
}

/* Slot s + 1 of the ring the peer at dest writes to us (0: none yet). */
uint64_t shmp_watch(pcori_port_t *bp, uint64_t dest)
{
	(void)bp;
	const shm_peer_t *d = (const shm_peer_t *)(uintptr_t)dest;
	int32_t s = atomic_load_explicit(&d->rx_slot, memory_order_relaxed);
	return s >= 0 ? (uint64_t)s + 1 : 0;
}

/*
 * The common record at a watched ring's head, taken without the drain's
 * loop and layers: a one-slot or one-line fast record without an ack,
 * which pcori_port_take_fast can hand over at once.  false: nothing
 * changed, the drain takes it.  Progress only.
 */
static bool take_watched(shm_port_t *p, uint32_t s,
			 const pcori_shm_ring_t *ring)
{
	shm_rslot_t *rs = &p->rslots[s];
	shm_peer_t *d = rs->peer;
	if (!d || rs->broken || rs->parked_ns)
		return false;
	/* What pcori_shm_ring_next checks of such a record. */
	uint64_t head = rs->head;
	const uint8_t *at = ring->buf + (head & (ring->size - 1));
	uint64_t w = __atomic_load_n((const uint64_t *)(const void *)at,
				     __ATOMIC_ACQUIRE);
	uint32_t kind = (uint32_t)(w >> 32) & 15, len = (uint32_t)(w >> 36);
	if ((uint32_t)w != pcori_shm_stamp(head))
		return false;
	const uint8_t *data = at + PCORI_SHM_REC_HDR;
	pcori_fast_hdr_t f;
	size_t off;
	uint64_t size;
	if (kind == PCORI_SHM_REC_FAST_S && len >= sizeof(pcori_shm_fast_s_t) &&
	    len <= PCORI_SHM_SLOT - PCORI_SHM_REC_HDR) {
		fast_s_read(&f, data);
		off = sizeof(pcori_shm_fast_s_t);
		size = PCORI_SHM_SLOT;
	} else if (kind == PCORI_SHM_REC_FAST &&
		   len >= sizeof(pcori_shm_fast_t) &&
		   len <= PCORI_SHM_LINE - PCORI_SHM_REC_HDR) {
		/* A slot with no data, else a line, which starts on one. */
		size = pcori_shm_rec_size(len);
		if (size > PCORI_SHM_SLOT && (head & (PCORI_SHM_LINE - 1)))
			return false;
		/* Read once, into our own: the peer may rewrite the record. */
		memcpy(&f, data, sizeof(pcori_shm_fast_t));
		f.cookie = 0;
		off = sizeof(pcori_shm_fast_t);
	} else {
		return false;
	}
	/* As hop_len says. */
	PCORI_HOP_SEEN_REC(at, size > PCORI_SHM_SLOT ? PCORI_SHM_REC_HDR + len
						     : PCORI_SHM_LINE);
	if (f.flags & PCORI_WF_HAS_ACK ||
	    !pcori_port_take_fast(&p->base, d->pid, &f, data + off, len - off))
		return false;
	/* One slot or line: nothing to clear behind it (ring_consumed). */
	rs->head = rs->published = head + size;
	atomic_store_explicit(&p->heads[s], rs->head, memory_order_release);
	if (atomic_load_explicit(&d->sent_run, memory_order_relaxed))
		atomic_store_explicit(&d->sent_run, 0, memory_order_relaxed);
	return true;
}

/* The watched ring has news, or the port has events: take them. */
static PCORI_NOINLINE int watched_poll(shm_port_t *p, uint32_t s)
{
	if (!pcori_trylock(&p->base.progress_lock))
		return 0;
	int n = port_events(p);
	/* As scan does: the private head says (the slot may be new). */
	const shm_rslot_t *rs = &p->rslots[s];
	pcori_shm_ring_t ring = ring_of(p, s);
	if (!n && take_watched(p, s, &ring))
		n = 1;
	else if (!rs->broken && pcori_shm_ring_ready(&ring, rs->head))
		n += shmp_drain(p, s);
	pcori_unlock(&p->base.progress_lock);
	return n;
}

/*
 * One look at the ring of the slot in token, and at what would stop the
 * port (a peer gone, completions): the waiter's poll.  The head is the
 * one the last drain published; any value is only a hint, as a drain
 * reads its own copy.
 */
int shmp_progress_watched(pcori_port_t *bp, uint64_t token)
{
	shm_port_t *p = (shm_port_t *)bp;
	uint32_t s = (uint32_t)(token - 1);
	pcori_shm_ring_t ring = ring_of(p, s);
	uint64_t h = atomic_load_explicit(&p->heads[s], memory_order_relaxed);
	bool news = h % PCORI_SHM_SLOT || pcori_shm_ring_ready(&ring, h);
	if (PCORI_LIKELY(!news) &&
	    !atomic_load_explicit(&p->cq_ready, memory_order_relaxed) &&
	    !atomic_load_explicit(&p->ndead, memory_order_relaxed))
		return 0;
	/* Out of line: the look above then needs no frame. */
	return watched_poll(p, s);
}

/*
 * Anything for a sleeper?  Read by any thread, without the progress
 * lock: looks for a record at the heads published by whoever drained
 * last (a ring being drained just now counts as work).
 */
static bool arrivals(shm_port_t *p, bool *quiet_p)
{
	if (atomic_load(&p->cq_ready) || atomic_load(&p->ndead) ||
	    atomic_load(&p->base.stop))
		return true;
	uint32_t hwm = PCORI_MIN(atomic_load(&p->hdr->hwm), p->g.nslots);
	for (uint32_t s = 0; s < hwm; s++) {
		pcori_shm_ring_t ring = ring_of(p, s);
		uint64_t h = atomic_load(&p->heads[s]);
		if (h % PCORI_SHM_SLOT || !pcori_shm_ring_ready(&ring, h))
			continue;
		/* Parked or broken: retried on a timer, not woken for. */
		if (!atomic_load_explicit(&p->rslots[s].quiet,
					  memory_order_relaxed))
			return true;
		*quiet_p = true;
	}
	return false;
}

void shmp_wait(pcori_port_t *bp, int timeout_ms, _Atomic uint32_t *word,
	       uint32_t value)
{
	shm_port_t *p = (shm_port_t *)bp;
	/*
	 * Say so first, then fence: a sender then sees the flag, or we see
	 * its data.  Our locked add is the fence where senders fence too
	 * (`fenced`); else they fence only for the compiler and we make
	 * every pcor thread on the host fence.  Without that a sleep is cut
	 * to a tick.
	 */
	atomic_fetch_add_explicit(&p->hdr->sleeping, 1, memory_order_seq_cst);
	if (!p->fenced && !pcori_fence_heavy_global() &&
	    (timeout_ms < 0 || timeout_ms > 1))
		timeout_ms = 1;
	uint32_t w = atomic_load_explicit(&p->hdr->wake, memory_order_seq_cst);
	bool quiet = false;
	if (!arrivals(p, &quiet) && (!word || atomic_load(word) == value))
		futex_wait_shared(&p->hdr->wake, w, quiet ? 1 : timeout_ms);
	atomic_fetch_sub_explicit(&p->hdr->sleeping, 1, memory_order_seq_cst);
}

void shmp_signal(pcori_port_t *bp)
{
	shm_port_t *p = (shm_port_t *)bp;
	atomic_fetch_add_explicit(&p->hdr->wake, 1, memory_order_seq_cst);
	futex_wake_shared(&p->hdr->wake);
}
