/*
 * ack.c -- the acknowledgements this process owes, and the clock of
 * those its send streams wait for.
 *
 *  - Owed, per receive stream: the ack point, when an ack is due (every
 *    ACK_EVERY messages, after PCOR_ACK_DELAY_NS, or lazily for fast
 *    messages), riding on a first fragment going the other way
 *    (pcori_piggyback) or sent alone (pcori_acks_flush), and the ack
 *    points a leaving process puts in its BYE (pcori_acks_final,
 *    pcori_acks_repeat: TIME_WAIT).
 *  - Owed, per receive stream with a gap it asked for: the ask again,
 *    once its sender has been quiet for a while (pcori_gap_watch).
 *  - Awaited, per send stream: the retransmission timeout from measured
 *    round trips (RFC 6298); timers.c keeps the streams' timers and
 *    retx.c runs them.
 *
 * Locks: a peer's rx_lock guards its receive streams' ack state and its
 * list of acks to send; acks go out after it is dropped.  pcori_piggyback
 * runs under a send stream's lock and only trylocks rx_lock.  Timeouts are
 * armed under the stream's lock.  Calls ctl.c and timers.c.
 */
#include "proto.h"

#define ACK_EVERY 32u /* messages before an ack must go */
/* Stall bounds a gap on a fast route stays open before it is lost. */
#define LOSSLESS_GAP_STALLS 4u

/*
 * A peer's counts of streams owing acks and streams with gaps are written
 * under its rx_lock only and read without it: a store, not a locked add.
 */
static inline void count_add(pcori_peer_t *peer, _Atomic int *count,
			     int delta)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	atomic_store_explicit(
	    count, atomic_load_explicit(count, memory_order_relaxed) + delta,
	    memory_order_relaxed);
}

static inline void nacks_add(pcori_peer_t *peer, int delta)
{
	count_add(peer, &peer->nacks, delta);
}

/*
 * What an ack of rs covers now: every message started and complete -- but
 * not past one held outside the MCB pool while any such is left (see
 * start_message in rx.c).  Peer rx_lock held.
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

/*
 * An ack due delay_ns from now unless one is listed already.  lazy: it
 * is for fast messages only, which nobody waits for but a finalize, so
 * a thread going to sleep need not send it first (it is due within
 * PCORI_FAST_ACK_DELAY_NS, and sleepers wake for it).
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

void pcori_ack_schedule(pcori_peer_t *peer, pcori_rxstream_t *rs, bool now)
{
	ack_schedule_in(peer, rs, (uint64_t)pcori_rt.cfg.ack_delay_ns, false);
	if (now || rs->unacked >= ACK_EVERY)
		rs->ack_due_ns = 1;
}

/*
 * A fast message was taken: acknowledge every PCORI_FAST_ACK_EVERY.  A port
 * that cannot tell the sender's finalize what was taken (no `unsettled`:
 * libfabric) is also acknowledged after the ack delay, so the sender's
 * stream settles before it leaves.  Lock held.
 */
void pcori_fast_ack(const pcori_port_t *port, pcori_peer_t *peer,
		    pcori_rxstream_t *rs)
{
	if (rs->unacked >= PCORI_FAST_ACK_EVERY)
		pcori_ack_schedule(peer, rs, true);
	else if (!port->ops->unsettled)
		ack_schedule_in(peer, rs, PCORI_FAST_ACK_DELAY_NS, true);
}

/* pcori_piggyback, once it saw acks due.  Stream lock held. */
bool pcori_piggyback_take(pcori_peer_t *peer, uint64_t *cookie_p)
{
	if (!pcori_trylock(&peer->rx_lock))
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
		*cookie_p = (uint64_t)(uint32_t)rs->thid << 32 | upto;
		got = true;
	}
	pcori_unlock(&peer->rx_lock);
	return got;
}

/*
 * A fragment that did not leave gives back the ack it was to carry, or
 * that stream would never be acknowledged (acks are cumulative: should
 * it go twice, the second is harmless).  Stream lock held.
 */
void pcori_piggyback_undo(pcori_peer_t *peer, uint32_t flags, uint64_t cookie)
{
	if (!(flags & PCORI_WF_HAS_ACK))
		return;
	uint32_t thid = (uint32_t)(cookie >> 32);
	pcori_lock(&peer->rx_lock);
	pcori_rxstream_t *rs =
	    thid < (uint32_t)pcori_rt.max_threads ? peer->rx[thid] : NULL;
	if (rs)
		pcori_ack_schedule(peer, rs, true);
	pcori_unlock(&peer->rx_lock);
}

/* Threads between taking acks off a list and handing them to a port. */
static _Atomic int acks_sending;

bool pcori_ctl_drained(void)
{
	return !atomic_load(&acks_sending) && !pcori_ctlq_len();
}

/* Send due acks of one peer (all of them if force).  Returns count. */

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
		pcori_send_ctl(peer, PCORI_W_ACK, out[i].thid, out[i].upto, 0,
			       0, NULL);
	if (n)
		atomic_fetch_sub(&acks_sending, 1);
	return n;
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
			pcori_ack_schedule(peer, rs, true);
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

void pcori_gap_watch(pcori_peer_t *peer, pcori_rxstream_t *rs, uint32_t want)
{
	PCORI_ASSERT_LOCKED(&peer->rx_lock);
	rs->gap_want = want;
	rs->gap_ns = pcori_now_ns();
	rs->reasks = 0;
	if (rs->gap_open != rs->gap_nacked) { /* a new gap, not asked again */
		rs->gap_open = rs->gap_nacked;
		rs->gap_since = rs->gap_ns;
	}
	if (pcori_list_empty(&rs->gap_link)) {
		pcori_list_push_back(&peer->gaps, &rs->gap_link);
		count_add(peer, &peer->ngaps, 1);
		atomic_fetch_add(&pcori_net.gaps_pending, 1);
	}
}

static void gap_unwatch(pcori_peer_t *peer, pcori_rxstream_t *rs)
{
	pcori_list_remove(&rs->gap_link);
	pcori_list_init(&rs->gap_link);
	rs->gap_open = 0;
	count_add(peer, &peer->ngaps, -1);
	atomic_fetch_sub(&pcori_net.gaps_pending, 1);
}

/*
 * Ask again for the gaps of peer's streams whose senders went quiet; drop
 * the watch of those filled (or given up: a refusal restarts the stream).
 * The map is the last ask's: while the sender is quiet, what is held does
 * not change.  Returns NACKs sent.
 */
static int gaps_reask(pcori_peer_t *peer, uint64_t now)
{
	struct {
		int32_t thid;
		uint32_t seq, map;
	} out[16];
	int n = 0;
	/*
	 * A route of fast messages (pcori_route_fast) delivers a gap's
	 * message late, or never: a fast message its sender kept no copy
	 * of, dropped here (a malformed frame) or by the path.  Late is a
	 * provider that reorders (rxm's own rendezvous for a large frame)
	 * under a load that stalls connections for seconds, so the bound is
	 * four stall bounds.  Past it the stream cannot go on, and the peer
	 * is failed rather than left to hang every receive behind the gap.
	 * Elsewhere (through a gateway) the sender kept a copy and resends
	 * it, however late: a gateway's death costs a peer timeout, a new
	 * route and backed-off resends.
	 */
	pcori_route_t *rt = pcori_peer_route(peer);
	bool fast_route = pcori_route_fast(rt);
	uint64_t bound = LOSSLESS_GAP_STALLS * pcori_stall_bound_ns();
	int dead_thid = -1;
	uint32_t dead_seq = 0;
	uint64_t dead_open = 0;
	pcori_lock(&peer->rx_lock);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe (pos, tmp, &peer->gaps) {
		pcori_rxstream_t *rs =
		    PCORI_CONTAINER_OF(pos, pcori_rxstream_t, gap_link);
		uint32_t missing = rs->active ? rs->expected - 1 : rs->expected;
		if (!rs->nheld || rs->refused || rs->gap_nacked != missing + 1) {
			gap_unwatch(peer, rs);
			continue;
		}
		/* Whether or not its sender is quiet: it may send on. */
		uint64_t open = pcori_elapsed_ns(now, rs->gap_since);
		if (fast_route && open >= bound) {
			dead_thid = rs->thid;
			dead_seq = missing;
			dead_open = open;
			gap_unwatch(peer, rs); /* failed once, not at every pass */
			break;
		}
		uint64_t quiet = (uint64_t)PCORI_REASK_NS
				 << PCORI_MIN(rs->reasks, PCORI_REASK_SHIFT);
		if (pcori_elapsed_ns(now, rs->gap_ns) < quiet)
			continue;
		if (n == (int)PCORI_ARRAY_LEN(out))
			break;
		out[n].thid = rs->thid;
		out[n].seq = missing;
		out[n].map = rs->gap_want;
		n++;
		rs->gap_ns = now;
		rs->reasks++;
	}
	pcori_unlock(&peer->rx_lock);
	if (dead_thid >= 0) {
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "peer %d: message %u of its thread %d never came "
			   "over a lossless path (asked for since %llu ms)",
			   peer->pid, dead_seq, dead_thid,
			   (unsigned long long)(dead_open / 1000000u));
		pcori_port_peer_fault(rt->port, peer->pid);
	}
	if (n && rt)
		atomic_fetch_add_explicit(&rt->port->st.nack_sent, (uint64_t)n,
					  memory_order_relaxed);
	for (int i = 0; i < n; i++)
		pcori_send_ctl(peer, PCORI_W_NACK, out[i].thid, out[i].seq,
			       out[i].map, PCORI_NACK_SELECTIVE, NULL);
	return n;
}

int pcori_acks_flush(bool force)
{
	bool acks = atomic_load_explicit(&pcori_net.acks_pending,
					 memory_order_relaxed);
	bool gaps = atomic_load_explicit(&pcori_net.gaps_pending,
					 memory_order_relaxed);
	if (!acks && !gaps)
		return 0;
	uint64_t now = pcori_now_ns();
	int n = 0, np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **peers = atomic_load(&pcori_net.peers);
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = pcori_peer_slot(peers, i);
		if (!p)
			continue;
		if (acks && atomic_load_explicit(&p->nacks, memory_order_relaxed))
			n += acks_flush_peer(p, now, force);
		if (gaps && atomic_load_explicit(&p->ngaps, memory_order_relaxed))
			n += gaps_reask(p, now);
	}
	return n;
}

/* --------------------------------------- the send streams' timeouts */

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
void pcori_rtt_sample(pcori_txstream_t *ts, uint64_t r)
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

/*
 * How long a stream may resend while its peer sends back no ack or nack
 * at all, for any stream: then the data path to that peer is taken for
 * broken, whatever the directory says (it may see the peer alive over
 * another network).
 */
uint64_t pcori_stall_bound_ns(void)
{
	uint64_t a = (uint64_t)pcori_rt.cfg.peer_timeout_ms * 2000000u;
	uint64_t b = (uint64_t)pcori_rt.cfg.rto_ms * 4000000u;
	return PCORI_MAX(a, b);
}

/* Arm the retransmission timeout for the oldest unacknowledged. */
void pcori_rto_arm(pcori_txstream_t *ts)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	uint64_t rto = rto_base(ts) << PCORI_MIN(ts->rto_shift, 4u);
	pcori_timer_rto(ts, pcori_now_ns() + rto);
}
