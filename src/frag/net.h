/*
 * net.h -- the inter-process state of this process (pcori_net), filled
 * in by pcori_net_init (dispatcher.c) and used by the protocol.  Apart
 * from msg.h so that port kinds, which read a few of its fields
 * (fragment size, the job's key check, whether the job runs on one
 * host), need not see the peers, streams and message layer.
 */
#ifndef PCOR_FRAG_NET_H
#define PCOR_FRAG_NET_H

#include "../port/port.h"
#include "wire.h"

typedef struct pcori_peer pcori_peer_t; /* msg.h */

/* A send stream waiting for its timer, and when (frag/timers.c). */
typedef struct pcori_timer_ent {
	uint64_t key;
	struct pcori_txstream *ts;
} pcori_timer_ent_t;

/* Inter-process state of this process. */
typedef struct pcori_net {
	bool up;
	int nports;
	pcori_port_t *ports[PCORI_MAX_PORTS];
	pcori_wire_limits_t lim;
	size_t frag_size;
	size_t eager_max;
	size_t fast_max;         /* largest message on the fast path */
	bool force_stream;       /* rendezvous by streaming even with RMA */
	bool one_host;           /* the job runs on this host: local ports */
	pcori_dispatch_mode_t mode;
	int64_t spin_ns;         /* dispatcher spin window (adaptive) */
	/* Peers by pid; grows with the membership. */
	pcori_lock_t peers_lock; /* guards peers growth */
	_Atomic(pcori_peer_t **) peers;
	_Atomic int npeers;
	/*
	 * Streams waiting for a resume or retransmission time: a heap,
	 * earliest first (frag/timers.c).  timer_first is its root's key
	 * (UINT64_MAX: empty), read without the lock.
	 */
	pcori_lock_t timer_lock; /* guards timers and the counts */
	pcori_timer_ent_t *timers;
	int ntimers;   /* listed */
	int nstreams;  /* slots reserved: one per send stream */
	int timers_cap;
	_Atomic uint64_t timer_first;
	/* Parked dispatchers wait on it (see pcori_port_t.drivers). */
	_Atomic uint32_t drive_word;
	/*
	 * Waiters asleep on their request word: a dispatcher must serve
	 * them.  parked: dispatchers stepping aside on drive_word.
	 */
	_Atomic int word_sleepers;
	_Atomic int parked;
	_Atomic int acks_pending; /* rx streams with an ack to send */
	_Atomic int acks_lazy;    /* of them, acks only a finalize waits for */
	_Atomic int gaps_pending; /* rx streams waiting for a gap they asked */
	/* Rendezvous whose reads wait for room in a send queue. */
	pcori_list_t readq;       /* guarded by timer_lock */
	pcori_list_t rndvs;       /* every live rendezvous; timer_lock */
	_Atomic int nwatched;     /* rendezvous watched; see pcori_rndv_t */
	_Atomic uint64_t watch_next_ns; /* earliest watch_ns, or earlier */
	_Atomic int nreadq;
	_Atomic int nctlq;    /* control frames queued for room (ctl.c) */
	_Atomic int nleaving; /* peers with leave_ns set */
	/*
	 * The send budget (PCOR_SEND_BYTES, frag/tx.c): bytes held for
	 * messages to other processes, charged by the send call and given
	 * back when the message's record is freed.  On a line of its own:
	 * full-path senders and ack handlers write it, while every sender
	 * reads the fields above.
	 */
	struct {
		alignas(PCORI_CACHELINE) _Atomic int64_t held;
		int64_t max;
		_Atomic int waiters;   /* senders waiting for room */
		/* A message past the budget is held (one at a time). */
		_Atomic bool oversize;
		pcori_wake_word_t room; /* bumped on a release while waiters */
		_Atomic uint64_t refused; /* sends that returned AGAIN */
	} txb;
} pcori_net_t;

extern pcori_net_t pcori_net;

#endif /* PCOR_FRAG_NET_H */
