/*
 * shm.c -- the pcor-shm port kind: messaging between the processes
 * of one host through shared memory, after Chai, Hartono and Panda
 * (per-pair receive rings, a send cell pool, no locks in shared memory)
 * and Miao et al. (one copy, straight from the sender's memory, for large
 * messages).
 *
 * Design notes
 *  - Memory.  Every process creates one segment (a sealed memfd named
 *    after the job) holding the receive rings of its local senders, their
 *    counters and its own send cell pool (layout in shm.h).  Its address
 *    in the directory says how to open it: /proc/<pid>/fd/<fd> plus a
 *    random nonce checked in the header.  Nothing has a name in /dev/shm,
 *    so no exit path, kill -9 included, leaves anything behind; a process
 *    spawned later opens the others' segments the same way.  Pages come
 *    on first use, so memory follows the pairs that really talk.
 *  - Rings.  A sender claims a slot in the receiver's segment (one CAS on
 *    owner[i]) the first time it routes to it and then owns that ring:
 *    one producer process, one consumer process.  The producer threads of
 *    one process serialise on the destination's tx_lock (process-private);
 *    nothing in shared memory is ever locked.
 *  - Sizes.  A message (pcor header included) of up to a quarter of a ring
 *    and a line goes inline in the ring (past an eighth, while it finds
 *    room); a larger one, or one that found none, is copied into a run of
 *    consecutive cells of the sender's pool and announced by a ring record
 *    (indirection).  The receiver hands it to the protocol in place and
 *    marks the run DONE; the sender sweeps (mark-and-sweep).  Rendezvous
 *    messages are pulled by the receiver with process_vm_readv straight
 *    from the sender's buffer into the receive buffer (can_read); where
 *    cross-memory attach is refused (ptrace rules, seccomp, PCOR_SHM_CMA=
 *    off) can_read is false and the protocol streams fragments through
 *    the cells instead.
 *  - Completions.  sendv copies before it returns, so its buffers are free
 *    at once; the completion itself is queued and reported from progress
 *    (the caller of sendv holds protocol locks that tx_done takes).  A
 *    read copies in the caller's thread, which holds no lock, and reports
 *    its completion before returning.
 *  - Polling and sleeping.  progress looks at the header line at the
 *    head of every ring below the high-water mark of claimed slots: a
 *    record's stamp, written last, says it is there (shm_ring.c), so a
 *    small message moves one line and an idle ring costs no transfer.
 *    To sleep it sets `sleeping`, makes every pcor thread on the host
 *    fence (membarrier), looks again, and waits on the `wake` futex of
 *    its segment; a sender publishes its record (a release store), fences
 *    only for the compiler, and reads `sleeping`, bumping `wake` and
 *    calling FUTEX_WAKE only when it is set.  One of the two always sees
 *    the other's store, so no wake-up is lost, and an awake receiver costs
 *    its senders neither a syscall nor a locked instruction.
 *  - Peers that leave.  The directory hook marks the peer dead; progress
 *    then releases it: senders see `gone` under its tx_lock, its mapping is
 *    dropped, its receive slot here is reset for reuse and the cells it had
 *    not consumed are swept once its process has ended (a peer declared
 *    lost may still run and read them in place: shmp_cells_free).
 *    Everything read from shared memory (counters, records, cell runs,
 *    headers) is checked before use; a bad ring is abandoned, never
 *    followed.
 *  - Locks (all process-private).  peers_lock guards the peer list;
 *    a peer's tx_lock guards its ring producer state and `gone`; pool_lock
 *    guards the cell pool; cq_lock the completion array.  Order: peers_lock
 *    -> tx_lock; pool_lock and cq_lock are leaves.  progress (one thread,
 *    progress_lock) calls the protocol with none of them held.
 */
#include "shm_port.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* ------------------------------------------------------ peers that leave */

/*
 * A peer that leaves has usually written its last words (acks, the end
 * of a message) into our ring before the directory tells us, and the
 * protocol fails the peer as soon as peer_gone returns.  So see the
 * peer released -- its ring drained -- before returning: by the
 * dispatcher, woken for it, or by this thread.  Bounded: whoever holds
 * the progress lock may be waiting for this very thread (a directory
 * lookup); then the last words may be lost, as with any fabric.
 */
static void release_before_loss(shm_port_t *p, shm_peer_t *d)
{
	uint64_t end = pcori_now_ns() + 50000000;
	while (!atomic_load_explicit(&d->released, memory_order_acquire) &&
	       pcori_now_ns() < end) {
		if (pcori_trylock(&p->base.progress_lock)) {
			shmp_release_dead(p);
			pcori_unlock(&p->base.progress_lock);
		} else {
			sched_yield();
		}
	}
}

/* pcori_port_ops_t.peer_gone: note the death; progress releases. */
static void shm_peer_gone(pcori_port_t *bp, int pid, bool failed)
{
	shm_port_t *p = (shm_port_t *)bp;
	pcori_lock(&p->peers_lock);
	/* Made if unknown, so a slot it claimed here is reset too. */
	shm_peer_t *d = shmp_peer_find(p, pid);
	if (!d)
		d = shmp_peer_new(p, pid);
	/*
	 * Before the protocol lets go of what we exposed to it: a process
	 * declared failed may still run and read our memory, and must learn
	 * after its read that it lost the race.
	 */
	if (failed)
		pcori_shm_lost_note(p->hdr, pid);
	if (d && !atomic_exchange(&d->dead, true))
		atomic_fetch_add(&p->ndead, 1);
	pcori_unlock(&p->peers_lock);
	bp->ops->signal(bp);
	if (d)
		release_before_loss(p, d);
}

/* ------------------------------------------------------------ sends */

static int again(shm_port_t *p)
{
	atomic_fetch_add_explicit(&p->base.st.eagain, 1, memory_order_relaxed);
	return PCOR_ERR_AGAIN;
}

/*
 * A fast message refused for want of room goes the full protocol's way,
 * and its stream's next messages with it until it is acknowledged
 * (frag/tx.c): several times a message's cost, by which time a stream
 * has filled the ring again.  A receiver that is taking messages frees
 * room within about one message's time, so a fast send waits for it:
 * while the receiver frees some every ROOM_STILL_NS, at most ROOM_WAIT_NS
 * in all.  A receiver that is busy elsewhere, asleep or dead costs one
 * ROOM_STILL_NS.
 */
#define ROOM_WAIT_NS  50000
#define ROOM_STILL_NS 5000

typedef struct room_wait {
	uint64_t start, moved; /* 0: not waiting yet */
	uint64_t mark;         /* grows as the receiver frees room */
} room_wait_t;

/* Wait on?  mark: the receiver's progress now. */
static bool room_wait(room_wait_t *w, uint64_t mark)
{
	uint64_t now = pcori_now_ns();
	if (!w->start) {
		w->start = w->moved = now;
		w->mark = mark;
	} else if (mark != w->mark) {
		w->mark = mark;
		w->moved = now;
	}
	if (now - w->moved > ROOM_STILL_NS || now - w->start > ROOM_WAIT_NS)
		return false;
	pcori_cpu_relax();
	return true;
}

/*
 * Take count cells (the ones freed longest ago if oldest), reclaiming
 * consumed ones first.  pool_lock held.
 */
static bool pool_take(shm_port_t *p, uint32_t count, bool oldest,
		      uint32_t *first)
{
	pcori_shm_pool_sweep(&p->pool, false, shmp_cells_free);
	if (pcori_shm_pool_alloc(&p->pool, count, oldest, first))
		return true;
	pcori_shm_pool_sweep(&p->pool, true, shmp_cells_free);
	return pcori_shm_pool_alloc(&p->pool, count, oldest, first);
}

/*
 * Room for one record of kind in d's ring, saying len bytes and carrying
 * plen (waiting for it if wait): locks d and returns where the record's
 * bytes go, or NULL with *rc_p set (and d unlocked).  ring_end commits it.
 */
static PCORI_ALWAYS_INLINE uint8_t *ring_begin(shm_peer_t *d, uint32_t kind,
					       size_t len, size_t plen,
					       bool wait, int *rc_p)
{
	pcori_lock(&d->tx_lock);
	if (PCORI_UNLIKELY(d->gone || d->slot < 0)) {
		*rc_p = PCOR_ERR_PEER_LOST;
	} else {
		room_wait_t w = {0, 0, 0};
		do {
			/* A full ring reloads the consumer's head. */
			uint8_t *dst = pcori_shm_ring_reserve(
			    &d->ring, &d->prod, kind, (uint32_t)len,
			    (uint32_t)plen);
			if (PCORI_LIKELY(dst))
				return dst;
		} while (wait && room_wait(&w, d->prod.head));
		*rc_p = PCOR_ERR_AGAIN;
	}
	pcori_unlock(&d->tx_lock);
	return NULL;
}

/*
 * How far past the tail ring_end asks for a line: beyond the line a
 * caught-up consumer polls (the tail's) and its pair.
 */
#define SHM_WRITE_AHEAD (4 * PCORI_SHM_LINE)

static PCORI_ALWAYS_INLINE void ring_end(shm_peer_t *d)
{
	pcori_shm_ring_commit(&d->ring, &d->prod);
	wake_if_sleeping(d->hdr, d->fence);
	/*
	 * In a run of sends, the line a few records on: the consumer read it
	 * a lap ago and still holds it, so writing it will need it back.
	 * Asked for now, that transfer overlaps this message's return and
	 * the next one's work instead of stalling the next locked
	 * instruction behind the store that needs it.  Not for a lone send
	 * (a ping-pong's): there the consumer, polling close behind, would
	 * lose lines it reads next and fetch them back.
	 */
	uint32_t run = atomic_load_explicit(&d->sent_run, memory_order_relaxed);
	atomic_store_explicit(&d->sent_run, run + 1, memory_order_relaxed);
	if (run)
		pcori_prefetchw(d->ring.buf + ((d->prod.tail + SHM_WRITE_AHEAD) &
					       (d->ring.size - 1)));
	pcori_unlock(&d->tx_lock);
}

/*
 * Copy len bytes from iov into one record of kind in d's ring (PCOR_ERR_AGAIN
 * uncounted: the caller may take the cells instead).
 */
static int ring_put(shm_port_t *p, shm_peer_t *d, uint32_t kind,
		    const struct iovec *iov, size_t niov, size_t len)
{
	int rc;
	uint8_t *dst = ring_begin(d, kind, len, len, false, &rc);
	if (!dst)
		return rc;
	shm_copy_plan_t pl = shmp_copy_plan(&p->copy, len);
	shmp_copy(&p->copy, &pl, dst, iov, niov, len);
	ring_end(d);
	return PCOR_OK;
}

/*
 * The record's fields are the first ones of the protocol's form, in the
 * same places: the receiver reads them with one copy.
 */
_Static_assert(sizeof(pcori_shm_fast_t) == offsetof(pcori_fast_hdr_t, cookie),
	       "fast record and fast header differ");
_Static_assert(offsetof(pcori_shm_fast_t, flags) ==
		       offsetof(pcori_fast_hdr_t, flags),
	       "fast record and fast header differ");

/*
 * One field of a fast header at a time.  The caller has just written it
 * field by field, and a wider load spanning several of those stores
 * (what the compiler makes of a struct copy) cannot be forwarded from
 * them: it waits until they reach the cache, on the critical path.
 */
#define FIELD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/*
 * ring_put for a compact record: the fixed parts are copied field by
 * field, a short payload by words.
 */
static int fast_put(shm_port_t *p, shm_peer_t *d, const pcori_fast_hdr_t *f,
		    bool ack, const void *payload, size_t plen, bool fallback)
{
	int rc;
	size_t len = sizeof(pcori_shm_fast_t) + (ack ? 8 : 0) + plen;
	uint8_t *dst = ring_begin(d, PCORI_SHM_REC_FAST, len, len, true, &rc);
	if (!dst)
		return rc == PCOR_ERR_AGAIN && !fallback ? again(p) : rc;
	pcori_shm_fast_t *rec = (pcori_shm_fast_t *)(void *)dst;
	rec->src_thid = (uint32_t)FIELD(f->src_thid);
	rec->dst_thid = (uint32_t)FIELD(f->dst_thid);
	rec->tag = FIELD(f->tag);
	rec->ctx = FIELD(f->ctx);
	rec->seq = FIELD(f->seq);
	rec->flags = FIELD(f->flags);
	dst += sizeof(*rec);
	if (ack) {
		memcpy(dst, &f->cookie, 8);
		dst += 8;
	}
	pcori_copy_short(dst, payload, plen);
	/* A slot's record (no data) has no spare end: see hop_len. */
	PCORI_HOP_STAMP((uint8_t *)rec - PCORI_SHM_REC_HDR,
			pcori_shm_rec_size(len) > PCORI_SHM_SLOT
				? PCORI_SHM_REC_HDR + len
				: PCORI_SHM_LINE);
	ring_end(d);
	PCORI_HOP(PCORI_HOP_COMMIT);
	return PCOR_OK;
}

/*
 * A fast message that fits a slot (pcori_shm_fast_s_t) goes in one when
 * it is part of a run of sends to d (ring_end): half a line, so a stream
 * moves two per line.  A lone send (a ping-pong's) takes a line of its
 * own, as before slots: in the second slot of the line its peer has just
 * read, the 8-byte one-way time was 2 % longer here, and the 1-byte
 * rate, whose windows wait on a lone acknowledgement, 15 % lower.
 */
static PCORI_ALWAYS_INLINE bool fast_in_slot(const shm_peer_t *d,
					     const pcori_fast_hdr_t *f,
					     size_t plen)
{
	return plen <= PCORI_SHM_FAST_S_MAX && f->flags == PCORI_WF_FAST &&
	       (uint32_t)(f->src_thid | f->dst_thid) <= UINT16_MAX &&
	       atomic_load_explicit(&d->sent_run, memory_order_relaxed);
}

static int fast_put_slot(shm_port_t *p, shm_peer_t *d,
			 const pcori_fast_hdr_t *f, const void *payload,
			 size_t plen)
{
	int rc;
	size_t len = sizeof(pcori_shm_fast_s_t) + plen;
	uint8_t *dst = ring_begin(d, PCORI_SHM_REC_FAST_S, len, len, true, &rc);
	if (!dst)
		return rc == PCOR_ERR_AGAIN ? again(p) : rc;
	pcori_shm_fast_s_t *rec = (pcori_shm_fast_s_t *)(void *)dst;
	rec->src_thid = (uint16_t)FIELD(f->src_thid);
	rec->dst_thid = (uint16_t)FIELD(f->dst_thid);
	rec->tag = FIELD(f->tag);
	rec->ctx = FIELD(f->ctx);
	rec->seq = FIELD(f->seq);
	pcori_copy_short(dst + sizeof(*rec), payload, plen);
	ring_end(d);
	PCORI_HOP(PCORI_HOP_COMMIT);
	return PCOR_OK;
}

/*
 * Copy one message of len bytes to peer d through a run of cells, and
 * announce the run in its ring with a record of kind (waiting for room
 * if wait).
 */
static int cells_put(shm_port_t *p, shm_peer_t *d, uint32_t kind,
		     const struct iovec *iov, size_t niov, size_t len,
		     bool wait)
{
	uint64_t count = (len + p->g.cell_size - 1) / p->g.cell_size;
	if (count > p->g.ncells)
		return PCOR_ERR_BADSIZE;
	uint32_t first;
	shm_copy_plan_t pl = shmp_copy_plan(&p->copy, len);
	room_wait_t w = {0, 0, 0};
	bool got;
	for (;;) {
		pcori_lock(&p->pool_lock);
		got = pool_take(p, (uint32_t)count, shmp_copy_ordinary(&pl),
				&first);
		uint64_t reclaimed = p->pool.reclaimed;
		pcori_unlock(&p->pool_lock);
		if (got || !wait || !room_wait(&w, reclaimed))
			break;
	}
	if (!got)
		return again(p);
	/* The big copy runs outside every lock. */
	shmp_copy(&p->copy, &pl, p->cells + (uint64_t)first * p->g.cell_size,
		  iov, niov, len);
	int rc = PCOR_OK;
	uint8_t *dst = ring_begin(d, kind, len, 8, wait, &rc);
	if (dst) {
		uint64_t run = (uint64_t)count << 32 | first;
		__atomic_store_n((uint64_t *)(void *)dst, run,
				 __ATOMIC_RELAXED);
		ring_end(d);
	}
	pcori_lock(&p->pool_lock);
	if (rc)
		pcori_shm_pool_free(&p->pool, first, (uint32_t)count);
	else
		pcori_shm_pool_publish(&p->pool, first, (uint32_t)count, d);
	pcori_unlock(&p->pool_lock);
	return rc == PCOR_ERR_AGAIN ? again(p) : rc;
}

/* A message meant for the ring that the cells take instead. */
static void spill(shm_port_t *p)
{
	atomic_fetch_add_explicit(&p->base.st.spilled, 1, memory_order_relaxed);
}

/* Copy one message to peer d: inline in its ring, or through cells. */
static int shm_post(shm_port_t *p, shm_peer_t *d, const struct iovec *iov,
		    size_t niov)
{
	size_t len = 0;
	for (size_t i = 0; i < niov; i++)
		len += iov[i].iov_len;
	if (len <= p->inline_max) {
		int rc = ring_put(p, d, PCORI_SHM_REC_INLINE, iov, niov, len);
		if (rc != PCOR_ERR_AGAIN || len <= p->inline_sure)
			return rc == PCOR_ERR_AGAIN ? again(p) : rc;
		spill(p);
	}
	return cells_put(p, d, PCORI_SHM_REC_CELLS, iov, niov, len, false);
}

static int shm_sendv(pcori_port_t *bp, uint64_t dest, const struct iovec *iov,
		     size_t niov, pcori_ctx_t *ctx)
{
	shm_port_t *p = (shm_port_t *)bp;
	if (!shmp_cq_reserve(p))
		return again(p);
	int rc = shm_post(p, (shm_peer_t *)(uintptr_t)dest, iov, niov);
	if (rc) {
		shmp_cq_unreserve(p);
		return rc;
	}
	shmp_cq_push(p, ctx, PCOR_OK);
	return PCOR_OK;
}

static int shm_inject(pcori_port_t *bp, uint64_t dest, const void *buf,
		      size_t len)
{
	if (len > bp->inject_max)
		return PCOR_ERR_BADSIZE;
	struct iovec iov = {(void *)buf, len};
	return shm_post((shm_port_t *)bp, (shm_peer_t *)(uintptr_t)dest, &iov,
			1);
}

/*
 * A fast-path message: one compact record, in a slot or a line of the
 * ring when it fits (past pcori_shm_inline_sure, unless the receiver
 * stops freeing room), else in cells.  Either way the copy is made before
 * returning.
 */
static int shm_inject_fast(pcori_port_t *bp, uint64_t dest, int dst_pid,
			   const pcori_fast_hdr_t *f, const void *payload,
			   size_t plen)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_peer_t *d = (shm_peer_t *)(uintptr_t)dest;
	(void)dst_pid; /* the ring's owner */
	if (fast_in_slot(d, f, plen))
		return fast_put_slot(p, d, f, payload, plen);
	bool ack = f->flags & PCORI_WF_HAS_ACK;
	size_t len = sizeof(pcori_shm_fast_t) + (ack ? 8 : 0) + plen;
	if (PCORI_LIKELY(len <= p->inline_sure))
		return fast_put(p, d, f, ack, payload, plen, false);
	bool wait = true;
	if (len <= p->inline_max) {
		int rc = fast_put(p, d, f, ack, payload, plen, true);
		if (rc != PCOR_ERR_AGAIN)
			return rc;
		/*
		 * The receiver stopped freeing room (room_wait): the cells hold
		 * more such messages, and their record waits no longer.
		 */
		wait = false;
		spill(p);
	}
	const struct iovec iov[3] = {
	    {(void *)f, sizeof(pcori_shm_fast_t)},
	    {(void *)&f->cookie, ack ? 8 : 0},
	    {(void *)payload, plen}};
	return cells_put(p, d, PCORI_SHM_REC_FAST_CELLS, iov, 3, len, wait);
}

/* Live receivers that have not consumed all we wrote to them. */
static size_t shm_unsettled(pcori_port_t *bp)
{
	shm_port_t *p = (shm_port_t *)bp;
	size_t n = 0;
	pcori_lock(&p->peers_lock);
	for (shm_peer_t *d = p->peers; d; d = d->next) {
		pcori_lock(&d->tx_lock);
		if (!d->gone && d->slot >= 0 && !atomic_load(&d->dead) &&
		    atomic_load_explicit(d->ring.head, memory_order_acquire) !=
			d->prod.tail)
			n++;
		pcori_unlock(&d->tx_lock);
	}
	pcori_unlock(&p->peers_lock);
	/* Cell runs a live receiver has not marked consumed. */
	pcori_lock(&p->pool_lock);
	pcori_shm_pool_sweep(&p->pool, true, shmp_cells_free);
	/* Runs held back from lost peers will not settle: not waited for. */
	n += pcori_shm_pool_out(&p->pool, shmp_peer_dead) != 0;
	pcori_unlock(&p->pool_lock);
	return n;
}

/* ------------------------------------------------------ addressing */

static int shm_insert_addr(pcori_port_t *bp, const pcori_port_info_t *peer,
			   uint64_t *dest_p)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_addr_t a;
	int rc = shmp_addr_parse(peer, &a);
	if (rc)
		return rc;
	if (a.pid == pcori_rt.pid)
		return PCOR_ERR_INVAL;
	shm_peer_t *d;
	rc = shmp_peer_get(p, &a, &d);
	if (rc)
		return rc;
	pcori_lock(&d->tx_lock);
	if (d->gone)
		rc = PCOR_ERR_PEER_LOST;
	else if (d->slot < 0)
		rc = shmp_peer_claim(p, d);
	pcori_unlock(&d->tx_lock);
	if (!rc)
		*dest_p = (uint64_t)(uintptr_t)d;
	return rc;
}

/* ------------------------------------------------------ life cycle */

static void shm_close(pcori_port_t *bp)
{
	shm_port_t *p = (shm_port_t *)bp;
	if (p->copy.n)
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "pcor-shm: %llu copies of %d bytes or more into "
			   "cells, %llu of them with non-temporal stores",
			   (unsigned long long)p->copy.n, SHMP_NT_MIN,
			   (unsigned long long)p->copy.n_nt);
	while (p->peers) {
		shm_peer_t *d = p->peers;
		p->peers = d->next;
		if (d->base)
			munmap(d->base, d->size);
		if (d->pidfd >= 0)
			close(d->pidfd);
		free(d);
	}
	if (p->pool.bits)
		pcori_shm_pool_fini(&p->pool);
	free(p->rslots);
	free(p->cq);
	free(p->cq_spare);
	if (p->seg)
		munmap(p->seg, p->g.size);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

static const pcori_port_ops_t shm_ops = {
    .kind = SHM_PROVIDER,
    .insert_addr = shm_insert_addr,
    .sendv = shm_sendv,
    .inject = shm_inject,
    .inject_fast = shm_inject_fast,
    .read = shmp_read,
    .expose = shmp_expose,
    .unexpose = shmp_unexpose,
    .progress = shmp_progress,
    .watch = shmp_watch,
    .progress_watched = shmp_progress_watched,
    .signal = shmp_signal,
    .wait = shmp_wait,
    .unsettled = shm_unsettled,
    .peer_gone = shm_peer_gone,
    .close = shm_close,
};

int pcori_port_shm_open(int index, const pcori_port_params_t *par,
			pcori_port_t **port_p)
{
	const pcori_config_t *cfg = &pcori_rt.cfg;
	shm_port_t *p = calloc(1, sizeof(*p));
	if (!p)
		return PCOR_ERR_NOMEM;
	p->fd = -1;
	shmp_copy_init(&p->copy);
	p->base.ops = &shm_ops;
	p->base.index = index;
	p->base.par = *par;
	pcori_lock_init(&p->base.progress_lock);
	pcori_lock_init(&p->pool_lock);
	pcori_lock_init(&p->cq_lock);
	pcori_lock_init(&p->peers_lock);
	int rc = PCOR_ERR_INVAL;
	const char *step = "geometry";

	pcori_shm_geom_t g = {
	    .nslots = (uint32_t)cfg->shm_peers,
	    .ring_size = (uint32_t)cfg->shm_ring_size,
	    .cell_size = (uint32_t)cfg->shm_cell_size,
	    .ncells = (uint32_t)cfg->shm_cells,
	};
	/* Room for two of the largest fragments, whatever the knobs say. */
	uint64_t fragmax = PCORI_WIRE_HDR_SIZE + par->frag_size;
	uint64_t need = 2 * ((fragmax + g.cell_size - 1) / g.cell_size);
	if (g.ncells < need)
		g.ncells = (uint32_t)PCORI_MIN(need, 65536);
	if (pcori_shm_layout(&g))
		goto err;
	p->g = g;
	p->inline_max = pcori_shm_inline_max(g.ring_size);
	p->inline_sure = pcori_shm_inline_sure(g.ring_size);

	char name[64];
	snprintf(name, sizeof(name), "pcor-shm-%08x-%d",
		 (unsigned)par->key_check, pcori_rt.pid);
	step = "memfd_create";
	rc = PCOR_ERR_SYSTEM;
	p->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->fd < 0)
		goto err_errno;
	step = "ftruncate";
	if (ftruncate(p->fd, (off_t)g.size))
		goto err_errno;
	step = "seal";
	if (fcntl(p->fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err_errno;
	step = "mmap";
	void *m =
	    mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (m == MAP_FAILED)
		goto err_errno;
	p->seg = m;
	step = "getrandom";
	if (getrandom(&p->nonce, sizeof(p->nonce), 0) != sizeof(p->nonce))
		goto err_errno;
	p->key = shmp_key_of(p->nonce);

	pcori_shm_hdr_t *h = m;
	p->hdr = h;
	h->version = PCORI_SHM_VERSION;
	h->key_check = par->key_check;
	h->nonce = p->nonce;
	h->pid = pcori_rt.pid;
	h->ospid = getpid();
	h->base = (uint64_t)(uintptr_t)m;
	h->nslots = g.nslots;
	h->ring_size = g.ring_size;
	h->cell_size = g.cell_size;
	h->ncells = g.ncells;
	/* Sleep often (pcori_fence_choose): ask senders for real fences. */
	p->fenced = !pcori_asym_local || !pcori_asym_global;
	h->fenced = p->fenced;
	h->magic = PCORI_SHM_MAGIC;
	p->owners = (_Atomic uint64_t *)(p->seg + g.off_owner);
	p->heads = (_Atomic uint64_t *)(p->seg + g.off_head);
	p->rings = p->seg + g.off_ring;
	p->cells = p->seg + g.off_cell;

	rc = PCOR_ERR_NOMEM;
	step = "memory";
	p->rslots = calloc(g.nslots, sizeof(*p->rslots));
	p->cq = malloc(SHM_CQ_MAX * sizeof(*p->cq));
	p->cq_spare = malloc(SHM_CQ_MAX * sizeof(*p->cq));
	if (!p->rslots || !p->cq || !p->cq_spare ||
	    pcori_shm_pool_init(&p->pool, g.ncells,
				(_Atomic uint32_t *)(p->seg + g.off_mark)))
		goto err;

	pcori_port_info_t *info = &p->base.info;
	snprintf(info->provider, sizeof(info->provider), "%s", SHM_PROVIDER);
	shmp_network_of(info->network, sizeof(info->network));
	info->link_class = PCORI_LINK_SHM;
	shm_addr_t a = {
	    .magic = PCORI_SHM_ADDR_MAGIC,
	    .nonce = p->nonce,
	    .size = g.size,
	    .pid = pcori_rt.pid,
	    .ospid = getpid(),
	    .fd = p->fd,
	    .version = PCORI_SHM_VERSION,
	};
	memcpy(info->addr, &a, sizeof(a));
	info->addrlen = sizeof(a);
	p->base.inject_max = p->inline_max;
	p->base.wake_word = &h->wake;
	/* What is in a ring is never lost; a test's drops make it lossy. */
	p->base.lossless = !cfg->drop_every;
	p->base.room_from_peer = true;
	p->base.fast_max = SIZE_MAX; /* larger ones go through cells */
	p->base.read_above = (size_t)cfg->shm_eager_max;
	p->base.can_read = shmp_cma_usable();

	PCORI_INFO(PCORI_SUB_DISPATCH,
		   "port %d: pcor-shm segment %s, network %s, %u slots of "
		   "%u-byte rings, %u cells of %u bytes, single copy %s",
		   index, name, info->network, g.nslots, g.ring_size, g.ncells,
		   g.cell_size, p->base.can_read ? "on" : "off");
	*port_p = &p->base;
	return PCOR_OK;

err_errno:
	PCORI_WARN(PCORI_SUB_DISPATCH, "pcor-shm: %s: %s", step,
		   strerror(errno));
	shm_close(&p->base);
	return rc;
err:
	PCORI_WARN(PCORI_SUB_DISPATCH, "pcor-shm: %s: %s", step,
		   pcor_strerror(rc));
	shm_close(&p->base);
	return rc;
}
