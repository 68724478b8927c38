/*
 * shm.h -- private interface of the pcor-shm port kind (port/shm.c) and
 * its data structures over shared memory (shm_ring.c): the segment
 * layout, the single-producer/single-consumer receive rings and the send
 * cell pool.
 *
 * The data structures know nothing of ports, peers or the protocol, so
 * they are unit-tested alone (tests/shm/shm_unit.c).
 *
 * Segment of one process (a memfd, mapped by every local peer):
 *
 *   header          magic, geometry, owner, wake-up words
 *   owner[nslots]   who sends through slot i (pid + 1; 0: free)
 *   head[nslots]    total-out of ring i: bytes this process consumed
 *   mark[ncells]    cell pool: a receiver marks a run it has consumed
 *   ring[nslots]    receive rings, ring_size bytes each
 *   cell[ncells]    this process's send cells, cell_size bytes each
 *
 * A record announces itself: its header carries a stamp of its position,
 * written last, so the receiver polls the line at its head and a small
 * message moves one cache line, with no counter stored per message; the
 * smallest (a fast message of up to 8 bytes, a cell run's announcement)
 * take half a line, so a stream of them moves two per line.  The
 * head counters are one contiguous array, read by a sender only when its
 * ring looks full.  Counters only grow (64 bits never wrap); a ring
 * offset is the counter modulo ring_size.  Everything read from a peer's memory is validated
 * before use: a corrupted or malicious peer can spoil its own messages,
 * never make us read or write outside a mapping.
 */
#ifndef PCOR_PORT_SHM_H
#define PCOR_PORT_SHM_H

#include "../core/core.h"

#define PCORI_SHM_MAGIC 0x316d6873726f6370ull /* "pcorshm1" */
#define PCORI_SHM_VERSION 7
#define PCORI_SHM_LINE 64    /* counters, records of more than a slot */
#define PCORI_SHM_SLOT 32    /* ring positions: half a line */
#define PCORI_SHM_PAGE 4096
#define PCORI_SHM_REC_HDR 8  /* record header bytes */
#define PCORI_SHM_LOST_MAX 64 /* peers declared lost a header remembers */

/* Record kinds in a ring. */
#define PCORI_SHM_REC_INLINE 1 /* the message follows the record header */
#define PCORI_SHM_REC_CELLS 2  /* the message is in a run of sender cells */
#define PCORI_SHM_REC_WRAP 3   /* skip to the start of the ring */
#define PCORI_SHM_REC_FAST 4   /* a fast-path message: pcori_shm_fast_t,
				  the ack cookie if it carries one, data */
#define PCORI_SHM_REC_FAST_CELLS 5 /* a fast-path message as in REC_FAST,
				      too long for the ring: in cells */
#define PCORI_SHM_REC_FAST_S 6 /* a short fast-path message in one slot:
				  pcori_shm_fast_s_t, then len <= 8 bytes */
#define PCORI_SHM_REC_PAD 7    /* skip one slot: the next record needs a
				  line of its own */

/*
 * The fields of a fast-path message's pcor header that vary; the rest
 * follow from the ring (sender), the segment (receiver, job key) and the
 * record length.  With the record header it leaves 32 bytes of a cache
 * line for data: a small message is one line.
 */
typedef struct pcori_shm_fast {
	uint32_t src_thid, dst_thid;
	int32_t tag;
	uint32_t ctx, seq;
	uint32_t flags; /* PCORI_WF_*; HAS_ACK: a u64 cookie follows */
} pcori_shm_fast_t;

/*
 * A fast message that fits a slot: no ack rides with it, both thread ids
 * are below 2^16 and it carries at most PCORI_SHM_FAST_S_MAX bytes; its
 * flags are PCORI_WF_FAST alone.  Header, these 16 bytes and the data
 * make 32: two such messages share a line.
 */
typedef struct pcori_shm_fast_s {
	uint16_t src_thid, dst_thid;
	int32_t tag;
	uint32_t ctx, seq;
} pcori_shm_fast_s_t;

#define PCORI_SHM_FAST_S_MAX                                                  \
	(PCORI_SHM_SLOT - PCORI_SHM_REC_HDR - sizeof(pcori_shm_fast_s_t))

/* Cell run marks (mark[first cell of a run]). */
#define PCORI_SHM_MARK_IDLE 0u
#define PCORI_SHM_MARK_BUSY 1u /* allocated; the receiver has not finished */
#define PCORI_SHM_MARK_DONE 2u /* consumed: the sender may reuse the run */

/* Geometry of a segment; offsets are computed, never read from a peer. */
typedef struct pcori_shm_geom {
	uint32_t nslots;    /* senders one process can receive from */
	uint32_t ring_size; /* bytes per receive ring, a power of two */
	uint32_t cell_size; /* bytes per cell, a multiple of 64 */
	uint32_t ncells;    /* cells in the send pool */
	uint64_t off_owner, off_head, off_mark, off_ring, off_cell;
	uint64_t size;      /* whole segment, page-aligned */
} pcori_shm_geom_t;

/*
 * Check the four sizes of g and compute its offsets and size.  Returns 0,
 * or -1 when a size is out of range (so a peer's header can be checked
 * with the same call).
 */
int pcori_shm_layout(pcori_shm_geom_t *g);

/* The first page of a segment. */
typedef struct pcori_shm_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t key_check; /* the job's */
	uint64_t nonce;     /* random; also in the directory address */
	int32_t pid;        /* owner's pid in the job */
	int32_t ospid;      /* owner's process id on the host */
	uint64_t base;      /* owner's address of this mapping (CMA probe) */
	uint32_t nslots, ring_size, cell_size, ncells;
	/*
	 * 1: senders fence for real between a record and their read of
	 * `sleeping`, and the receiver's sleepers make no membarrier call
	 * (it sleeps often: pcori_fence_choose); 0: the reverse.
	 */
	uint32_t fenced;
	/* Slots claimed so far + 1 at most: the receiver scans below it. */
	alignas(PCORI_SHM_LINE) _Atomic uint32_t hwm;
	/*
	 * Wake-up: the receiver sets `sleeping` before it sleeps on `wake`;
	 * a sender bumps `wake` and wakes it only when `sleeping` is set.
	 */
	alignas(PCORI_SHM_LINE) _Atomic uint32_t sleeping;
	_Atomic uint32_t wake;
	/*
	 * Peers this process declared lost, noted before it let go of
	 * anything it had exposed to them: a reader of its memory checks
	 * after each read that it is not among them (pcori_shm_lost_since).
	 * lost[i % PCORI_SHM_LOST_MAX] is the i-th; nlost counts them all.
	 */
	alignas(PCORI_SHM_LINE) _Atomic uint32_t nlost;
	_Atomic int32_t lost[PCORI_SHM_LOST_MAX];
} pcori_shm_hdr_t;

/* The owner of h (its one writer) declares pid lost. */
void pcori_shm_lost_note(pcori_shm_hdr_t *h, int32_t pid);

/*
 * A read from h's owner began when its nlost was `before` and has ended:
 * true if pid had been declared lost by then, or if too many were since
 * for the table to tell.  h may be a hostile peer's: any contents give
 * an answer, nothing more.
 */
bool pcori_shm_lost_since(const pcori_shm_hdr_t *h, uint32_t before,
			  int32_t pid);

/*
 * A pcor-shm port's address in the directory: how a local peer opens the
 * segment (/proc/<ospid>/fd/<fd>) and what it must find there.
 */
#define PCORI_SHM_ADDR_MAGIC 0x72646461686d7370ull /* "pshmaddr" */
typedef struct pcori_shm_addr {
	uint64_t magic;
	uint64_t nonce;
	uint64_t size;
	int32_t pid, ospid, fd;
	uint32_t version;
} pcori_shm_addr_t;

/* ------------------------------------------------------------- rings */

/* One receive ring as seen by either side. */
typedef struct pcori_shm_ring {
	uint8_t *buf;           /* size bytes */
	_Atomic uint64_t *head; /* total-out: written by the consumer only */
	uint32_t size;          /* power of two */
} pcori_shm_ring_t;

/* The producer's private view: callers serialise producers. */
typedef struct pcori_shm_prod {
	uint64_t tail; /* total-in, including the reserved record */
	uint64_t head; /* consumer's total-out when last read */
	/*
	 * The reserved record's header, stored by commit; and the header of
	 * the filler before it (a WRAP or a PAD), if any.
	 */
	uint64_t at, word, fill_at, fill_word;
	bool fill;
} pcori_shm_prod_t;

/* A record as the consumer sees it (valid until head moves past it). */
typedef struct pcori_shm_rec {
	uint32_t kind;
	uint32_t len;        /* message bytes */
	const uint8_t *data; /* INLINE, FAST: the message */
	uint32_t first, count; /* CELLS: the run */
} pcori_shm_rec_t;

/*
 * Record header word: stamp in the low 32 bits, kind in the next 4, the
 * length in the top 28.  The stamp names the record's position (lap
 * included) and is never 0, the value found where a record may start
 * and none has yet in this lap: the consumer zeroes the first word of
 * each line a record's payload covered (pcori_shm_ring_consumed), and
 * the producer of a one-slot record at a line's start zeroes the
 * second slot's (pcori_shm_ring_reserve).  So a slot of an older lap, or
 * of a record's middle, never passes for a new record.
 */
#define PCORI_SHM_LEN_MAX ((1u << 28) - 1)
static inline uint32_t pcori_shm_stamp(uint64_t pos)
{
	return (uint32_t)(pos / PCORI_SHM_SLOT) | 1u;
}

static inline uint64_t pcori_shm_hdr_word(uint64_t pos, uint32_t kind,
					  uint32_t len)
{
	return (uint64_t)len << 36 | (uint64_t)(kind & 15) << 32 |
	       pcori_shm_stamp(pos);
}

/*
 * Bytes a record with plen payload bytes takes in a ring: a slot, or
 * whole lines (such records start on a line: one line, one transfer).
 */
static inline uint64_t pcori_shm_rec_size(uint64_t plen)
{
	if (plen <= PCORI_SHM_SLOT - PCORI_SHM_REC_HDR)
		return PCORI_SHM_SLOT;
	return (PCORI_SHM_REC_HDR + plen + PCORI_SHM_LINE - 1) &
	       ~(uint64_t)(PCORI_SHM_LINE - 1);
}

/*
 * Largest payload of an INLINE record in a ring of ring_size: a quarter
 * of the ring and a line for the message's header, so that a fast message
 * of 8 KiB fits a 32 KiB ring.  Past an eighth (pcori_shm_inline_sure) a
 * record that finds no room goes through the cells instead (after waiting
 * while the receiver frees room, for a fast message), so a ring that is
 * not being read still takes many messages, one line each.  4 and 8 KiB
 * messages, which the eighth sent through cells at 7-12 GB/s in most
 * runs, stream inline at 20-27 GB/s (docs/BENCHMARKS.md).
 */
static inline uint32_t pcori_shm_inline_max(uint32_t ring_size)
{
	return ring_size / 4 + PCORI_SHM_LINE - PCORI_SHM_REC_HDR;
}

static inline uint32_t pcori_shm_inline_sure(uint32_t ring_size)
{
	return ring_size / 8 - PCORI_SHM_REC_HDR;
}

/*
 * Reserve a record of plen payload bytes (kind and len kept for its
 * header) and return where its payload goes, or NULL when the ring has
 * no room (nothing changed then).  The record stays invisible to the
 * consumer until pcori_shm_ring_commit.  plen must not exceed
 * pcori_shm_inline_max, len PCORI_SHM_LEN_MAX.
 */
void *pcori_shm_ring_reserve(const pcori_shm_ring_t *r, pcori_shm_prod_t *pr,
			     uint32_t kind, uint32_t len, uint32_t plen);

/*
 * Publish the reserved record: store its header (and its filler's, last),
 * release stores.  A sender that then checks whether the consumer sleeps
 * fences between the two (port/shm.c).
 */
void pcori_shm_ring_commit(const pcori_shm_ring_t *r, pcori_shm_prod_t *pr);

/* Start a producer at the beginning of a ring that was reset. */
static inline void pcori_shm_prod_init(pcori_shm_prod_t *pr)
{
	memset(pr, 0, sizeof(*pr));
}

/*
 * Consumer: does a record stand at head?  (One load of its line; seq_cst
 * for the sleeper's side of the wake-up protocol, a plain load on x86.)
 */
static inline bool pcori_shm_ring_ready(const pcori_shm_ring_t *r,
					uint64_t head)
{
	uint64_t w = __atomic_load_n(
		(const uint64_t *)(const void *)(r->buf +
						 (head & (r->size - 1))),
		__ATOMIC_SEQ_CST);
	return (uint32_t)w == pcori_shm_stamp(head);
}

/*
 * Consumer: decode the record at head (head must be slot-aligned).
 * Returns 0 when none is there yet, 1 with *rec and the head after the
 * record in *next_p (a WRAP or PAD comes up as such: skip it), or -1 when
 * the record is malformed (the ring must then be abandoned).
 */
int pcori_shm_ring_next(const pcori_shm_ring_t *r, uint64_t head,
			pcori_shm_rec_t *rec, uint64_t *next_p);

/*
 * Consumer: done with the record from head to next (not a filler).
 * Zeroes the first word of each line after the record's first, so that
 * what its payload left there is no header in a later lap.  Before head
 * is given back.
 */
void pcori_shm_ring_consumed(const pcori_shm_ring_t *r, uint64_t head,
			     uint64_t next);

/*
 * Consumer: make a ring that is handed to a new producer look empty,
 * whatever its last producer left in it (every line's first word).
 */
void pcori_shm_ring_reset(const pcori_shm_ring_t *r);

/* ------------------------------------------------------------- cells */

/* A run of cells sent and not yet reclaimed. */
typedef struct pcori_shm_run {
	uint32_t first, count; /* count 0: reclaimed out of order */
	const void *owner;     /* the destination (opaque here) */
} pcori_shm_run_t;

/*
 * The send pool of one process: which cells are free (a bitmap), and the
 * runs sent, in sending order, waiting for the receiver's mark
 * (mark-and-sweep: receivers only ever write a mark; the owner reclaims).
 * Not thread-safe: the port guards it with a lock.
 */
typedef struct pcori_shm_pool {
	uint32_t ncells;
	uint32_t nfree;
	uint32_t next;           /* where the next oldest run is sought */
	uint64_t *bits;          /* 1: in use */
	_Atomic uint32_t *marks; /* in the shared segment, ncells of them */
	pcori_shm_run_t *runs;   /* FIFO of ncells entries */
	uint32_t rfirst, rcount;
	uint64_t reclaimed;      /* cells swept back, in all */
} pcori_shm_pool_t;

int pcori_shm_pool_init(pcori_shm_pool_t *p, uint32_t ncells,
			_Atomic uint32_t *marks);
void pcori_shm_pool_fini(pcori_shm_pool_t *p);

/*
 * Take count consecutive cells.  oldest: the first free run from the end
 * of the last run so taken, else from the pool's start (next fit).
 * Receivers consume in order, so cells come back about in the order they
 * went out and such runs go round the pool like a ring: they are the
 * cells the receiver read longest ago, whose lines its core has dropped,
 * which ordinary stores need not take back from it.  Else the lowest free
 * run (first fit).  The search skips a word of used cells at a time.
 * Their mark becomes BUSY.  Returns true and *first_p, or false when no
 * such run is free.
 */
bool pcori_shm_pool_alloc(pcori_shm_pool_t *p, uint32_t count, bool oldest,
			  uint32_t *first_p);

/* Give back a run that was never announced to a receiver. */
void pcori_shm_pool_free(pcori_shm_pool_t *p, uint32_t first, uint32_t count);

/* Remember an announced run until its receiver marks it DONE. */
void pcori_shm_pool_publish(pcori_shm_pool_t *p, uint32_t first,
			    uint32_t count, const void *owner);

/*
 * Reclaim runs marked DONE, or whose owner gone() says has left (may be
 * NULL).  Quick sweep (full false): from the oldest run while runs are
 * done -- one receiver consumes in order, so this is usually all.  Full
 * sweep: every run.  Returns the cells freed.
 */
uint32_t pcori_shm_pool_sweep(pcori_shm_pool_t *p, bool full,
			      bool (*gone)(const void *owner));

/* Runs announced and not reclaimed whose owner lost() does not say was
 * lost: what a receiver may still take. */
uint32_t pcori_shm_pool_out(const pcori_shm_pool_t *p,
			    bool (*lost)(const void *owner));

/* Receiver: run `first` of a sender's pool (ncells cells) is consumed. */
static inline void pcori_shm_mark_done(_Atomic uint32_t *marks,
				       uint32_t first)
{
	/* Release: our reads of the cells happen before the sender reuses. */
	atomic_store_explicit(&marks[first], PCORI_SHM_MARK_DONE,
			      memory_order_release);
}

#endif /* PCOR_PORT_SHM_H */
