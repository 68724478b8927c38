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
 *  - Sizes.  A message (pcor header included) of up to a quarter ring
 *    goes inline in the ring; a larger one is copied into a run of
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
 *    To sleep it sets `sleeping` (seq_cst), looks again, and waits on the
 *    `wake` futex of its segment; a sender publishes its record (seq_cst)
 *    and then reads `sleeping`, bumping `wake` and calling FUTEX_WAKE only
 *    when it is set.  One of the two always sees the other's store, so no
 *    wake-up is lost and an awake receiver costs its senders no syscall.
 *  - Peers that leave.  The directory hook marks the peer dead; progress
 *    then releases it: senders see `gone` under its tx_lock, its mapping is
 *    dropped, its receive slot here is reset for reuse and the cells it had
 *    not consumed are swept.  Everything read from shared memory (counters,
 *    records, cell runs, headers) is checked before use; a bad ring is
 *    abandoned, never followed.
 *  - Locks (all process-private).  peers_lock guards the peer list;
 *    a peer's tx_lock guards its ring producer state and `gone`; pool_lock
 *    guards the cell pool; cq_lock the completion array.  Order: peers_lock
 *    -> tx_lock; pool_lock and cq_lock are leaves.  progress (one thread,
 *    progress_lock) calls the protocol with none of them held.
 */
#include "../dispatch/dispatch.h"
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHM_PROVIDER "pcor-shm"
#define SHM_KEY_SALT 0x9e3779b97f4a7c15ull
#define SHM_CQ_MAX 4096      /* completions queued at once */
#define SHM_DRAIN_BUDGET 64  /* records per ring per progress call */
#define SHM_RETRY_NS 1000000 /* retry an unresolvable sender after */
#define SHM_PARK_NS 100000   /* retry a refused fast message after */

typedef struct shm_port shm_port_t;

typedef pcori_shm_addr_t shm_addr_t;

/* Another local process: its segment, and our ring in it. */
typedef struct shm_peer {
	int pid;
	pid_t ospid;
	uint64_t nonce;
	/* Written once under peers_lock before the peer is handed out. */
	uint8_t *base;
	size_t size;
	pcori_shm_geom_t g;  /* checked copy of its geometry */
	pcori_shm_hdr_t *hdr;
	_Atomic uint32_t *marks; /* its cell pool, for what it sends us */
	uint8_t *cells;
	/* Guards slot, ring, prod and gone. */
	pcori_lock_t tx_lock;
	int slot;            /* ours in its segment; -1 none yet */
	pcori_shm_ring_t ring;
	pcori_shm_prod_t prod;
	bool gone;           /* released: sends fail, mapping is gone */
	_Atomic bool dead;   /* the directory says it left */
	_Atomic bool released; /* its resources are let go of */
	struct shm_peer *next; /* in the port's list (peers_lock) */
} shm_peer_t;

/* One receive slot of our segment, as progress sees it (progress only). */
typedef struct shm_rslot {
	shm_peer_t *peer; /* its sender, once resolved */
	uint64_t head;    /* total-out, private copy */
	uint64_t published; /* head last stored in shared memory */
	uint64_t retry_ns;  /* unresolvable sender: try again then */
	uint64_t parked_ns; /* head record refused for now: retry then */
	bool broken;      /* malformed: abandoned until reset */
	/* broken or parked: sleepers need not be woken for it (any thread) */
	_Atomic bool quiet;
} shm_rslot_t;

typedef struct shm_cqe {
	pcori_ctx_t *ctx;
	int32_t status;
} shm_cqe_t;

struct shm_port {
	pcori_port_t base;
	int fd;
	uint8_t *seg;
	pcori_shm_hdr_t *hdr;
	pcori_shm_geom_t g;
	_Atomic uint64_t *owners, *heads;
	uint8_t *rings, *cells;
	shm_rslot_t *rslots;
	uint64_t nonce, key;
	uint32_t inline_max;
	/* The send cell pool. */
	pcori_lock_t pool_lock; /* guards pool */
	pcori_shm_pool_t pool;
	/* Completions of sendv, reported by progress. */
	pcori_lock_t cq_lock;   /* guards cq, ncq */
	shm_cqe_t *cq, *cq_spare;
	size_t ncq;
	_Atomic uint32_t cq_used;  /* reserved or queued (bounds ncq) */
	_Atomic uint32_t cq_ready; /* queued, not yet reported */
	/* Peers. */
	pcori_lock_t peers_lock; /* guards peers */
	shm_peer_t *peers;
	_Atomic int ndead;       /* dead peers not yet released */
	bool cma_warned;
};

/* --------------------------------------------------------- futexes */

/* The wake word lives in shared memory: no FUTEX_PRIVATE_FLAG. */
static void futex_wait_shared(_Atomic uint32_t *w, uint32_t v, int timeout_ms)
{
	struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static void futex_wake_shared(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/*
 * Wake a receiver that said it sleeps (after a seq_cst publication): its
 * dispatcher, or the application thread that sleeps there in its place.
 */
static inline void wake_if_sleeping(pcori_shm_hdr_t *h)
{
	if (PCORI_UNLIKELY(atomic_load_explicit(&h->sleeping,
						memory_order_seq_cst))) {
		atomic_fetch_add_explicit(&h->wake, 1, memory_order_seq_cst);
		futex_wake_shared(&h->wake);
	}
}

/* ------------------------------------------------------ completions */

static bool cq_reserve(shm_port_t *p)
{
	if (atomic_fetch_add_explicit(&p->cq_used, 1, memory_order_relaxed) <
	    SHM_CQ_MAX)
		return true;
	atomic_fetch_sub_explicit(&p->cq_used, 1, memory_order_relaxed);
	return false;
}

static void cq_unreserve(shm_port_t *p)
{
	atomic_fetch_sub_explicit(&p->cq_used, 1, memory_order_relaxed);
}

/* Queue a completion whose room was reserved; wake our own progress. */
static void cq_push(shm_port_t *p, pcori_ctx_t *ctx, int status)
{
	pcori_lock(&p->cq_lock);
	PCORI_ASSERT(p->ncq < SHM_CQ_MAX);
	p->cq[p->ncq].ctx = ctx;
	p->cq[p->ncq].status = status;
	p->ncq++;
	/* Counted under the lock: a drain never takes more than it sees. */
	atomic_fetch_add_explicit(&p->cq_ready, 1, memory_order_seq_cst);
	pcori_unlock(&p->cq_lock);
	wake_if_sleeping(p->hdr);
}

static int cq_drain(shm_port_t *p)
{
	if (!atomic_load_explicit(&p->cq_ready, memory_order_acquire))
		return 0;
	pcori_lock(&p->cq_lock);
	shm_cqe_t *v = p->cq;
	size_t n = p->ncq;
	p->cq = p->cq_spare;
	p->cq_spare = v;
	p->ncq = 0;
	atomic_fetch_sub_explicit(&p->cq_ready, (uint32_t)n,
				  memory_order_relaxed);
	pcori_unlock(&p->cq_lock);
	for (size_t i = 0; i < n; i++)
		pcori_port_tx_done(&p->base, v[i].ctx, v[i].status);
	atomic_fetch_sub_explicit(&p->cq_used, (uint32_t)n,
				  memory_order_relaxed);
	return (int)n;
}

/* ------------------------------------------------------------ peers */

static uint64_t key_of(uint64_t nonce)
{
	return nonce ^ SHM_KEY_SALT;
}

static bool peer_gone(const void *owner)
{
	return atomic_load_explicit(&((const shm_peer_t *)owner)->dead,
				    memory_order_acquire);
}

/* Our network: this host (its identity includes the network namespace)
 * and user, who alone can open each other's segments. */
static void network_of(char *out, size_t len)
{
	uint64_t h = 14695981039346656037ull;
	for (const char *c = pcori_rt.host; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	snprintf(out, len, "%s/%016llx-u%u", SHM_PROVIDER,
		 (unsigned long long)h, (unsigned)getuid());
}

static int addr_parse(const pcori_port_info_t *info, shm_addr_t *a)
{
	if (info->addrlen != sizeof(*a))
		return PCOR_ERR_PROTO;
	memcpy(a, info->addr, sizeof(*a));
	if (a->magic != PCORI_SHM_ADDR_MAGIC || a->version != PCORI_SHM_VERSION ||
	    a->pid < 0 || a->ospid <= 0 || a->fd < 0 || !a->size)
		return PCOR_ERR_PROTO;
	return PCOR_OK;
}

/* Copy len bytes from the peer's address space (cross-memory attach). */
static int cma_copy(pid_t pid, void *dst, uint64_t src, size_t len)
{
	size_t done = 0;
	for (int tries = 0; done < len && tries < 64; tries++) {
		struct iovec l = {(char *)dst + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(src + done), len - done};
		ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return PCOR_ERR_PROTO;
		switch (errno) {
		case ESRCH:
			return PCOR_ERR_PEER_LOST;
		case EFAULT:
			return PCOR_ERR_PROTO;
		case EPERM:
		case ENOSYS:
			return PCOR_ERR_NOSUPPORT;
		case ENOMEM:
			return PCOR_ERR_NOMEM;
		default:
			return PCOR_ERR_SYSTEM;
		}
	}
	return done == len ? PCOR_OK : PCOR_ERR_PROTO;
}

/* No more single copy on this port (found refused after start-up). */
static void cma_disable(shm_port_t *p, int pid, int rc)
{
	if (!p->base.can_read)
		return;
	p->base.can_read = false;
	if (!p->cma_warned) {
		p->cma_warned = true;
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "port %d (pcor-shm): cross-memory attach to process "
			   "%d refused (%s): large messages go through cells",
			   p->base.index, pid, pcor_strerror(rc));
	}
}

/*
 * Map peer d's segment described by a, and check it.  peers_lock held.
 * PCOR_ERR_PEER_LOST when the process is gone.
 */
static int peer_map(shm_port_t *p, shm_peer_t *d, const shm_addr_t *a)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)a->ospid, a->fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		/* Its owner keeps the descriptor open while its port lives. */
		if (e == ENOENT || (kill(a->ospid, 0) < 0 && errno == ESRCH))
			return PCOR_ERR_PEER_LOST;
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "pcor-shm: cannot open the segment of process %d "
			   "(%s): %s",
			   a->pid, path, strerror(e));
		return PCOR_ERR_UNREACHABLE;
	}
	/*
	 * The owner sealed the size: it cannot shrink it under our feet
	 * (a mapping past the end would fault with SIGBUS).
	 */
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) || (uint64_t)st.st_size != a->size || seals < 0 ||
	    !(seals & F_SEAL_SHRINK)) {
		close(fd);
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "pcor-shm: segment of process %d is not as announced",
			   a->pid);
		return PCOR_ERR_PROTO;
	}
	void *m = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       0);
	close(fd);
	if (m == MAP_FAILED)
		return PCOR_ERR_NOMEM;
	const pcori_shm_hdr_t *h = m;
	pcori_shm_geom_t g = {
		.nslots = h->nslots,
		.ring_size = h->ring_size,
		.cell_size = h->cell_size,
		.ncells = h->ncells,
	};
	int rc = PCOR_OK;
	if (h->magic != PCORI_SHM_MAGIC || h->version != PCORI_SHM_VERSION ||
	    h->nonce != a->nonce || h->pid != a->pid ||
	    h->key_check != pcori_net.lim.key_check ||
	    pcori_shm_layout(&g) || g.size != a->size)
		rc = PCOR_ERR_PROTO;
	/* Probe cross-memory attach on its header before any rendezvous. */
	if (!rc && p->base.can_read) {
		uint64_t v = 0;
		uint64_t where = *(volatile const uint64_t *)&h->base;
		int crc = cma_copy(a->ospid, &v, where, sizeof(v));
		if (crc == PCOR_ERR_PEER_LOST)
			rc = crc;
		else if (crc || v != PCORI_SHM_MAGIC)
			cma_disable(p, a->pid, crc ? crc : PCOR_ERR_PROTO);
	}
	if (rc) {
		munmap(m, a->size);
		if (rc == PCOR_ERR_PROTO)
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "pcor-shm: segment of process %d failed "
				   "its checks",
				   a->pid);
		return rc;
	}
	d->ospid = a->ospid;
	d->nonce = a->nonce;
	d->size = a->size;
	d->g = g;
	d->hdr = m;
	d->marks = (_Atomic uint32_t *)((uint8_t *)m + g.off_mark);
	d->cells = (uint8_t *)m + g.off_cell;
	d->base = m; /* last: a mapped peer is complete */
	return PCOR_OK;
}

static shm_peer_t *peer_find(shm_port_t *p, int pid)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	for (shm_peer_t *d = p->peers; d; d = d->next)
		if (d->pid == pid)
			return d;
	return NULL;
}

static shm_peer_t *peer_new(shm_port_t *p, int pid)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	shm_peer_t *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->pid = pid;
	d->slot = -1;
	pcori_lock_init(&d->tx_lock);
	d->next = p->peers;
	p->peers = d;
	return d;
}

/* The peer of address a, mapped.  PCOR_OK and *d_p, or an error. */
static int peer_get(shm_port_t *p, const shm_addr_t *a, shm_peer_t **d_p)
{
	int rc = PCOR_OK;
	pcori_lock(&p->peers_lock);
	shm_peer_t *d = peer_find(p, a->pid);
	if (!d)
		d = peer_new(p, a->pid);
	if (!d)
		rc = PCOR_ERR_NOMEM;
	else if (atomic_load(&d->dead))
		rc = PCOR_ERR_PEER_LOST;
	else if (!d->base)
		rc = peer_map(p, d, a);
	pcori_unlock(&p->peers_lock);
	if (!rc)
		*d_p = d;
	return rc;
}

/* The pcor-shm address of pid from the directory (receive side). */
static int peer_lookup(shm_port_t *p, int pid, shm_addr_t *a)
{
	pcori_member_t *m = malloc(sizeof(*m));
	if (!m)
		return PCOR_ERR_NOMEM;
	int rc = pcori_dir_lookup(pid, m);
	if (!rc) {
		rc = PCOR_ERR_UNREACHABLE;
		for (int i = 0; i < m->nports && i < PCORI_MAX_PORTS; i++)
			if (!strcmp(m->ports[i].network, p->base.info.network))
				rc = addr_parse(&m->ports[i], a);
	}
	free(m);
	return rc;
}

/* Claim a receive slot for us in d's segment.  d->tx_lock held. */
static int peer_claim(shm_port_t *p, shm_peer_t *d)
{
	PCORI_ASSERT_LOCKED(&d->tx_lock);
	_Atomic uint64_t *owners =
		(_Atomic uint64_t *)(d->base + d->g.off_owner);
	uint64_t me = (uint64_t)pcori_rt.pid + 1;
	for (uint32_t i = 0; i < d->g.nslots; i++) {
		uint64_t zero = 0;
		if (atomic_load_explicit(&owners[i], memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&owners[i], &zero, me))
			continue;
		d->slot = (int)i;
		d->ring.buf = d->base + d->g.off_ring +
			      (uint64_t)i * d->g.ring_size;
		d->ring.head = (_Atomic uint64_t *)(d->base + d->g.off_head) + i;
		d->ring.size = d->g.ring_size;
		/* A free slot was reset by its receiver: it starts at zero. */
		pcori_shm_prod_init(&d->prod);
		/* Let the receiver's scan reach this slot. */
		uint32_t hwm = atomic_load(&d->hdr->hwm);
		while (hwm < i + 1 &&
		       !atomic_compare_exchange_weak(&d->hdr->hwm, &hwm, i + 1))
			;
		(void)p;
		return PCOR_OK;
	}
	PCORI_WARN(PCORI_SUB_DISPATCH,
		   "pcor-shm: process %d has no free receive slot (%u): raise "
		   "PCOR_SHM_PEERS",
		   d->pid, d->g.nslots);
	return PCOR_ERR_NOMEM;
}

/* Reset receive slot s of our segment for a future sender.  Progress. */
static void rslot_reset(shm_port_t *p, uint32_t s)
{
	shm_rslot_t *rs = &p->rslots[s];
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

static int drain(shm_port_t *p, uint32_t s);

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
		for (uint32_t k = 0; k <= p->g.ring_size / PCORI_SHM_LINE; k++)
			if (rs->broken || !drain(p, s))
				break;
		rslot_reset(p, s);
	}
	if (d->base) {
		munmap(d->base, d->size);
		d->base = NULL;
	}
	atomic_store_explicit(&d->released, true, memory_order_release);
	PCORI_INFO(PCORI_SUB_DISPATCH, "port %d (pcor-shm): process %d released",
		   p->base.index, d->pid);
}

static int release_dead(shm_port_t *p)
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
	/* The cells it had not consumed come back. */
	pcori_lock(&p->pool_lock);
	pcori_shm_pool_sweep(&p->pool, true, peer_gone);
	pcori_unlock(&p->pool_lock);
	return n;
}

/* The directory's membership hook: note deaths; progress releases. */
static pcori_lock_t hook_lock = PCORI_LOCK_INITIALIZER; /* guards live */
static shm_port_t *live;

/*
 * A peer that leaves has usually written its last words (acks, the end
 * of a message) into our ring before the directory tells us, and the
 * protocol fails the peer as soon as this hook returns (ours runs first:
 * it was added when the port opened, before the protocol's).  So see the
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
			release_dead(p);
			pcori_unlock(&p->base.progress_lock);
		} else {
			sched_yield();
		}
	}
}

static void on_member(int pid, pcori_member_event_t ev, void *ctx)
{
	(void)ctx;
	if (ev != PCORI_EV_EXIT && ev != PCORI_EV_FAILURE)
		return;
	pcori_lock(&hook_lock);
	shm_port_t *p = live;
	if (p) {
		pcori_lock(&p->peers_lock);
		/* Made if unknown, so a slot it claimed here is reset too. */
		shm_peer_t *d = peer_find(p, pid);
		if (!d)
			d = peer_new(p, pid);
		if (d && !atomic_exchange(&d->dead, true))
			atomic_fetch_add(&p->ndead, 1);
		pcori_unlock(&p->peers_lock);
		p->base.ops->signal(&p->base);
		if (d)
			release_before_loss(p, d);
	}
	pcori_unlock(&hook_lock);
}

/* ------------------------------------------------------------ sends */

static int again(shm_port_t *p)
{
	atomic_fetch_add_explicit(&p->base.st.eagain, 1, memory_order_relaxed);
	return PCOR_ERR_AGAIN;
}

static void gather(uint8_t *dst, const struct iovec *iov, size_t niov)
{
	for (size_t i = 0; i < niov; i++) {
		if (iov[i].iov_len)
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

/* Take count cells, reclaiming consumed ones first.  pool_lock held. */
static bool pool_take(shm_port_t *p, uint32_t count, uint32_t *first)
{
	pcori_shm_pool_sweep(&p->pool, false, peer_gone);
	if (pcori_shm_pool_alloc(&p->pool, count, first))
		return true;
	pcori_shm_pool_sweep(&p->pool, true, peer_gone);
	return pcori_shm_pool_alloc(&p->pool, count, first);
}

/* Copy len bytes from iov into one record of kind in d's ring. */
static int ring_put(shm_port_t *p, shm_peer_t *d, uint32_t kind,
		    const struct iovec *iov, size_t niov, size_t len)
{
	int rc = PCOR_OK;
	pcori_lock(&d->tx_lock);
	if (PCORI_UNLIKELY(d->gone || d->slot < 0)) {
		rc = PCOR_ERR_PEER_LOST;
	} else {
		uint8_t *dst = pcori_shm_ring_reserve(&d->ring, &d->prod, kind,
						      (uint32_t)len,
						      (uint32_t)len);
		if (dst) {
			gather(dst, iov, niov);
			pcori_shm_ring_commit(&d->ring, &d->prod);
			wake_if_sleeping(d->hdr);
		} else {
			rc = PCOR_ERR_AGAIN;
		}
	}
	pcori_unlock(&d->tx_lock);
	return rc == PCOR_ERR_AGAIN ? again(p) : rc;
}

/*
 * ring_put for a compact record: the fixed parts are copied inline (sizes
 * known here), the payload with one call.
 */
static int fast_put(shm_port_t *p, shm_peer_t *d, const pcori_shm_fast_t *f,
		    const uint64_t *cookie, const void *payload, size_t plen)
{
	size_t len = sizeof(*f) + (cookie ? 8 : 0) + plen;
	int rc = PCOR_OK;
	pcori_lock(&d->tx_lock);
	if (PCORI_UNLIKELY(d->gone || d->slot < 0)) {
		rc = PCOR_ERR_PEER_LOST;
	} else {
		uint8_t *dst = pcori_shm_ring_reserve(&d->ring, &d->prod,
						      PCORI_SHM_REC_FAST,
						      (uint32_t)len,
						      (uint32_t)len);
		if (dst) {
			memcpy(dst, f, sizeof(*f));
			dst += sizeof(*f);
			if (cookie) {
				memcpy(dst, cookie, 8);
				dst += 8;
			}
			if (plen)
				memcpy(dst, payload, plen);
			pcori_shm_ring_commit(&d->ring, &d->prod);
			wake_if_sleeping(d->hdr);
		} else {
			rc = PCOR_ERR_AGAIN;
		}
	}
	pcori_unlock(&d->tx_lock);
	return rc == PCOR_ERR_AGAIN ? again(p) : rc;
}

/* Copy one message to peer d: inline in its ring, or through cells. */
static int shm_post(shm_port_t *p, shm_peer_t *d, const struct iovec *iov,
		    size_t niov)
{
	size_t len = 0;
	for (size_t i = 0; i < niov; i++)
		len += iov[i].iov_len;
	if (len <= p->inline_max)
		return ring_put(p, d, PCORI_SHM_REC_INLINE, iov, niov, len);

	uint64_t count = (len + p->g.cell_size - 1) / p->g.cell_size;
	if (count > p->g.ncells)
		return PCOR_ERR_BADSIZE;
	uint32_t first;
	pcori_lock(&p->pool_lock);
	bool got = pool_take(p, (uint32_t)count, &first);
	pcori_unlock(&p->pool_lock);
	if (!got)
		return again(p);
	/* The big copy runs outside every lock. */
	gather(p->cells + (uint64_t)first * p->g.cell_size, iov, niov);
	int rc = PCOR_OK;
	pcori_lock(&d->tx_lock);
	if (PCORI_UNLIKELY(d->gone || d->slot < 0)) {
		rc = PCOR_ERR_PEER_LOST;
	} else {
		uint8_t *dst = pcori_shm_ring_reserve(&d->ring, &d->prod,
						      PCORI_SHM_REC_CELLS,
						      (uint32_t)len, 8);
		if (dst) {
			uint64_t run = (uint64_t)count << 32 | first;
			__atomic_store_n((uint64_t *)(void *)dst, run,
					 __ATOMIC_RELAXED);
			pcori_shm_ring_commit(&d->ring, &d->prod);
			wake_if_sleeping(d->hdr);
		} else {
			rc = PCOR_ERR_AGAIN;
		}
	}
	pcori_unlock(&d->tx_lock);
	pcori_lock(&p->pool_lock);
	if (rc)
		pcori_shm_pool_free(&p->pool, first, (uint32_t)count);
	else
		pcori_shm_pool_publish(&p->pool, first, (uint32_t)count, d);
	pcori_unlock(&p->pool_lock);
	return rc == PCOR_ERR_AGAIN ? again(p) : rc;
}

static int shm_sendv(pcori_port_t *bp, uint64_t dest, const struct iovec *iov,
		     size_t niov, pcori_ctx_t *ctx)
{
	shm_port_t *p = (shm_port_t *)bp;
	if (!cq_reserve(p))
		return again(p);
	int rc = shm_post(p, (shm_peer_t *)(uintptr_t)dest, iov, niov);
	if (rc) {
		cq_unreserve(p);
		return rc;
	}
	cq_push(p, ctx, PCOR_OK);
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
 * A fast-path message: one compact record when it fits in the ring, else
 * as a whole frame (inline or through cells).  Either way the copy is
 * made before returning.
 */
static int shm_inject_hdr(pcori_port_t *bp, uint64_t dest,
			  const pcori_wire_hdr_t *h, const void *payload)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_peer_t *d = (shm_peer_t *)(uintptr_t)dest;
	const pcori_shm_fast_t f = {
		.src_thid = (uint32_t)h->src_thid,
		.dst_thid = (uint32_t)h->dst_thid,
		.tag = h->tag,
		.ctx = h->ctx,
		.seq = h->seq,
		.flags = h->flags,
	};
	bool ack = h->flags & PCORI_WF_HAS_ACK;
	struct iovec iov[3] = {{(void *)&f, sizeof(f)},
			       {(void *)&h->cookie, ack ? 8 : 0},
			       {(void *)payload, h->frag_len}};
	size_t len = sizeof(f) + iov[1].iov_len + h->frag_len;
	if (PCORI_LIKELY(len <= p->inline_max))
		return fast_put(p, d, &f, ack ? &h->cookie : NULL, payload,
				h->frag_len);
	uint8_t frame[PCORI_WIRE_HDR_SIZE];
	pcori_wire_encode(h, frame);
	iov[0] = (struct iovec){frame, sizeof(frame)};
	iov[1].iov_len = 0;
	return shm_post(p, d, iov, 3);
}

/*
 * Hand up a fast record from peer d: its header is rebuilt from the
 * compact fields and checked as pcori_wire_decode would check a frame's.
 * Returns what pcori_port_recv_hdr does, or -1 when the record is bad.
 */
static int fast_recv(shm_port_t *p, const shm_peer_t *d,
		     const pcori_shm_rec_t *rec)
{
	pcori_shm_fast_t f;
	uint64_t cookie = 0;
	size_t off = sizeof(f);
	if (rec->len < off)
		return -1;
	memcpy(&f, rec->data, sizeof(f)); /* once: the peer may rewrite it */
	if (f.flags & PCORI_WF_HAS_ACK) {
		if (rec->len < off + 8)
			return -1;
		memcpy(&cookie, rec->data + off, 8);
		off += 8;
	}
	uint32_t max = (uint32_t)pcori_rt.max_threads;
	if (f.src_thid >= max || f.dst_thid >= max || f.tag < 0 ||
	    (f.flags & ~(PCORI_WF_FAST | PCORI_WF_HAS_ACK)) ||
	    !(f.flags & PCORI_WF_FAST))
		return -1;
	size_t dlen = rec->len - off;
	const pcori_wire_hdr_t h = {
		.version = PCORI_WIRE_VERSION,
		.type = PCORI_W_DATA,
		.flags = (uint8_t)f.flags,
		.hops = PCORI_WIRE_MAX_HOPS,
		.key_check = pcori_net.lim.key_check,
		.src_pid = d->pid,
		.src_thid = (int32_t)f.src_thid,
		.dst_pid = pcori_rt.pid,
		.dst_thid = (int32_t)f.dst_thid,
		.tag = f.tag,
		.ctx = f.ctx,
		.seq = f.seq,
		.frag_count = 1,
		.frag_len = (uint32_t)dlen,
		.total_size = dlen,
		.cookie = cookie,
	};
	/* One fragment, as any fast message (a frame this long would not be). */
	if (dlen > pcori_net.frag_size)
		return -1;
	return pcori_port_recv_hdr(&p->base, &h, rec->data + off);
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
	pcori_shm_pool_sweep(&p->pool, true, peer_gone);
	n += p->pool.nfree != p->pool.ncells;
	pcori_unlock(&p->pool_lock);
	return n;
}

/* ----------------------------------------------------- single copy */

static int shm_read(pcori_port_t *bp, uint64_t src, void *dst, size_t len,
		    uint64_t raddr, uint64_t key, pcori_ctx_t *ctx)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_peer_t *d = (shm_peer_t *)(uintptr_t)src;
	if (!bp->can_read)
		return PCOR_ERR_NOSUPPORT;
	if (atomic_load_explicit(&d->dead, memory_order_acquire))
		return PCOR_ERR_PEER_LOST;
	/* Only what this peer exposed on a pcor-shm port. */
	if (key != key_of(d->nonce))
		return PCOR_ERR_PROTO;
	/*
	 * The receiver's thread copies now and completes at once: the
	 * protocol calls read holding no lock, and a completion reported
	 * from another thread could finish the rendezvous (and free it)
	 * while the caller is still issuing its next chunk.
	 */
	int st = cma_copy(d->ospid, dst, raddr, len);
	if (st == PCOR_ERR_NOSUPPORT)
		cma_disable(p, d->pid, st);
	pcori_port_read_done(bp, ctx, st);
	return PCOR_OK;
}

static int shm_expose(pcori_port_t *bp, const void *buf, size_t len,
		      uint64_t *raddr_p, uint64_t *key_p, void **reg_p)
{
	shm_port_t *p = (shm_port_t *)bp;
	(void)len;
	if (!bp->can_read)
		return PCOR_ERR_NOSUPPORT;
	/* Nothing to register: the peer reads our address space. */
	*raddr_p = (uint64_t)(uintptr_t)buf;
	*key_p = p->key;
	*reg_p = NULL;
	return PCOR_OK;
}

static void shm_unexpose(pcori_port_t *bp, void *reg)
{
	(void)bp;
	(void)reg;
}

/* --------------------------------------------------------- progress */

/* Resolve the sender of slot s.  false: not now. */
static bool rslot_attach(shm_port_t *p, uint32_t s)
{
	shm_rslot_t *rs = &p->rslots[s];
	if (rs->retry_ns && pcori_now_ns() < rs->retry_ns)
		return false;
	uint64_t owner = atomic_load_explicit(&p->owners[s],
					      memory_order_acquire);
	if (owner == 0 || owner > (uint64_t)INT32_MAX) {
		rs->broken = true;
		atomic_store_explicit(&rs->quiet, true, memory_order_relaxed);
		return false;
	}
	int pid = (int)(owner - 1);
	shm_addr_t a;
	shm_peer_t *d = NULL;
	int rc = peer_lookup(p, pid, &a);
	if (!rc && a.pid != pid)
		rc = PCOR_ERR_PROTO;
	if (!rc)
		rc = peer_get(p, &a, &d);
	if (rc == PCOR_ERR_PEER_LOST) {
		/*
		 * It left while its messages waited.  What is in the ring is
		 * still good (its last words may be there); cell runs in its
		 * segment, which nobody can map any more, are not.
		 */
		pcori_lock(&p->peers_lock);
		d = peer_find(p, pid);
		if (!d)
			d = peer_new(p, pid);
		pcori_unlock(&p->peers_lock);
		if (!d) {
			rslot_reset(p, s);
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
	return true;
}

static void rslot_broken(shm_port_t *p, uint32_t s, const char *why)
{
	p->rslots[s].broken = true;
	atomic_store_explicit(&p->rslots[s].quiet, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->base.st.bad_hdr, 1, memory_order_relaxed);
	PCORI_WARN(PCORI_SUB_DISPATCH,
		   "port %d (pcor-shm): ring of slot %u is malformed (%s): "
		   "abandoned",
		   p->base.index, s, why);
}

/* The record at the ring's head was refused for now: retry later. */
static void park(shm_port_t *p, shm_rslot_t *rs)
{
	rs->parked_ns = pcori_now_ns() + SHM_PARK_NS;
	atomic_store_explicit(&rs->quiet, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->base.st.parked, 1, memory_order_relaxed);
}

/* Hand the records of slot s up to the protocol.  Progress only. */
static int drain(shm_port_t *p, uint32_t s)
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
	while (n < SHM_DRAIN_BUDGET) {
		pcori_shm_rec_t rec;
		uint64_t next;
		int got = pcori_shm_ring_next(&ring, head, &rec, &next);
		if (got < 0) {
			rslot_broken(p, s, "record");
			break;
		}
		if (!got)
			break;
		if (rec.kind == PCORI_SHM_REC_WRAP) {
			head = next;
			continue;
		}
		if (rec.kind == PCORI_SHM_REC_FAST) {
			int r = fast_recv(p, d, &rec);
			if (r < 0) {
				rslot_broken(p, s, "fast record");
				break;
			}
			if (!r) {
				/* No room for it yet: the ring waits. */
				park(p, rs);
				break;
			}
		} else if (rec.kind == PCORI_SHM_REC_INLINE) {
			if (!pcori_port_recv(&p->base, rec.data, rec.len)) {
				park(p, rs);
				break;
			}
		} else {
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
			    rec.count == 0 || rec.count > g->ncells - rec.first ||
			    rec.len > (uint64_t)rec.count * g->cell_size) {
				rslot_broken(p, s, "cell run");
				break;
			}
			if (!pcori_port_recv(&p->base,
					     d->cells + (uint64_t)rec.first *
								g->cell_size,
					     rec.len)) {
				park(p, rs);
				break;
			}
			pcori_shm_mark_done(d->marks, rec.first);
		}
		head = next;
		n++;
		/* Give room back early when a lot was consumed. */
		if (head - rs->published >= p->g.ring_size / 4) {
			atomic_store_explicit(&p->heads[s], head,
					      memory_order_release);
			rs->published = head;
		}
	}
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
			n += drain(p, s);
	}
	return n;
}

static int poll_once(shm_port_t *p)
{
	/* Tested here, not in the callees: most rounds find neither. */
	int n = 0;
	if (PCORI_UNLIKELY(atomic_load_explicit(&p->ndead,
						memory_order_acquire)))
		n += release_dead(p);
	if (atomic_load_explicit(&p->cq_ready, memory_order_acquire))
		n += cq_drain(p);
	return n + scan(p);
}

static int shm_progress(pcori_port_t *bp, int timeout_ms)
{
	shm_port_t *p = (shm_port_t *)bp;
	PCORI_ASSERT_LOCKED(&bp->progress_lock);
	int n = poll_once(p);
	if (n || timeout_ms <= 0)
		return n;
	bp->ops->wait(bp, timeout_ms, NULL, 0);
	return poll_once(p);
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
		if (h % PCORI_SHM_LINE || !pcori_shm_ring_ready(&ring, h))
			continue;
		/* Parked or broken: retried on a timer, not woken for. */
		if (!atomic_load_explicit(&p->rslots[s].quiet,
					  memory_order_relaxed))
			return true;
		*quiet_p = true;
	}
	return false;
}

static void shm_wait(pcori_port_t *bp, int timeout_ms, _Atomic uint32_t *word,
		     uint32_t value)
{
	shm_port_t *p = (shm_port_t *)bp;
	/* Say so first (seq_cst): a sender then sees it, or we see its data. */
	atomic_fetch_add_explicit(&p->hdr->sleeping, 1, memory_order_seq_cst);
	uint32_t w = atomic_load_explicit(&p->hdr->wake, memory_order_seq_cst);
	bool quiet = false;
	if (!arrivals(p, &quiet) && (!word || atomic_load(word) == value))
		futex_wait_shared(&p->hdr->wake, w, quiet ? 1 : timeout_ms);
	atomic_fetch_sub_explicit(&p->hdr->sleeping, 1, memory_order_seq_cst);
}

static void shm_signal(pcori_port_t *bp)
{
	shm_port_t *p = (shm_port_t *)bp;
	atomic_fetch_add_explicit(&p->hdr->wake, 1, memory_order_seq_cst);
	futex_wake_shared(&p->hdr->wake);
}

/* ------------------------------------------------------ addressing */

static int shm_insert_addr(pcori_port_t *bp, const pcori_port_info_t *peer,
			   uint64_t *dest_p)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_addr_t a;
	int rc = addr_parse(peer, &a);
	if (rc)
		return rc;
	if (a.pid == pcori_rt.pid)
		return PCOR_ERR_INVAL;
	shm_peer_t *d;
	rc = peer_get(p, &a, &d);
	if (rc)
		return rc;
	pcori_lock(&d->tx_lock);
	if (d->gone)
		rc = PCOR_ERR_PEER_LOST;
	else if (d->slot < 0)
		rc = peer_claim(p, d);
	pcori_unlock(&d->tx_lock);
	if (!rc)
		*dest_p = (uint64_t)(uintptr_t)d;
	return rc;
}

/* ------------------------------------------------------ life cycle */

static void shm_close(pcori_port_t *bp)
{
	shm_port_t *p = (shm_port_t *)bp;
	pcori_lock(&hook_lock);
	if (live == p)
		live = NULL;
	pcori_unlock(&hook_lock);
	while (p->peers) {
		shm_peer_t *d = p->peers;
		p->peers = d->next;
		if (d->base)
			munmap(d->base, d->size);
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
	.inject_hdr = shm_inject_hdr,
	.read = shm_read,
	.expose = shm_expose,
	.unexpose = shm_unexpose,
	.progress = shm_progress,
	.signal = shm_signal,
	.wait = shm_wait,
	.unsettled = shm_unsettled,
	.close = shm_close,
};

/* Is cross-memory attach possible at all?  (Peers are probed later.) */
static bool cma_startup_check(void)
{
	const char *knob = pcori_rt.cfg.shm_cma;
	if (!strcmp(knob, "off"))
		return false;
	if (strcmp(knob, "auto"))
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "PCOR_SHM_CMA=\"%s\": use auto or off; taken as "
			   "auto",
			   knob);
	/* Yama: scope 1 only lets a process read its descendants. */
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		int scope = 0;
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
		if (scope >= 1) {
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "pcor-shm: ptrace_scope %d forbids "
				   "cross-memory attach; large messages go "
				   "through cells",
				   scope);
			return false;
		}
	}
	/* Seccomp or a kernel without it. */
	uint64_t src = PCORI_SHM_MAGIC, dst = 0;
	if (cma_copy(getpid(), &dst, (uint64_t)(uintptr_t)&src,
		     sizeof(dst)) ||
	    dst != src) {
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "pcor-shm: process_vm_readv unavailable; large "
			   "messages go through cells");
		return false;
	}
	return true;
}

int pcori_port_shm_open(int index, pcori_port_t **port_p)
{
	const pcori_config_t *cfg = &pcori_rt.cfg;
	shm_port_t *p = calloc(1, sizeof(*p));
	if (!p)
		return PCOR_ERR_NOMEM;
	p->fd = -1;
	p->base.ops = &shm_ops;
	p->base.index = index;
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
	uint64_t fragmax = PCORI_WIRE_HDR_SIZE + pcori_net.frag_size;
	uint64_t need = 2 * ((fragmax + g.cell_size - 1) / g.cell_size);
	if (g.ncells < need)
		g.ncells = (uint32_t)PCORI_MIN(need, 65536);
	if (pcori_shm_layout(&g))
		goto err;
	p->g = g;
	p->inline_max = pcori_shm_inline_max(g.ring_size);

	char name[64];
	snprintf(name, sizeof(name), "pcor-shm-%08x-%d",
		 (unsigned)pcori_net.lim.key_check, pcori_rt.pid);
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
	void *m = mmap(NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd,
		       0);
	if (m == MAP_FAILED)
		goto err_errno;
	p->seg = m;
	step = "getrandom";
	if (getrandom(&p->nonce, sizeof(p->nonce), 0) != sizeof(p->nonce))
		goto err_errno;
	p->key = key_of(p->nonce);

	pcori_shm_hdr_t *h = m;
	p->hdr = h;
	h->version = PCORI_SHM_VERSION;
	h->key_check = pcori_net.lim.key_check;
	h->nonce = p->nonce;
	h->pid = pcori_rt.pid;
	h->ospid = getpid();
	h->base = (uint64_t)(uintptr_t)m;
	h->nslots = g.nslots;
	h->ring_size = g.ring_size;
	h->cell_size = g.cell_size;
	h->ncells = g.ncells;
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
	network_of(info->network, sizeof(info->network));
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
	p->base.fast_max = SIZE_MAX; /* larger ones go through cells */
	p->base.can_read = cma_startup_check();

	step = "membership hook";
	pcori_lock(&hook_lock);
	live = p;
	pcori_unlock(&hook_lock);
	rc = pcori_dir_hook_add(on_member, NULL);
	if (rc)
		goto err;
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
