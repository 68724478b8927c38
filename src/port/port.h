/*
 * port.h -- the port interface: what a port kind implements (the
 * operations table pcori_port_ops_t, the port object and its counters,
 * an open function) and what it may call (the protocol's upcalls,
 * pcori_port_recv and the others below).  The dispatchers multiplex
 * ports (src/dispatch); the protocol (src/frag) drives them only through
 * the operations table, so port kinds are interchangeable.
 *
 * Kinds, one file each, found by name in port.c's table:
 *   ofi.c      libfabric: one RDM endpoint of one provider and domain
 *   shm.c      pcor-shm: the processes of this host through shared
 *              memory; shm_rx.c is its receiving side (both behind
 *              shm_port.h), shm_ring.c its rings and cell pool (shm.h)
 *
 * Threads: every operation is thread-safe unless noted.  A port's
 * progress lock is taken by whoever polls the port (its dispatcher or a
 * waiter driving progress) and is held across the upcalls, so the
 * protocol code they reach may take any protocol lock (order in
 * frag/msg.h).
 *
 * A port kind reads none of the protocol's state: what it needs of it
 * (fragment size, the job's key, one host or not) comes at open, in
 * pcori_port_params_t.
 */
#ifndef PCOR_PORT_H
#define PCOR_PORT_H

#include "../frag/wire.h"
#include "../naming/naming.h"

#include <sys/uio.h>

typedef struct pcori_port pcori_port_t;

/*
 * Completion contexts handed to a port start with this tag, so one
 * completion queue serves sends, receives and reads.
 */
typedef enum pcori_ctx_kind {
	PCORI_CTX_TX = 1, /* a pcori_txmsg_t */
	PCORI_CTX_TXCTL,  /* a queued control message */
	PCORI_CTX_READ,   /* a pcori_rndv_t */
	PCORI_CTX_RX,     /* a port's receive buffer */
} pcori_ctx_kind_t;

typedef struct pcori_ctx {
	uint32_t kind;
} pcori_ctx_t;

/*
 * A fast-path message's header fields that vary; the rest follow from
 * the hop (source and destination processes, job key, one fragment).
 */
typedef struct pcori_fast_hdr {
	int32_t src_thid, dst_thid, tag;
	uint32_t ctx, seq;
	uint32_t flags;  /* PCORI_WF_FAST, and PCORI_WF_HAS_ACK for cookie */
	uint64_t cookie; /* the ack it carries: stream thid << 32 | seq */
} pcori_fast_hdr_t;

/*
 * The frame header a fast-path message of len bytes from src_pid to
 * dst_pid stands for (key_check: the job's, see pcori_wire_limits_t).
 */
static inline pcori_wire_hdr_t pcori_fast_wire(const pcori_fast_hdr_t *f,
					       int src_pid, int dst_pid,
					       size_t len, uint32_t key_check)
{
	return (pcori_wire_hdr_t){
	    .version = PCORI_WIRE_VERSION,
	    .type = PCORI_W_DATA,
	    .flags = (uint8_t)f->flags,
	    .hops = PCORI_WIRE_MAX_HOPS,
	    .key_check = key_check,
	    .src_pid = src_pid,
	    .src_thid = f->src_thid,
	    .dst_pid = dst_pid,
	    .dst_thid = f->dst_thid,
	    .tag = f->tag,
	    .ctx = f->ctx,
	    .seq = f->seq,
	    .frag_count = 1,
	    .frag_len = (uint32_t)len,
	    .total_size = len,
	    .cookie = f->cookie,
	};
}

/*
 * What a port kind provides.  All calls are thread-safe unless noted.
 * Sends may fail with PCOR_ERR_AGAIN (queue full): the caller keeps the
 * message and retries later.
 */
typedef struct pcori_port_ops {
	const char *kind;
	/* Resolve a peer port's address into a handle for sends. */
	int (*insert_addr)(pcori_port_t *p, const pcori_port_info_t *peer,
			   uint64_t *dest_p);
	/* Post niov pieces as one message; ctx reported to tx_done. */
	int (*sendv)(pcori_port_t *p, uint64_t dest, const struct iovec *iov,
		     size_t niov, pcori_ctx_t *ctx);
	/* Send a small message; buf is reusable on return, no completion. */
	int (*inject)(pcori_port_t *p, uint64_t dest, const void *buf,
		      size_t len);
	/*
	 * Send a fast-path message of len bytes to process dst_pid at dest
	 * (payload reusable on return, no completion).  The kind may carry
	 * it in a form of its own, smaller than a frame; its receiver hands
	 * it up with pcori_port_recv_fast.  Lossless kinds.
	 * PCOR_ERR_AGAIN: the full path takes it.
	 */
	int (*inject_fast)(pcori_port_t *p, uint64_t dest, int dst_pid,
			   const pcori_fast_hdr_t *f, const void *payload,
			   size_t len);
	/* Pull len bytes from the peer's (raddr, key) into dst. */
	int (*read)(pcori_port_t *p, uint64_t src, void *dst, size_t len,
		    uint64_t raddr, uint64_t key, pcori_ctx_t *ctx);
	/* Let peers read [buf, buf+len): remote address and key. */
	int (*expose)(pcori_port_t *p, const void *buf, size_t len,
		      uint64_t *raddr_p, uint64_t *key_p, void **reg_p);
	void (*unexpose)(pcori_port_t *p, void *reg);
	/*
	 * Poll completions and deliver them through the pcori_port_*
	 * upcalls below; wait up to timeout_ms for the first one (0: do not
	 * wait).  Returns events handled.  Caller holds progress_lock.
	 */
	int (*progress)(pcori_port_t *p, int timeout_ms);
	/*
	 * A waiter that expects a message from the peer at dest: watch
	 * returns a token for what that peer writes (0: none yet), and
	 * progress_watched(p, token) looks only there, without the progress
	 * lock while nothing came, then as progress(p, 0) does for it.  The
	 * waiter still polls the whole port now and then.  NULL: the kind
	 * has no such shortcut.
	 */
	uint64_t (*watch)(pcori_port_t *p, uint64_t dest);
	int (*progress_watched)(pcori_port_t *p, uint64_t token);
	/* Wake a thread waiting inside progress. */
	void (*signal)(pcori_port_t *p);
	/*
	 * Sleep up to timeout_ms until something arrives or signal, without
	 * the progress lock; return at once if something waits already, or
	 * if word (may be NULL) no longer holds value.  Progress is for the
	 * caller to make afterwards.  NULL where the kind can only wait
	 * inside progress.
	 */
	void (*wait)(pcori_port_t *p, int timeout_ms, _Atomic uint32_t *word,
		     uint32_t value);
	/*
	 * Messages sent through the fast path that their receivers have not
	 * taken out of the channel yet (NULL: the kind has no fast path).
	 * Finalize waits for them, so a fast send that completed is not
	 * lost when its sender leaves at once.
	 */
	size_t (*unsettled)(pcori_port_t *p);
	/*
	 * Process pid left (failed: declared lost; else it ended): hand up
	 * what it wrote into this port and stop trusting its memory, before
	 * the protocol fails the peer.  Called only by the one membership
	 * subscriber (pcori_net_peer_gone), first thing.  NULL where the kind
	 * keeps nothing of a peer that needs it.
	 */
	void (*peer_gone)(pcori_port_t *p, int pid, bool failed);
	void (*close)(pcori_port_t *p);
} pcori_port_ops_t;

/*
 * What the protocol tells a port kind at open, so that no port reads the
 * protocol's own state.
 */
typedef struct pcori_port_params {
	size_t frag_size;   /* largest fragment's payload: a frame is up to
			       PCORI_WIRE_HDR_SIZE more */
	uint32_t key_check; /* the job's key, in every header and segment */
	bool one_host;      /* the whole job runs on this host */
} pcori_port_params_t;

/* Dispatcher modes (PCOR_DISPATCH). */
typedef enum pcori_dispatch_mode {
	PCORI_DISPATCH_POLL,
	PCORI_DISPATCH_BLOCK,
	PCORI_DISPATCH_ADAPTIVE,
} pcori_dispatch_mode_t;

/*
 * Counters of one port; read by tests and pcor_info.  spilled: pcor-shm
 * messages that found no room inline in the ring and took the cells.
 */
typedef struct pcori_port_stats {
	_Atomic uint64_t rx, tx, bad_hdr, nack_sent, nack_rcvd, retx, dup,
		eagain, rma_reads, held, fwd, fwd_drop, test_drop, parked,
		ack_tx, spilled;
} pcori_port_stats_t;

/* Threads that drive a port without a locked instruction (drive_slot). */
#define PCORI_DRIVE_SLOTS 16

struct pcori_port {
	const pcori_port_ops_t *ops;
	int index;
	pcori_port_info_t info; /* published in the directory */
	size_t inject_max;      /* largest inject, header included */
	bool can_read;          /* remote reads possible */
	/*
	 * A read from a process that died may never come back: the provider
	 * neither fails it nor lets it be cancelled, and may still write
	 * into its buffer until the port closes (rxd, shm).  Reads over such
	 * a port land in pcor's own blocks, never an application's buffer.
	 */
	bool reads_may_hang;
	/*
	 * Frames are neither lost nor reordered nor refused once a send
	 * returned PCOR_OK (pcor-shm; reliable libfabric endpoints): small
	 * messages, up to fast_max bytes of payload, take the fast path.
	 */
	bool lossless;
	/*
	 * A send refused for want of room waits for the peer to read
	 * (pcor-shm's rings and cells), not for this process's progress (a
	 * provider's queue): retries back off and spread (frag/timers.c).
	 */
	bool room_from_peer;
	size_t fast_max;
	/*
	 * While can_read holds, a sendDMA to a peer one hop away through
	 * this port goes by rendezvous above this size (any send does above
	 * PCOR_EAGER_MAX): where one copy from the sender's memory beats the
	 * channel's two.
	 */
	size_t read_above;
	pcori_dispatch_mode_t mode;
	/* One poller at a time: dispatcher thread or a driving waiter. */
	pcori_lock_t progress_lock;
	pthread_t rx_thread, tx_thread;
	bool rx_started, tx_started;
	_Atomic bool stop;
	/*
	 * Rendezvous in flight through this port, either side.  Their data
	 * moves only while both ends make progress, so its dispatcher does
	 * not sleep meanwhile.
	 */
	_Atomic int busy;
	/*
	 * An application thread sleeping in this port (wait) in place of
	 * its dispatcher, which stays parked meanwhile; and when the last
	 * one left.  Senders wake it through wake_word (shared futex).
	 */
	_Atomic int sleeper;
	_Atomic uint64_t sleeper_ns;
	_Atomic uint32_t *wake_word;
	/*
	 * Waiters spin-polling this port themselves (its dispatcher stays
	 * parked meanwhile), and when the last one stopped.  A pcor thread
	 * whose id is below PCORI_DRIVE_SLOTS notes itself in its own byte
	 * of drive_slot, and leaves with a plain store, on the path of every
	 * answer; any other is counted in drivers.
	 */
	_Atomic int drivers;
	_Atomic uint8_t drive_slot[PCORI_DRIVE_SLOTS];
	_Atomic uint64_t drive_ns;
	pcori_port_stats_t st;
	uint64_t cpu_ns; /* its dispatchers' CPU time (finalize) */
	pcori_port_params_t par; /* as given at open */
};

/*
 * Open the ports of the kind PCOR_PROVIDERS names (port.c): pcor-shm, or
 * a libfabric provider (one port per domain), numbered from index, at
 * most max, into ports_p; how many in *n_p.  PCOR_OK when any opened.
 */
int pcori_port_open(const char *name, int index,
		    const pcori_port_params_t *par, pcori_port_t **ports_p,
		    int max, int *n_p);
/* The kinds' own opens (port.c's table). */
int pcori_port_ofi_open(const char *provider, int index,
			const pcori_port_params_t *par,
			pcori_port_t **ports_p, int max, int *n_p);
/* The pcor-shm port kind (port/shm.c): peers on this host. */
int pcori_port_shm_open(int index, const pcori_port_params_t *par,
			pcori_port_t **port_p);

/*
 * Upcalls from port kinds into the protocol (progress context).
 * pcori_port_recv returns false only on a lossless port, for a fast-path
 * message the process has no room for yet: the port keeps it where it
 * is and hands it up again later (a fast message cannot be sent again).
 */
bool pcori_port_recv(pcori_port_t *p, const void *msg, size_t len);
/*
 * Locks a port's drain keeps held from one fast message to the next, so
 * that a run of them from one peer to one thread takes each lock once:
 * the peer's stream lock, then the receiving thread's queue lock.  Start
 * it zeroed; pcori_rx_batch_end lets both go, and must be called before
 * the drain does anything else (hands up a frame, sleeps, returns).
 */
typedef struct pcori_rx_batch {
	struct pcori_peer *peer; /* its rx_lock is held */
	struct pcori_mq *mq;     /* its lock is held too */
} pcori_rx_batch_t;
void pcori_rx_batch_release(pcori_rx_batch_t *b);
/*
 * The common case of pcori_port_recv_fast, for a port's own fast loop:
 * a fast record from src_pid without an ack, one fragment, whose turn
 * it is, for a receive already posted, taken with no batch.  1: taken;
 * 0: nothing done (any other case, a bad field included), hand it to
 * pcori_port_recv_fast.  Progress context.
 */
int pcori_port_take_fast(pcori_port_t *port, int src_pid,
			 const pcori_fast_hdr_t *f, const void *payload,
			 size_t len);
/* Inline: most ends find nothing held (a batch of one, ended already). */
static inline void pcori_rx_batch_end(pcori_rx_batch_t *b)
{
	if (b->peer || b->mq)
		pcori_rx_batch_release(b);
}

/*
 * The same for a fast-path message from process src_pid that the port
 * carried in its own form (see inject_fast); f comes from the peer and
 * is checked here.  1: taken; 0: no room yet, as above; -1: malformed.
 * Any return but a taken fast message ends b.
 */
int pcori_port_recv_fast(pcori_port_t *p, int src_pid,
			 const pcori_fast_hdr_t *f, const void *payload,
			 size_t len, pcori_rx_batch_t *b);
void pcori_port_tx_done(pcori_port_t *p, pcori_ctx_t *ctx, int status);
void pcori_port_read_done(pcori_port_t *p, pcori_ctx_t *ctx, int status);
/*
 * What process pid sends through this port can no longer be read (its
 * channel broke: pcor-shm's ring held a record no sender writes).  It is
 * lost to this process: what involves it fails with PCOR_ERR_PEER_LOST
 * when the timers next run (not in the caller's progress call), so a
 * receive naming it ends instead of waiting until it leaves.
 */
void pcori_port_peer_fault(pcori_port_t *p, int pid);

#endif /* PCOR_PORT_H */
