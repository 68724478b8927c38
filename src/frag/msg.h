/*
 * msg.h -- the message layer and the inter-process protocol's shared
 * state: match queues of this process, the MCB pool, delivery into
 * posted receives, the same-process path (local.c), peers and their
 * streams (peer.c), remote thread creation (spawn.c) and the protocol's
 * entry points (its parts are the other files of src/frag, behind
 * proto.h).  The inter-process state itself is net.h; the dispatchers
 * that drive it are src/dispatch, which this layer never calls: block
 * mode's send threads sleep on the timers' kick word (timers.c), and a
 * wait that makes progress goes through the driving hooks (pcori_drive).
 *
 * Lock order (outer first; the whole library's is in
 * docs/architecture.md, "Locks"): a port's progress lock -> peer lock ->
 * txstream -> peer rx lock -> match queue -> control queue -> the
 * leaves (timers, peer table growth, spawn) -> port internals -> naming
 * -> MCB/DMA/handle-table internals.  The progress lock is only ever
 * tried, and held across protocol upcalls, so protocol code called from
 * progress may take any of the locks after it.
 * The route table's lock (route/table.c) is a leaf: a rebuild asks the
 * directory with no lock held, since the directory's thread takes the
 * locks above when a peer is lost.
 */
#ifndef PCOR_FRAG_MSG_H
#define PCOR_FRAG_MSG_H

#include "frag.h"
#include "../naming/naming.h"
#include "../port/port.h"
#include "../route/route.h"
#include "net.h"
#include "wire.h"

/* Process-wide message state; set up in pcori_msg_init. */
typedef struct pcori_msg {
	pcori_mq_t *mqs;         /* one per thread id */
	int nmq;
	pcori_mcb_pool_t pool;
	_Atomic int64_t unexp_bytes; /* DMA data held by unexpected MCBs */
	int64_t unexp_max;
	int64_t backpressure_ns;
	/*
	 * MCBs taken outside the pool for fast messages that could not be
	 * refused (pcori_mcb_get_overflow), and the DMA bytes they hold.
	 */
	_Atomic int64_t overflow;
	_Atomic int64_t overflow_bytes;
} pcori_msg_t;

extern pcori_msg_t pcori_msg;

int pcori_msg_init(const pcori_config_t *cfg, int max_threads);
/* Drop what is still queued (logged) and free everything. */
void pcori_msg_fini(void);
/* Thread registry hook: thid stopped being used; cancel its receives. */
void pcori_msg_thread_gone(int thid);

/*
 * Complete posted receive r with a message of key k: len bytes at data.
 * own_dma, when not NULL, is a DMA block holding the data (data ==
 * own_dma) that pcor owns: a recvDMA takes it as is, otherwise it is freed.
 */
void pcori_deliver(pcori_req_t *r, const pcori_mkey_t *k, const void *data,
		   size_t len, void *own_dma);

/*
 * Take an MCB (and PCOR_UNEXP_BYTES budget for `bytes`).  When the pool
 * or budget is exhausted and may_wait, waits for frees until *deadline
 * (0: set it to now + PCOR_BACKPRESSURE_MS).  NULL when none came.
 */
pcori_mcb_t *pcori_mcb_get(size_t bytes, bool may_wait, uint64_t *deadline);
/*
 * An MCB from outside the pool, for a message of `bytes` DMA data that the
 * channel cannot offer again (a fast message on a lossless hop): taking it
 * keeps the channel moving for everybody else.  The caller bounds how many
 * exist (the receiver holds back the acks that would let more come); the
 * budget is not charged.  NULL when memory runs out.
 */
pcori_mcb_t *pcori_mcb_get_overflow(size_t bytes);
/* Give back an MCB and its budget (not its data). */
void pcori_mcb_release(pcori_mcb_t *m);
/* Deliver a complete MCB into receive r, then release it. */
void pcori_mcb_deliver(pcori_req_t *r, pcori_mcb_t *m);
/* Receive r took MCB m out of its queue: deliver, or finish on arrival. */
void pcori_mcb_claim(pcori_req_t *r, pcori_mcb_t *m);

/*
 * Start a send (kind PCORI_REQ_SEND_COPY or _DMA) to a thread of this
 * process.  Arguments are validated by the caller.
 */
int pcori_local_send(pcori_req_kind_t kind, int dst_thid, int tag,
		     uint32_t ctx, const void *buf, size_t len,
		     unsigned flags, pcor_handle_t *h_p);

/*
 * Post a receive for the calling thread (kind PCORI_REQ_RECV_COPY or
 * _DMA).  Arguments are validated by the caller.
 */
int pcori_recv_post(pcori_req_kind_t kind, int pid, int thid, int tag,
		    uint32_t ctx, void *buf, size_t cap,
		    const pcori_report_t *rep, pcor_handle_t *h_p);

/* ------------------------------------------------------- peers, streams */

typedef struct pcori_peer pcori_peer_t;
typedef struct pcori_txstream pcori_txstream_t;

/* One message on its way out (eager or rendezvous). */
typedef struct pcori_txmsg {
	pcori_ctx_t ctx;       /* PCORI_CTX_TX */
	pcori_list_t link;     /* in its stream's sent or waiting list */
	pcori_req_t *req;      /* completed when the message is done */
	pcori_txstream_t *ts;
	uint32_t seq;
	uint16_t flags;        /* PCORI_TXM_* */
	uint16_t window;       /* eager: fragments posted this attempt */
	_Atomic uint32_t inflight; /* provider completions outstanding */
	int32_t dst_thid, tag;
	uint32_t mctx;         /* matching context */
	uint32_t nfrags;
	size_t size;
	void *data;            /* payload */
	void *reg;             /* rendezvous exposure handle */
	pcori_port_t *busy_port; /* rendezvous: the port it keeps busy */
	uint8_t *hdrs;         /* nfrags (eager) or the RTS (rendezvous) */
	uint8_t *banks;        /* streamed rendezvous: 2 windows of headers */
	uint32_t sfrag, send;  /* streamed rendezvous: fragments to post */
	uint32_t cts_w;        /* streamed rendezvous: last window asked */
	pcori_list_t slink;    /* in the stream's list of such messages */
	size_t held;           /* send budget it holds (pcori_tx_cost) */
	uint64_t posted_ns;    /* last posted (RTT samples, timeouts) */
} pcori_txmsg_t;

#define PCORI_TXM_RNDV 0x01u     /* rendezvous */
#define PCORI_TXM_ACKED 0x02u    /* receiver accepted it */
#define PCORI_TXM_FINNED 0x04u   /* rendezvous data taken */
#define PCORI_TXM_OWNDATA 0x08u  /* data is pcor's copy (free it) */
#define PCORI_TXM_OWNDMA 0x10u   /* data is a DMA block of pcor's */
#define PCORI_TXM_SENT 0x20u     /* posted at least once */
#define PCORI_TXM_DEAD 0x40u     /* peer lost: only completions remain */
#define PCORI_TXM_BUILT 0x80u    /* rendezvous request bytes are ready */
#define PCORI_TXM_OVERSIZE 0x100u /* its data alone exceeds the budget */
#define PCORI_TXM_RESEND 0x200u  /* asked for again; the queue was full */
#define PCORI_TXM_RETX 0x400u    /* sent more than once: no RTT sample */

/* Per (local thread -> peer process): ordering, acks, retransmission. */
struct pcori_txstream {
	/* Guards every field; see the lock order at the top. */
	pcori_lock_t lock;
	pcori_peer_t *peer;
	int32_t thid;
	uint32_t next_seq;     /* seq of the next new message */
	uint32_t acked;        /* every seq below it is acknowledged */
	/*
	 * Fast-path frames counted here, not in the port's statistics: a
	 * locked add per message on the critical path, for a figure read at
	 * finalize.  Added to fast_port's when the port changes and at
	 * finalize (pcori_txstream_count).
	 */
	uint64_t fast_tx;
	pcori_port_t *fast_port;
	pcori_list_t sent;     /* posted, not yet acked (seq order) */
	pcori_list_t waiting;  /* not (re)posted yet (seq order) */
	pcori_list_t waiting_fin; /* rendezvous acked, data not yet taken */
	pcori_list_t streaming;   /* rendezvous with fragments to post */
	pcori_list_t orphans;  /* failed, still owed fabric completions */
	/* Written under lock, read by the timer scan under timer_lock. */
	_Atomic uint64_t resume_ns; /* after a NACK: retransmit from then */
	uint32_t backoff_us;
	/*
	 * After a NACK only the refused message goes again; the rest follow
	 * once it is acknowledged (no storm of resends into a full pool).
	 */
	bool probing;
	bool resync;           /* earlier messages were failed: say so */
	bool resend;           /* some of sent are PCORI_TXM_RESEND */
	_Atomic uint64_t rto_ns; /* oldest unacknowledged goes again then */
	uint32_t rto_shift;    /* consecutive timeouts (backoff) */
	/* Smoothed round trip and its variation (RFC 6298), 0: no sample. */
	uint64_t srtt_ns, rttvar_ns;
	uint64_t stalled_ns;   /* the first of them */
	uint32_t stall_heard;  /* peer->heard then */
	/*
	 * In pcori_net.timers at timer_slot (PCORI_TIMER_UNLISTED: not),
	 * to be run by timer_key; timer_link holds it on a list of due
	 * ones while it is run.  See frag/timers.c.
	 */
	_Atomic int timer_slot;
	uint32_t refused; /* port refusals in a row (back-off; timers.c) */
	uint64_t timer_key;
	pcori_list_t timer_link;
};

#define PCORI_TIMER_UNLISTED (-1)

/*
 * Move ts's count of fast-path frames into its port's statistics and
 * count further ones for port (NULL at finalize).  ts->lock held, or the
 * stream no longer used.
 */
static inline void pcori_txstream_count(pcori_txstream_t *ts,
					pcori_port_t *port)
{
	if (ts->fast_port && ts->fast_tx)
		atomic_fetch_add_explicit(&ts->fast_port->st.tx, ts->fast_tx,
					  memory_order_relaxed);
	ts->fast_tx = 0;
	ts->fast_port = port;
}

/* Per (peer thread -> this process): what has arrived. */
typedef struct pcori_rxstream {
	int32_t thid;           /* the peer's thread */
	uint32_t expected;      /* seq of the next message to start */
	uint32_t acked;         /* cumulative ack last sent */
	uint32_t unacked;       /* accepted since */
	uint64_t ack_due_ns;    /* 0: no ack pending */
	bool ack_lazy;          /* pending for fast messages only: a sleeper
				   need not send it first */
	bool active;            /* a message is being assembled */
	pcori_req_t *req;       /* its matched receive, or */
	pcori_mcb_t *mcb;       /* its unexpected MCB */
	size_t size;
	pcori_reasm_t reasm;
	pcori_list_t ack_link;  /* in the peer's ack list */
	bool refused;           /* NACKed expected: later frames are dropped */
	pcori_list_t held;      /* frames that came ahead of their turn */
	uint32_t nheld;
	uint32_t gap_nacked;    /* seq + 1 of the gap last asked for; 0: none */
	uint32_t gap_held;      /* nheld then */
	uint32_t held_top;      /* highest first frame held (if nheld) */
	/*
	 * While a gap it asked for stays open: in the peer's gap list, when
	 * its sender last showed life (a frame held, or our last ask), the
	 * map asked for, and asks since by timer (see pcori_gap_watch).
	 */
	pcori_list_t gap_link;
	uint64_t gap_ns;
	uint32_t gap_want;
	uint32_t reasks;
	/*
	 * The gap of gap_nacked was first asked for at gap_since (gap_open
	 * is that gap_nacked; 0: none).  On a lossless hop, one open past
	 * the stall bound lost a message its sender kept no copy of.
	 */
	uint64_t gap_since;
	uint32_t gap_open;
	bool throttled;         /* took an MCB outside the pool: acks stop */
	uint32_t throttle_seq;  /* short of this seq until none is left */
} pcori_rxstream_t;

/*
 * Rendezvous being pulled or streamed into a receive.  It sits in its
 * peer's table (one reference) until done; each outstanding read holds
 * another reference.  Whoever sets `done` first completes the receive;
 * whoever sets `reads_over` first decides what follows the last read.
 * `reads` also counts short holds by threads that issue reads or record
 * a failure: whoever takes it to zero with `fail` set finishes it, so a
 * failed rendezvous completes only once no read is left with the port.
 */
typedef struct pcori_rndv {
	pcori_ctx_t ctx;        /* PCORI_CTX_READ */
	UT_hash_handle hh;      /* in peer->rndv, keyed by cookie */
	uint64_t cookie;        /* the sender's message id */
	pcori_peer_t *peer;
	pcori_port_t *port;
	pcori_req_t *req;
	pcori_mkey_t key;
	size_t size;            /* message size */
	size_t take;            /* bytes to land (min(size, capacity)) */
	void *dst;              /* where they land */
	void *own_dma;          /* recvDMA block (ours until handed over) */
	uint64_t raddr, rkey;   /* remote reads: the source */
	uint64_t src_dest;      /* remote reads: the sender's address */
	_Atomic size_t next_off; /* remote reads: next byte to ask for */
	_Atomic uint32_t reads; /* reads outstanding, plus holds */
	_Atomic uint32_t refs;
	_Atomic bool done;
	_Atomic bool reads_over;
	_Atomic int fail;       /* its peer failed: the status to end with */
	_Atomic bool idle;      /* no longer counted in port->busy */
	int status;
	bool readable;          /* pulled by reads (else streamed) */
	bool ours;              /* the data lands in own_dma (recvDMA, or a
				   recvCopy's block on a reads_may_hang port) */
	pcori_reasm_t reasm;    /* streaming windows */
	pcori_list_t qlink;     /* waiting to issue reads (queue full) */
	pcori_list_t alive;     /* in pcori_net.rndvs until freed */
	/*
	 * Watched (one more reference) until the sender acknowledges our
	 * FIN: a window request (CTS) or FIN the fabric lost is sent again
	 * when watch_ns passes.  The timer scan reads these under timer_lock.
	 */
	_Atomic bool watched;
	_Atomic bool fin_sent;
	_Atomic uint64_t watch_ns; /* next look; 0: nothing to look for */
	_Atomic uint32_t watch_shift;
} pcori_rndv_t;

typedef enum pcori_peer_state {
	PCORI_PEER_NEW = 0,
	PCORI_PEER_READY,
	PCORI_PEER_LOST,
} pcori_peer_state_t;

struct pcori_peer {
	int pid;
	_Atomic int state;       /* pcori_peer_state_t */
	pcori_lock_t lock;       /* guards route changes */
	_Atomic(pcori_route_t *) route; /* NULL: none (yet) */
	/* Addresses inserted into our ports for this peer, by port. */
	uint64_t dest_by_port[PCORI_MAX_PORTS];
	uint16_t has_dest;       /* bit per port (peer->lock) */
	_Atomic(pcori_txstream_t *) *tx; /* by local thid, made on demand */
	/* Guards rx streams, rndv table and acks; see the lock order. */
	pcori_lock_t rx_lock;
	pcori_rxstream_t **rx;   /* by peer thid, made on demand */
	pcori_rndv_t *rndv;      /* receives being pulled from this peer */
	pcori_list_t acks;       /* rx streams with an ack to send */
	_Atomic int nacks;       /* length of acks: peeked without rx_lock */
	pcori_list_t gaps;       /* rx streams waiting for a gap they asked */
	_Atomic int ngaps;       /* length of gaps: peeked without rx_lock */
	/*
	 * Acks and nacks taken from this peer, for any stream: while it
	 * moves, the peer reads what we send, however slowly (so a stream
	 * stalled behind the others is congestion, not a broken path).
	 */
	_Atomic uint32_t heard;
	/* Send streams to it whose last post the port refused (timers.c). */
	_Atomic int nrefused;
	/* Left normally: lost at this time unless its BYE came first. */
	_Atomic uint64_t leave_ns;
	_Atomic bool bye_acked; /* our BYE reached it (we are leaving) */
};

/* The route to a peer, or NULL. */
static inline pcori_route_t *pcori_peer_route(pcori_peer_t *peer)
{
	return atomic_load_explicit(&peer->route, memory_order_acquire);
}

/*
 * Whether rt may carry fast messages (sent with no copy kept): one hop
 * that cannot lose frames.  Through a gateway, what the gateway held when
 * it died is lost, so there the sender keeps copies and resends.
 */
static inline bool pcori_route_fast(const pcori_route_t *rt)
{
	return rt && rt->port->lossless && rt->hops == 1;
}

/*
 * Slot i of the peer array: filled once under peers_lock, read without
 * it, so both sides go through atomics.
 */
static inline pcori_peer_t *pcori_peer_slot(pcori_peer_t **arr, int i)
{
	return __atomic_load_n(&arr[i], __ATOMIC_ACQUIRE);
}
/* pcori_peer_get for a peer not made yet (or pid invalid). */
pcori_peer_t *pcori_peer_make(int pid);
/*
 * The peer object of pid, made on first use; NULL if pid is invalid.
 * Inline: every message looks its peer up, and a made one is two loads.
 */
static inline pcori_peer_t *pcori_peer_get(int pid)
{
	int n = atomic_load_explicit(&pcori_net.npeers, memory_order_acquire);
	if (PCORI_LIKELY(pid >= 0 && pid < n && pid != pcori_rt.pid)) {
		pcori_peer_t *p = pcori_peer_slot(
		    atomic_load_explicit(&pcori_net.peers, memory_order_acquire),
		    pid);
		if (PCORI_LIKELY(p))
			return p;
	}
	return pcori_peer_make(pid);
}
/*
 * The next peer in state READY at index *i or after (NULL: no more);
 * walks them all with  for (int i = 0; (p = pcori_peer_next_ready(&i));).
 */
pcori_peer_t *pcori_peer_next_ready(int *i);
/* pcori_peer_ready for a peer not READY yet: finds it a route. */
int pcori_peer_connect(pcori_peer_t *peer);
/* Make sure peer has a route; PCOR_OK, ERR_PEER_LOST, ERR_UNREACHABLE. */
static inline int pcori_peer_ready(pcori_peer_t *peer)
{
	if (PCORI_LIKELY(atomic_load_explicit(&peer->state,
					      memory_order_acquire) ==
			 PCORI_PEER_READY))
		return PCOR_OK;
	return pcori_peer_connect(peer);
}
/* Membership hook: fail everything that involves a lost peer. */
void pcori_peer_lost(int pid);
/*
 * The route table was rebuilt (pcori_routes_rebuild): move every peer in
 * use onto its new route, or fail what involves one left without a path
 * (no lock held).
 */
void pcori_peers_reroute(void);
/*
 * A peer left through pcor_finalize.  Its last acks may still be on the
 * fabric, overtaken by the directory's news: it is lost once its BYE
 * arrives (sent after them), or after a grace period.
 */
void pcori_peer_leaving(int pid);
/* Lose peers whose grace period is over.  Returns how many. */
int pcori_peers_reap(void);
/* Tell every peer we talked to that we leave (after our last acks). */
/* BYE (with our final acks) to every ready peer that has not
 * acknowledged one yet.  Returns how many were sent. */
int pcori_peers_bye(void);
/* No control message or ack is queued or on its way to a port. */
bool pcori_ctl_drained(void);

/*
 * Bytes of the send budget a message of len bytes holds on the full path
 * (its record, headers and request, plus the data when pcor copies it:
 * copy true).  The fast path holds none.
 */
size_t pcori_tx_cost(int pid, bool copy, size_t len);
/* Send to another process (arguments validated by the caller). */
int pcori_remote_send(pcori_req_kind_t kind, int pid, int thid, int tag,
		      uint32_t ctx, const void *buf, size_t len,
		      unsigned flags, pcor_handle_t *h_p);

/* A claimed rendezvous MCB: start pulling its data into receive r. */
void pcori_rndv_start(pcori_req_t *r, pcori_mcb_t *m);
/*
 * Free every rendezvous left (held by reads that never came back, or
 * still in flight), with its block.  Finalize, once the ports are
 * closed: no read can write into them any more.
 */
void pcori_rndv_reap(void);

/* Protocol housekeeping run by whoever makes progress. */
int pcori_timers_run(void);
/* Free the heap of send streams' timers (finalize; frag/timers.c). */
void pcori_timers_fini(void);
/* Drop control frames still queued (finalize; frag/ctl.c). */
void pcori_ctlq_fini(void);
/* Nanoseconds until timed work is due; -1 if none. */
int64_t pcori_timers_next(void);
/*
 * The kick word (frag/timers.c), where block mode's send threads sleep
 * between timers.  pcori_timers_kick wakes them after new timed work or
 * control traffic (block mode only; the other modes look on their own);
 * pcori_timers_kick_all wakes them in any mode (to stop).  A send thread
 * of port idx reads the word (kick_seen), runs what is due, then sleeps
 * (pcori_timers_sleep) until kicked since that read or its next timer is
 * due, at most max_ns when none is listed.
 */
void pcori_timers_kick(void);
void pcori_timers_kick_all(void);
uint32_t pcori_timers_kick_seen(void);
void pcori_timers_sleep(int idx, uint32_t seen, int64_t max_ns);
/* Send acknowledgements now (force) or those that are due. */
int pcori_acks_flush(bool force);
/*
 * Fail every message of a stream (resync: the peer lives on, so the next
 * message tells it to start afresh) / what is being received from a peer.
 */
void pcori_txstream_fail(pcori_txstream_t *ts, int status, bool resync);
/*
 * Finalize's teardown of a stream: free it and the records it still holds,
 * memory only (the ports are closed and the send budget goes with us).
 */
void pcori_txstream_discard(pcori_txstream_t *ts);
void pcori_rx_fail(pcori_peer_t *peer, int status);
/*
 * Before leaving: acknowledge again everything received, in case the
 * fabric lost the last acks (a sender would fail those messages at BYE).
 */
void pcori_acks_repeat(void);
/*
 * peer's route changed: what its streams sent on the old path and is not
 * acknowledged goes again on the new one (a dead gateway or link may
 * have taken a whole window, which one resend per timeout would drain
 * slowly).  Takes the stream locks.
 */
void pcori_txstreams_rerouted(pcori_peer_t *peer);
/*
 * Every stream's ack point from peer, as (thid, upto) pairs of 32-bit
 * fields: a BYE's body.  Returns the bytes written (at most cap).
 */
size_t pcori_acks_final(pcori_peer_t *peer, uint8_t *buf, size_t cap);
/* A BYE's body: the acks it carries, taken as if they came alone. */
void pcori_acks_final_in(pcori_peer_t *peer, const uint8_t *b, size_t len);
/* Rendezvous received whose FIN is not yet acknowledged. */
int pcori_rndv_unsettled(void);
/* Control messages (remote thread creation, leaving). */
#define PCORI_CTRL_SPAWN 1u
#define PCORI_CTRL_SPAWNED 2u
#define PCORI_CTRL_BYE 3u     /* body: (thid, ack point) per stream */
#define PCORI_CTRL_BYE_ACK 4u
void pcori_ctrl_recv(pcori_peer_t *peer, const pcori_wire_hdr_t *h,
		     const uint8_t *payload);
int pcori_ctrl_send(pcori_peer_t *peer, uint32_t op, const void *body,
		    size_t len);
void pcori_spawn_peer_lost(int pid);

/* Free the peer table (finalize, after dispatchers stopped). */
void pcori_peers_fini(void);
/*
 * Frames port sent so far: its statistics and the fast-path frames its
 * streams still count (pcori_txstream_count).
 */
uint64_t pcori_port_tx_frames(pcori_port_t *port);

#endif /* PCOR_FRAG_MSG_H */
