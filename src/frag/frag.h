/*
 * frag.h -- private interface of src/frag: message control blocks (MCBs),
 * their pool, the per-destination-thread match queues, and the fragment
 * bitmaps used for segmentation and reassembly.  (The message layer and
 * the protocol over them, in the same folder, have headers of their own:
 * msg.h, net.h, wire.h and proto.h.)
 *
 * Pure data structures: no libfabric, no threads.  Callers own the
 * locking discipline documented on each function.
 */
#ifndef PCOR_FRAG_H
#define PCOR_FRAG_H

#include "../core/core.h"

/* uthash must not abort the process when malloc fails. */
#define HASH_NONFATAL_OOM 1
extern _Thread_local bool pcori_hash_oom __attribute__((tls_model("initial-exec")));
#define uthash_nonfatal_oom(obj) (pcori_hash_oom = true)
#include <uthash.h>

/* ---------------------------------------------------------- fragments */

/* Fragments per window: the width of the bitmap (the paper's 32). */
#define PCORI_FRAG_WINDOW 32u

/* Number of fragments of a message (an empty message has one). */
uint32_t pcori_frag_count(size_t size, size_t frag_size);

/* Offset and length of fragment idx. */
void pcori_frag_bounds(size_t size, size_t frag_size, uint32_t idx,
		       size_t *off_p, size_t *len_p);

/*
 * Reassembly state of one message: a window of 32 fragments starting at
 * base, a bit per fragment of the window that has arrived.  Windows
 * advance only when complete, so a sender never has more than 32
 * fragments of one message outstanding.
 */
typedef struct pcori_reasm {
	uint32_t nfrags;   /* fragments in the message */
	uint32_t base;     /* first fragment of the current window */
	uint32_t bitmap;   /* arrived fragments of the window */
	uint32_t received; /* fragments accepted in total */
} pcori_reasm_t;

typedef enum pcori_frag_verdict {
	PCORI_FRAG_NEW,    /* first time seen: store it */
	PCORI_FRAG_DUP,    /* already have it: drop */
	PCORI_FRAG_AHEAD,  /* beyond the current window: refuse, resend later */
	PCORI_FRAG_BAD,    /* index outside the message: a protocol error */
} pcori_frag_verdict_t;

void pcori_reasm_init(pcori_reasm_t *r, uint32_t nfrags);
/* Record fragment idx; the verdict says what to do with its payload. */
pcori_frag_verdict_t pcori_reasm_accept(pcori_reasm_t *r, uint32_t idx);
/* Fragments in the current window (32, or fewer in the last one). */
uint32_t pcori_reasm_window_len(const pcori_reasm_t *r);
/* Bits of the current window still missing (bit i: fragment base+i). */
uint32_t pcori_reasm_missing(const pcori_reasm_t *r);
/* Has every fragment of the current window arrived? */
bool pcori_reasm_window_done(const pcori_reasm_t *r);
/* Move to the next window; only when the current one is done. */
void pcori_reasm_advance(pcori_reasm_t *r);
/* Has every fragment of the message arrived? */
static inline bool pcori_reasm_complete(const pcori_reasm_t *r)
{
	return r->received == r->nfrags;
}

/* --------------------------------------------------------------- MCBs */

/* The paper's tuple plus the matching context (0 for the pcor API). */
typedef struct pcori_mkey {
	int32_t src_pid, src_thid, dst_thid, tag;
	uint32_t ctx;
} pcori_mkey_t;

/* The part of an MCB that sits in a match queue's hash index. */
typedef struct pcori_mcb_hent {
	UT_hash_handle hh;
	pcori_mkey_t key;
} pcori_mcb_hent_t;

#define PCORI_MCB_INLINE 64

enum pcori_mcb_flags {
	PCORI_MCB_INDEXED = 1u << 0, /* hent is its key's entry in the index */
	PCORI_MCB_INLINE_DATA = 1u << 1, /* data points at inl[] */
	PCORI_MCB_DMA_DATA = 1u << 2,    /* data is a DMA block the MCB owns */
	PCORI_MCB_PARKED = 1u << 3,      /* data is a sender's; sreq waits */
	PCORI_MCB_RNDV = 1u << 4, /* an unexpected rendezvous request */
};

/* mstate bits: who finishes an MCB that is still being assembled. */
#define PCORI_MCB_COMPLETE 0x1u /* every fragment is in */
#define PCORI_MCB_CLAIMED 0x2u  /* a receive took it (rreq is set) */

/*
 * A message control block: one message that arrived before its receive
 * (unexpected), or is being reassembled.  Owned by the match queue it is
 * in; whoever takes it out owns it and returns it to the pool.
 */
typedef struct pcori_mcb {
	pcori_list_t arrival;   /* in the queue's unexpected list */
	pcori_list_t chain;     /* circular: same key, arrival order */
	pcori_mcb_hent_t hent;  /* key, and the index entry when oldest */
	uint32_t flags;
	uint32_t seq;           /* sequence number from the sender thread */
	size_t size;            /* message size */
	void *data;             /* payload (see flags) */
	pcori_req_t *sreq;      /* PARKED: the send to complete when taken */
	pcori_reasm_t reasm;
	uint32_t index;         /* own slot in the pool */
	/*
	 * A message still arriving can be taken by a receive: the receive
	 * sets rreq then CLAIMED, the arrival path sets COMPLETE; whichever
	 * comes second delivers (both bits set means done).
	 */
	_Atomic uint32_t mstate;
	pcori_req_t *rreq;
	/* PCORI_MCB_RNDV: where the sender's data can be pulled from. */
	void *origin;           /* the sending peer (dispatch's object) */
	uint64_t rts_addr, rts_key, cookie;
	uint32_t rts_flags;
	alignas(16) uint8_t inl[PCORI_MCB_INLINE];
} pcori_mcb_t;

/*
 * Fixed-capacity MCB pool: a lock-free stack of slot indexes (with an ABA
 * tag).  Exhaustion is back-pressure: callers wait for a free (see
 * pcori_mcb_pool_wait_begin) or refuse the message; nothing is dropped here.
 */
typedef struct pcori_mcb_pool {
	pcori_mcb_t *mcbs;
	uint32_t cap;
	_Atomic uint64_t head;   /* (tag << 32) | index; index ~0u: empty */
	_Atomic uint32_t *next;  /* next[i]: slot below i on the stack */
	_Atomic uint32_t avail;
	_Atomic uint32_t epoch;  /* bumped on free while someone waits */
	_Atomic uint32_t waiters;
} pcori_mcb_pool_t;

int pcori_mcb_pool_init(pcori_mcb_pool_t *p, uint32_t cap);
void pcori_mcb_pool_fini(pcori_mcb_pool_t *p);
/* A cleared MCB, or NULL when the pool is empty.  Thread-safe. */
pcori_mcb_t *pcori_mcb_alloc(pcori_mcb_pool_t *p);
/* Return an MCB.  Thread-safe; wakes waiters. */
void pcori_mcb_free(pcori_mcb_pool_t *p, pcori_mcb_t *m);
/*
 * Waiting for room (back-pressure):
 *   e = pcori_mcb_pool_wait_begin(p);
 *   while (attempt fails) pcori_mcb_pool_sleep(p, &e, left);
 *   pcori_mcb_pool_wait_end(p);
 * Registering before the attempt guarantees no free is missed.
 */
uint32_t pcori_mcb_pool_wait_begin(pcori_mcb_pool_t *p);
void pcori_mcb_pool_wait_end(pcori_mcb_pool_t *p);
/* Sleep until a free after *epoch (updated) or timeout; PCOR_OK/TIMEDOUT. */
int pcori_mcb_pool_sleep(pcori_mcb_pool_t *p, uint32_t *epoch,
			 int64_t timeout_ns);
static inline uint32_t pcori_mcb_pool_avail(pcori_mcb_pool_t *p)
{
	return atomic_load_explicit(&p->avail, memory_order_relaxed);
}

/* ------------------------------------------------------- match queues */

/*
 * Everything addressed to one destination thread id: its posted receives
 * in post order, its unexpected messages in arrival order, and a hash
 * index over the unexpected ones keyed by the full tuple (equal keys
 * chained oldest first) so a fully specified receive finds its message
 * in O(1) however many others wait.
 *
 * Non-overtaking: messages from one sender thread enter in send order and
 * both searches return the oldest match, so they are matched in order.
 */
typedef struct pcori_mq {
	/*
	 * Guards every field below.  Lock order: a thread holds at most one
	 * match-queue lock at a time, and takes no other pcor lock under it
	 * except the DMA pool's and the handle table's.
	 */
	alignas(PCORI_CACHELINE) pcori_lock_t lock;
	int32_t thid;          /* the destination thread id */
	uint32_t nposted;
	uint32_t nunexp;
	bool index_ok;         /* false after a hash OOM, until drained */
	pcori_list_t posted;   /* pcori_req_t.link */
	pcori_list_t unexp;    /* pcori_mcb_t.arrival */
	pcori_mcb_hent_t *index;
	pcori_mcb_hent_t sentinel; /* keeps the hash table allocated */
	/*
	 * The receive armed in the inbox, older than every receive in
	 * `posted` (it is armed only when that list is empty), and the count
	 * of armings that gives each its seq.
	 */
	pcori_req_t *armed;
	uint32_t narmed;
	/* Its own line: senders write it without the lock (core.h). */
	pcori_inbox_t inbox;
} pcori_mq_t;

void pcori_mq_init(pcori_mq_t *mq, int thid);
/* Free the index.  The queues must have been drained. */
void pcori_mq_fini(pcori_mq_t *mq);

/* Does posted receive r accept a message with key k? */
static inline bool pcori_mq_accepts(const pcori_req_t *r, const pcori_mkey_t *k)
{
	return (r->pid == PCOR_ANY_PID || r->pid == k->src_pid) &&
	       (r->thid == PCOR_ANY_THID || r->thid == k->src_thid) &&
	       (r->tag == PCOR_ANY_TAG || r->tag == k->tag) && r->ctx == k->ctx;
}

/* Does the receive armed in b (its word v) accept k?  No lock needed. */
static inline bool pcori_inbox_accepts(const pcori_inbox_t *b, uint32_t v,
				       const pcori_mkey_t *k)
{
	if (PCORI_INBOX_STATE(v) != PCORI_INBOX_ARMED)
		return false;
	int32_t pid = atomic_load_explicit(&b->pid, memory_order_relaxed);
	int32_t thid = atomic_load_explicit(&b->thid, memory_order_relaxed);
	int32_t tag = atomic_load_explicit(&b->tag, memory_order_relaxed);
	return (pid == PCOR_ANY_PID || pid == k->src_pid) &&
	       (thid == PCOR_ANY_THID || thid == k->src_thid) &&
	       (tag == PCOR_ANY_TAG || tag == k->tag) &&
	       atomic_load_explicit(&b->ctx, memory_order_relaxed) == k->ctx;
}

/*
 * Lock held.  Arm the inbox with receive r if r would be the oldest posted
 * receive and the inbox is free; false: post it with pcori_mq_post.
 */
bool pcori_mq_arm(pcori_mq_t *mq, pcori_req_t *r);
/* Lock held.  Take the armed receive out of the inbox, if still armed. */
pcori_req_t *pcori_mq_disarm(pcori_mq_t *mq);
/*
 * Lock held.  Remove and return the oldest posted receive accepting k,
 * the armed one included (moved out of the inbox: it completes through
 * its own word).
 */
pcori_req_t *pcori_mq_take_posted(pcori_mq_t *mq, const pcori_mkey_t *k);
/* Lock held.  Append a receive (its pattern in pid/thid/tag/ctx). */
void pcori_mq_post(pcori_mq_t *mq, pcori_req_t *r);
/* Lock held.  Remove r if it is still posted; true if it was. */
bool pcori_mq_unpost(pcori_mq_t *mq, pcori_req_t *r);
/* Lock held.  Remove and return the oldest unexpected MCB r accepts. */
pcori_mcb_t *pcori_mq_take_unexp(pcori_mq_t *mq, const pcori_req_t *r);
/* Lock held.  Append an unexpected MCB (its key in hent.key). */
void pcori_mq_add_unexp(pcori_mq_t *mq, pcori_mcb_t *m);
/* Lock held.  Remove a specific unexpected MCB. */
void pcori_mq_remove_unexp(pcori_mq_t *mq, pcori_mcb_t *m);

#endif /* PCOR_FRAG_H */
