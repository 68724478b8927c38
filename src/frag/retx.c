/*
 * retx.c -- the sender's side of reliability: what an ACK completes
 * (alone, riding on data, or carried by a BYE), what a NACK sends again
 * (selective: only the messages it names; a refusal: go back and probe
 * after a back-off), the timers that whoever makes progress runs (a
 * timeout sends only the oldest again; a lossy path that takes nothing
 * for the stall bound is given up), sending again after a route
 * changed, and failing a whole stream.
 *
 * Locks: each works under the stream's lock and completes requests
 * after dropping it.  pcori_timers_run takes due streams off the heap
 * of timers (timers.c), then takes each stream's lock.  Calls tx.c,
 * rndv.c, ack.c, ctl.c and timers.c.
 */
#include "proto.h"

/* Complete what an ack covers.  Stream lock held. */
static void ack_upto(pcori_txstream_t *ts, uint32_t upto, pcori_list_t *dead,
		     pcori_deferred_t *d)
{
	bool moved =
	    pcori_seq_lt(ts->acked, upto) && !pcori_seq_lt(ts->next_seq, upto);
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
		if (!pcori_seq_lt(m->seq, upto))
			break;
		if (!(m->flags & PCORI_TXM_RETX)) /* Karn: first sends only */
			sent_ns = m->posted_ns;
		m->flags |= PCORI_TXM_ACKED;
		ts->probing = false; /* the receiver takes messages again */
		pcori_txm_settle(m, d);
		pcori_list_remove(&m->link);
		if (pcori_txm_done(m))
			pcori_list_push_back(dead, &m->link);
		else if (m->flags & PCORI_TXM_RNDV)
			pcori_list_push_back(&ts->waiting_fin, &m->link);
		/* else: provider completions outstanding; tx_done frees */
		if (d->n == (int)PCORI_ARRAY_LEN(d->a)) {
			pcori_unlock(&ts->lock);
			pcori_run_deferred(d);
			pcori_lock(&ts->lock);
		}
	}
	uint64_t now = pcori_now_ns();
	if (sent_ns)
		pcori_rtt_sample(ts, now - sent_ns);
	ts->backoff_us = PCORI_BACKOFF_MIN_US;
	ts->resync = false; /* the receiver follows us again */
	/* Progress: the timeout restarts from now (backed off no more). */
	if (moved)
		ts->rto_shift = 0;
	if (pcori_list_empty(&ts->sent))
		atomic_store_explicit(&ts->rto_ns, 0, memory_order_relaxed);
	else
		pcori_rto_arm(ts);
}

static void free_list(pcori_list_t *l)
{
	while (!pcori_list_empty(l)) {
		pcori_list_t *n = l->next;
		pcori_list_remove(n);
		pcori_txm_free(PCORI_CONTAINER_OF(n, pcori_txmsg_t, link));
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

void pcori_on_ack(pcori_peer_t *peer, int32_t thid, uint32_t upto)
{
	heard_from(peer);
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	if (!ts)
		return;
	pcori_list_t dead;
	pcori_deferred_t d = {0};
	pcori_list_init(&dead);
	pcori_lock(&ts->lock);
	bool was_probing = ts->probing;
	ack_upto(ts, upto, &dead, &d);
	if (was_probing && !ts->probing && !ts->resume_ns)
		pcori_flush_waiting(ts);
	pcori_unlock(&ts->lock);
	pcori_run_deferred(&d);
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
		if (pcori_txm_post(m) != PCOR_OK) {
			ts->resend = true;
			pcori_timer_refused(ts);
			return;
		}
		pcori_timer_accepted(ts);
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
static void resend_some(pcori_port_t *port, pcori_txstream_t *ts, uint32_t seq,
			uint32_t map)
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

void pcori_on_nack(pcori_port_t *port, pcori_peer_t *peer, int32_t thid,
		   uint32_t seq, uint32_t frag_idx, uint64_t map)
{
	pcori_txstream_t *ts =
	    atomic_load_explicit(&peer->tx[thid], memory_order_acquire);
	heard_from(peer);
	if (!ts)
		return;
	atomic_fetch_add_explicit(&port->st.nack_rcvd, 1, memory_order_relaxed);
	pcori_lock(&ts->lock);
	if (frag_idx == PCORI_NACK_SELECTIVE) {
		resend_some(port, ts, seq, (uint32_t)map);
		pcori_unlock(&ts->lock);
		return;
	}
	go_back(ts, seq);
	uint64_t when = pcori_now_ns() + (uint64_t)ts->backoff_us * 1000;
	ts->backoff_us = PCORI_MIN(ts->backoff_us * 2, PCORI_BACKOFF_MAX_US);
	ts->probing = true;
	pcori_timer_arm(ts, when);
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
		if (pcori_seq_lt(m->seq, seq))
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
				pcori_flush_waiting(ts);
		}
		pcori_unlock(&ts->lock);
	}
}

void pcori_acks_final_in(pcori_peer_t *peer, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint32_t thid = pcori_get32(b + i);
		if (thid < (uint32_t)pcori_rt.max_threads)
			pcori_on_ack(peer, (int32_t)thid,
				     pcori_get32(b + i + 4));
	}
}

/* ------------------------------------------------------------ timers */

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
		   (unsigned long long)(pcori_elapsed_ns(now, ts->stalled_ns) /
						 1000000u),
		   ts->rto_shift, ts->thid);
	ts->rto_shift = 0;
	pcori_unlock(&ts->lock);
	pcori_txstream_fail(ts, PCOR_ERR_UNREACHABLE, true);
}

/* Resend what waits for its time.  Returns messages posted. */
int pcori_timers_run(void)
{
	/*
	 * A partial view cannot prove a peer unreachable: peers keep their
	 * routes until a complete table says otherwise.
	 */
	if (pcori_routes_due() && pcori_routes_rebuild() == PCOR_OK)
		pcori_peers_reroute();
	int n = pcori_readq_run() + pcori_ctlq_run() + pcori_peers_reap() +
		pcori_watch_run();
	if (pcori_timers_none())
		return n; /* no clock read */
	uint64_t now = pcori_now_ns();
	pcori_list_t due;
	pcori_list_init(&due);
	if (!pcori_timers_due(now, &due))
		return n;
	while (!pcori_list_empty(&due)) {
		pcori_txstream_t *ts =
		    PCORI_CONTAINER_OF(due.next, pcori_txstream_t, timer_link);
		/* Under the stream lock: its timer's state changes under it. */
		pcori_lock(&ts->lock);
		uint64_t at = pcori_timer_taken(ts);
		if (at > now) {
			/* Its key was early (timers.c): wait for the real time. */
			pcori_timer_list(ts);
			pcori_unlock(&ts->lock);
			continue;
		}
		if (ts->rto_ns && ts->rto_ns <= now &&
		    !pcori_list_empty(&ts->sent)) {
			uint32_t heard = atomic_load_explicit(
			    &ts->peer->heard, memory_order_relaxed);
			/* Counted from the first timeout, or the last word. */
			if (!ts->rto_shift || heard != ts->stall_heard) {
				ts->stalled_ns = now;
				ts->stall_heard = heard;
			}
			if (pcori_elapsed_ns(now, ts->stalled_ns) >=
				pcori_stall_bound_ns() &&
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
			pcori_rto_arm(ts); /* from now, backed off */
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
			n += pcori_flush_waiting(ts);
		while (!pcori_list_empty(&ts->streaming) && !ts->resume_ns) {
			pcori_txmsg_t *m = PCORI_CONTAINER_OF(
			    ts->streaming.next, pcori_txmsg_t, slink);
			pcori_stream_post(m);
			n++;
		}
		/* Still waiting for something: stay on the list. */
		if (ts->resume_ns || ts->rto_ns)
			pcori_timer_list(ts);
		pcori_unlock(&ts->lock);
	}
	return n;
}

/* ------------------------------------------------------- peer failure */

void pcori_txstream_fail(pcori_txstream_t *ts, int status, bool resync)
{
	pcori_list_t dead;
	pcori_deferred_t d = {0};
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
				pcori_defer(&d, PCORI_D_COMPLETE, m->req,
					    status, NULL);
				m->req = NULL;
			}
			/* Completions still owed by the fabric free it later.
			 */
			pcori_list_push_back(
			    pcori_txm_done(m) ? &dead : &ts->orphans, &m->link);
			if (d.n == (int)PCORI_ARRAY_LEN(d.a)) {
				pcori_unlock(&ts->lock);
				pcori_run_deferred(&d);
				pcori_lock(&ts->lock);
			}
		}
	}
	ts->probing = false;
	pcori_timer_accepted(ts); /* nothing waits to be posted now */
	atomic_store_explicit(&ts->resume_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&ts->rto_ns, 0, memory_order_relaxed);
	ts->resync = resync;
	/* Nothing sent so far is waited for any more (fast ones included). */
	ts->acked = ts->next_seq;
	pcori_unlock(&ts->lock);
	pcori_run_deferred(&d);
	free_list(&dead);
}
