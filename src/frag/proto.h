/*
 * proto.h -- private to the protocol files of src/frag: the
 * inter-process message protocol over the MCBs, match queues and
 * fragment bitmaps of frag.h.  What the rest of pcor calls of it
 * (pcori_remote_send, timers, acks, peer failure) is declared in
 * msg.h, the port upcalls in port/port.h; nothing here is seen outside
 * src/frag.  Three parts call up into the dispatchers (dispatch.h): to
 * wake them for timed work (ctl.c, timers.c) and to wait for send budget
 * while making progress (tx.c).
 *
 * Parts, one file each; each calls only parts listed before it:
 *   ctl.c   control frames (ACK, NACK, CTS, FIN, FINACK, CTRL) and
 *           frames forwarded for other processes: posted at once, else
 *           queued
 *   ack.c   acknowledgements owed (ack points, when due, piggyback,
 *           flushing, the ack points of a BYE) and the send streams'
 *           retransmission timeout and timer arming
 *   rndv.c  rendezvous received (remote reads or streamed windows, FIN
 *           until FINACK, the watch) and the deferred completions
 *   tx.c    the send side: budget, records, fragments, posting, the fast
 *           path, a rendezvous's sending half, send completions
 *   retx.c  the sender's reliability: acks and NACKs taken, selective
 *           and go-back resends, the timers run, stall, stream failure
 *   rx.c    arrivals: header checks, order (hold, replay, gap NACKs),
 *           reassembly, hand-off to matching, forwarding
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
 *    each; FIN ends it.  When the sender is lost, the receive completes
 *    only once no read into the application's buffer is left with the
 *    port.
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
 *
 * Locks, in the order of msg.h (send stream -> peer rx_lock ->
 * match queue): a send stream's lock guards it and its messages (tx.c,
 * retx.c); a peer's rx_lock its receive streams, held frames, acks to
 * send and rendezvous table (rx.c, ack.c, rndv.c).  pcori_net.timer_lock
 * (timer heap, live rendezvous, read queue) and ctlq.lock (ctl.c) are
 * taken inside those, and no protocol lock inside them.  Ports are
 * called with any of these held but timer_lock; their upcalls come with
 * the port's progress lock held.
 */
#ifndef PCOR_FRAG_PROTO_H
#define PCOR_FRAG_PROTO_H

#include "msg.h"

#define PCORI_BACKOFF_MIN_US 100u
#define PCORI_BACKOFF_MAX_US 50000u
/* A NACK's frag_idx: 0 refused (go back), this: selective (cookie map). */
#define PCORI_NACK_SELECTIVE 1u
/*
 * Fast path (lossless ports): messages a stream may have sent without an
 * acknowledgement, and how often the receiver acknowledges them.  The
 * window bounds what a receiver must take in without being able to
 * refuse it; acks come in batches, usually riding on replies.
 */
#define PCORI_FAST_WINDOW    256u
#define PCORI_FAST_ACK_EVERY 64u
/*
 * Fast messages on ports without `unsettled` are also acknowledged this
 * long after the first unacknowledged one (for the sender's finalize):
 * long enough for a reply to carry it in any ping-pong.
 */
#define PCORI_FAST_ACK_DELAY_NS 2000000u
/*
 * A receiver whose asked-for gap stays open while its sender is quiet
 * (no frame held) this long asks again, then after twice as long, up to
 * PCORI_REASK_SHIFT doublings: the NACK or the resend was lost as well,
 * and with nothing more coming behind the gap only the sender's
 * retransmission timeout would notice -- one whose estimate a burst's
 * queueing has pushed to its ceiling.
 */
#define PCORI_REASK_NS 2000000u
#define PCORI_REASK_SHIFT 5u

static inline bool pcori_seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* Fill a header with this job's constants. */
static inline void pcori_hdr_init(pcori_wire_hdr_t *h, uint8_t type,
				  int dst_pid)
{
	memset(h, 0, sizeof(*h));
	h->version = PCORI_WIRE_VERSION;
	h->type = type;
	h->hops = PCORI_WIRE_MAX_HOPS;
	h->key_check = pcori_net.lim.key_check;
	h->src_pid = pcori_rt.pid;
	h->dst_pid = dst_pid;
}

/* Completions gathered under locks and carried out after them. */
typedef struct pcori_deferred {
	int n;
	struct {
		enum { PCORI_D_COMPLETE, PCORI_D_DELIVER, PCORI_D_RNDV } what;
		pcori_req_t *req;
		int status;
		/* PCORI_D_DELIVER: the MCB; PCORI_D_RNDV: the rendezvous */
		void *obj;
	} a[8];
} pcori_deferred_t;

static inline void pcori_defer(pcori_deferred_t *d, int what, pcori_req_t *r,
			       int st, void *obj)
{
	PCORI_ASSERT(d->n < (int)PCORI_ARRAY_LEN(d->a));
	d->a[d->n].what = what;
	d->a[d->n].req = r;
	d->a[d->n].status = st;
	d->a[d->n].obj = obj;
	d->n++;
}

/* ------------------------------------------------------------- ctl.c */

/*
 * Send a control frame of type to peer's thread thid (a NACK's, CTS's or
 * FIN's fields; ref: the message geometry a CTS repeats).  Queued when
 * the port is full; failures other than a lost peer are logged.
 */
void pcori_send_ctl(pcori_peer_t *peer, uint8_t type, int32_t thid,
		    uint32_t seq, uint64_t cookie, uint32_t frag_idx,
		    const pcori_wire_hdr_t *ref);
/* Retry queued control messages.  Returns how many went out. */
int pcori_ctlq_run(void);
/* Control frames queued (the timers' and the drain's test). */
int pcori_ctlq_len(void);
/* A frame for another process: send it on (or drop and count it). */
void pcori_forward(pcori_port_t *port, const uint8_t *msg, size_t len,
		   const pcori_wire_hdr_t *h);

/* ------------------------------------------------------------- ack.c */

/* An ack of rs is due (now: at once).  Peer rx_lock held. */
void pcori_ack_schedule(pcori_peer_t *peer, pcori_rxstream_t *rs, bool now);
/* A fast message was taken into rs.  Peer rx_lock held. */
void pcori_fast_ack(const pcori_port_t *port, pcori_peer_t *peer,
		    pcori_rxstream_t *rs);
/*
 * rs just asked for the gap at its expected seq (map want): watch it, and
 * ask again while the gap stays open and its sender quiet.  Peer rx_lock
 * held.
 */
void pcori_gap_watch(pcori_peer_t *peer, pcori_rxstream_t *rs, uint32_t want);
/*
 * How long a path may take nothing before it is given up: a send stream
 * nothing acknowledges (retx.c), a gap on a lossless hop (ack.c).  In
 * ack.c, beside the timeout it bounds.
 */
uint64_t pcori_stall_bound_ns(void);
bool pcori_piggyback_take(pcori_peer_t *peer, uint64_t *cookie_p);
/*
 * Take one due ack of peer's to ride on a message: true with its cookie
 * (the message then carries PCORI_WF_HAS_ACK).  Stream lock held.  Most
 * sends find none due: that look is inline, on every send's path.
 */
static inline bool pcori_piggyback(pcori_peer_t *peer, uint64_t *cookie_p)
{
	return atomic_load_explicit(&peer->nacks, memory_order_relaxed) &&
	       pcori_piggyback_take(peer, cookie_p);
}
/* A message (flags, cookie) did not leave: its ack is due again. */
void pcori_piggyback_undo(pcori_peer_t *peer, uint32_t flags, uint64_t cookie);
/* A round-trip sample of ts (r ns).  Stream lock held. */
void pcori_rtt_sample(pcori_txstream_t *ts, uint64_t r);
/* Arm ts's retransmission timeout from now.  Stream lock held. */
void pcori_rto_arm(pcori_txstream_t *ts);

/* ---------------------------------------------------------- timers.c */

/* A heap slot for a new send stream; false: no memory. */
bool pcori_timers_reserve(void);
/* Give back a slot reserved for a stream that was not kept. */
void pcori_timers_unreserve(void);
/* Have ts's timer run at its resume or retransmission time, whichever
 * comes first (at once if neither is set).  Stream lock held. */
void pcori_timer_list(pcori_txstream_t *ts);
/* Run ts's timer at when (0: at once).  Stream lock held. */
void pcori_timer_arm(pcori_txstream_t *ts, uint64_t when);
/* The port had no room for ts's next message: try again later, the
 * later the more often in a row.  Stream lock held. */
void pcori_timer_refused(pcori_txstream_t *ts);
/* The port took ts's message: refusals in a row end.  Stream lock held. */
void pcori_timer_accepted(pcori_txstream_t *ts);
/* Set ts's retransmission time to at and have its timer run by then.
 * Stream lock held. */
void pcori_timer_rto(pcori_txstream_t *ts, uint64_t at);
/* Move the streams whose keys are at or before now onto due (through
 * timer_link); returns how many. */
int pcori_timers_due(uint64_t now, pcori_list_t *due);
/* Is no stream listed?  One load: lets a drive skip the clock read. */
bool pcori_timers_none(void);
/* ns from now to the earliest key, 0 if past, -1 if none. */
int64_t pcori_timers_first_in(uint64_t now);
/* ts, taken off due by its runner, is no longer listed; returns its
 * deadline now (0: nothing to wait for).  Stream lock held. */
uint64_t pcori_timer_taken(pcori_txstream_t *ts);

/* ------------------------------------------------------------ rndv.c */

/* Carry out and empty d.  No lock held. */
void pcori_run_deferred(pcori_deferred_t *d);
/* Report a receive's message and defer its completion. */
void pcori_recv_finish(pcori_req_t *r, const pcori_mkey_t *k, size_t size,
		       void *dma_block, int status, pcori_deferred_t *d);
/* What pcori_recv_finish does but the completion: returns its status. */
int pcori_recv_settle(pcori_req_t *r, const pcori_mkey_t *k, size_t size,
		      void *dma_block, int status);
/* A rendezvous into receive r of the message RTS'd with rts/cookie. */
pcori_rndv_t *pcori_rndv_new(pcori_req_t *r, pcori_peer_t *peer,
			     const pcori_mkey_t *k, size_t size,
			     const pcori_wire_rts_t *rts, uint64_t cookie,
			     uint32_t nfrags);
/* Complete v's receive once (tell: send FIN).  No lock held. */
void pcori_rndv_complete(pcori_rndv_t *v, int status, bool tell);
/*
 * v's peer failed with status (v taken out of its table): its receive
 * completes once no read into the application's buffer is left.  No
 * lock held.
 */
void pcori_rndv_fail(pcori_rndv_t *v, int status);
/* Drop a reference to v; the last frees it. */
void pcori_rndv_unref(pcori_rndv_t *v);
/* A fragment of a streamed rendezvous arrived. */
void pcori_rx_stream(pcori_port_t *port, pcori_peer_t *peer,
		     const pcori_wire_hdr_t *h, const uint8_t *payload);
/* The sender has our FIN (FINACK). */
void pcori_on_finack(pcori_peer_t *peer, uint64_t cookie);
/* Timers: reads that found a full queue, and stalled rendezvous. */
int pcori_readq_run(void);
int pcori_watch_run(void);

/* -------------------------------------------------------------- tx.c */

/* Free a message record and give back its budget.  No lock held. */
void pcori_txm_free(pcori_txmsg_t *m);
/* Is m done with?  Stream lock held. */
bool pcori_txm_done(pcori_txmsg_t *m);
/* Complete m's send if nothing it waits for is left.  Stream lock held. */
void pcori_txm_settle(pcori_txmsg_t *m, pcori_deferred_t *d);
/* Post m from where it stopped.  Stream lock held. */
int pcori_txm_post(pcori_txmsg_t *m);
/* Post ts's waiting messages in order.  Stream lock held. */
int pcori_flush_waiting(pcori_txstream_t *ts);
/* Post the pending fragments of a streamed rendezvous.  Lock held. */
void pcori_stream_post(pcori_txmsg_t *m);
/* The receiver's FIN, and its request for window w (CTS). */
void pcori_on_fin_frame(pcori_peer_t *peer, int32_t thid, uint64_t cookie);
void pcori_on_cts(pcori_peer_t *peer, int32_t thid, uint64_t cookie,
		  uint32_t w);

/* ------------------------------------------------------------ retx.c */

/* An ack for thid's stream up to upto, and a NACK. */
void pcori_on_ack(pcori_peer_t *peer, int32_t thid, uint32_t upto);
void pcori_on_nack(pcori_port_t *port, pcori_peer_t *peer, int32_t thid,
		   uint32_t seq, uint32_t frag_idx, uint64_t map);

#endif /* PCOR_FRAG_PROTO_H */
