/*
 * shm_port.h -- the pcor-shm port's own objects, shared by its files:
 * shm.c (segment, sends, peer loss, life cycle), shm_peer.c (peers:
 * addresses, mapping, slots), shm_rx.c (receive slots, draining rings,
 * progress and sleeping in the port), shm_cma.c (single copy) and
 * shm_copy.c (the copy into cells).
 * The lock order is in shm.c's design notes.
 */
#ifndef PCOR_PORT_SHM_PORT_H
#define PCOR_PORT_SHM_PORT_H

#include "port.h"
#include "shm.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHM_PROVIDER	 "pcor-shm"
#define SHM_KEY_SALT	 0x9e3779b97f4a7c15ull
#define SHM_CQ_MAX	 4096	 /* completions queued at once */
#define SHM_DRAIN_BUDGET 64	 /* records per ring per progress call */
#define SHM_RETRY_NS	 1000000 /* retry an unresolvable sender after */
#define SHM_PARK_NS	 100000	 /* retry a refused fast message after */
#define SHM_EXIT_CHECK_NS 10000000 /* look again whether a lost peer ended */

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
	pcori_shm_geom_t g; /* checked copy of its geometry */
	pcori_shm_hdr_t *hdr;
	_Atomic uint32_t *marks; /* its cell pool, for what it sends us */
	uint8_t *cells;
	/* Guards slot, ring, prod and gone. */
	pcori_lock_t tx_lock;
	int slot; /* ours in its segment; -1 none yet */
	pcori_shm_ring_t ring;
	pcori_shm_prod_t prod;
	bool fence; /* a real fence before reading its `sleeping` */
	/*
	 * Records put since progress last took any of its (ring_end): from
	 * the second on, a run of sends, whose ring lines are asked for
	 * ahead.  Cleared by shmp_drain, without tx_lock: a hint, which a
	 * race can only make one prefetch early or late.
	 */
	_Atomic uint32_t sent_run;
	/*
	 * Our receive slot it writes into, once progress resolved it; -1
	 * none (set by progress, read by waiters: shmp_watch).
	 */
	_Atomic int32_t rx_slot;
	bool gone;	       /* released: sends fail, mapping is gone */
	_Atomic bool dead;     /* the directory says it left */
	_Atomic bool released; /* its resources are let go of */
	_Atomic uint32_t readers; /* threads in shm_read on its mapping */
	/*
	 * Whether its process has ended (pool_lock): cells we gave it stay
	 * ours until then (shmp_cells_free), as a process declared lost may
	 * still be running and read them.
	 */
	int pidfd;		/* -1: none, kill(ospid, 0) asks instead */
	bool ended;
	uint64_t ended_check_ns; /* when to ask again */
	struct shm_peer *next; /* in the port's list (peers_lock) */
} shm_peer_t;

/* One receive slot of our segment, as progress sees it (progress only). */
typedef struct shm_rslot {
	shm_peer_t *peer;   /* its sender, once resolved */
	uint64_t head;	    /* total-out, private copy */
	uint64_t published; /* head last stored in shared memory */
	uint64_t retry_ns;  /* unresolvable sender: try again then */
	uint64_t parked_ns; /* head record refused for now: retry then */
	bool broken;	    /* malformed: abandoned until reset */
	/* broken or parked: sleepers need not be woken for it (any thread) */
	_Atomic bool quiet;
} shm_rslot_t;

/*
 * How the port copies into its cells (shm_copy.c): messages of SHMP_NT_MIN
 * bytes or more with non-temporal stores where those are measured cheaper.
 * Below that the copy is too short for its lines' fetch to dominate, and a
 * receiver that reads at once finds them in no cache.
 */
#define SHMP_NT_MIN     8192
#define SHMP_NT_SAMPLES 5 /* kept of each kind; their median decides */
typedef struct shm_copy {
	int force; /* PCOR_SHM_NT_STORES: -1 auto, 0 off, 1 on */
	_Atomic bool nt; /* auto's current choice */
	/*
	 * The last timed samples of each kind ([0] ordinary, [1]
	 * non-temporal), in time-stamp counter ticks, and how many of each
	 * were taken.
	 */
	_Atomic uint32_t ticks[2][SHMP_NT_SAMPLES];
	_Atomic uint32_t nticks[2];
	/* Copies of SHMP_NT_MIN bytes or more; of those non-temporal. */
	_Atomic uint64_t n, n_nt;
} shm_copy_t;

/* How one copy is made: chosen before its cells are taken. */
typedef struct shm_copy_plan {
	bool nt;     /* with non-temporal stores */
	bool timed;  /* beginning with a timed sample... */
	bool sample; /* ...of non-temporal stores (else ordinary ones) */
} shm_copy_plan_t;

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
	uint32_t inline_max, inline_sure; /* pcori_shm_inline_max, _sure */
	bool fenced; /* our segment's `fenced`: sleepers skip membarrier */
	/* The send cell pool. */
	pcori_lock_t pool_lock; /* guards pool */
	pcori_shm_pool_t pool;
	shm_copy_t copy;
	/* Completions of sendv, reported by progress. */
	pcori_lock_t cq_lock; /* guards cq, ncq */
	shm_cqe_t *cq, *cq_spare;
	size_t ncq;
	_Atomic uint32_t cq_used;  /* reserved or queued (bounds ncq) */
	_Atomic uint32_t cq_ready; /* queued, not yet reported */
	/* Peers. */
	pcori_lock_t peers_lock; /* guards peers */
	shm_peer_t *peers;
	_Atomic int ndead; /* dead peers not yet released */
	bool cma_warned;
};

/* --------------------------------------------------------- futexes */

/* The wake word lives in shared memory: no FUTEX_PRIVATE_FLAG. */
static inline void futex_wait_shared(_Atomic uint32_t *w, uint32_t v,
				     int timeout_ms)
{
	struct timespec ts = {timeout_ms / 1000,
			      (timeout_ms % 1000) * 1000000L};
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0);
}

static inline void futex_wake_shared(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/*
 * Wake a receiver that said it sleeps (after a publication): its
 * dispatcher, or the application thread that sleeps there in its place.
 */
static inline void wake_if_sleeping(pcori_shm_hdr_t *h, bool fence)
{
	/*
	 * What we published, before the flag: shmp_wait's other side, which
	 * calls membarrier unless its segment asked us for a real fence.
	 */
	if (fence)
		pcori_fence_full();
	else
		atomic_signal_fence(memory_order_seq_cst);
	if (PCORI_UNLIKELY(
		atomic_load_explicit(&h->sleeping, memory_order_relaxed))) {
		atomic_fetch_add_explicit(&h->wake, 1, memory_order_seq_cst);
		futex_wake_shared(&h->wake);
	}
}

/* The key a peer's reads of our memory must name (shm_expose). */
static inline uint64_t shmp_key_of(uint64_t nonce)
{
	return nonce ^ SHM_KEY_SALT;
}

/* shm_cma.c: single copy */
int shmp_cma_copy(pid_t pid, void *dst, uint64_t src, size_t len);
void shmp_cma_disable(shm_port_t *p, int pid, int rc);
bool shmp_cma_usable(void);
int shmp_read(pcori_port_t *bp, uint64_t src, void *dst, size_t len,
	      uint64_t raddr, uint64_t key, pcori_ctx_t *ctx);
int shmp_expose(pcori_port_t *bp, const void *buf, size_t len,
		uint64_t *raddr_p, uint64_t *key_p, void **reg_p);
void shmp_unexpose(pcori_port_t *bp, void *reg);

/* shm_copy.c: the copy into cells */
void shmp_copy_init(shm_copy_t *c);
/* The plan for the next copy of len bytes. */
shm_copy_plan_t shmp_copy_plan(shm_copy_t *c, size_t len);
/*
 * Does the plan store ordinarily only?  Those stores fetch each line: its
 * cells had better be the ones the receiver read longest ago.  Samples
 * keep to recently read ones, as non-temporal copies may: what ordinary
 * stores cost there says how far the receiver's core is, where long
 * unread cells hide it from the sender (docs/BENCHMARKS.md).
 */
static inline bool shmp_copy_ordinary(const shm_copy_plan_t *pl)
{
	return !pl->nt && !pl->timed;
}
/* Copy the niov pieces, len bytes in all, to dst (fenced on return). */
void shmp_copy(shm_copy_t *c, const shm_copy_plan_t *pl, uint8_t *dst,
	       const struct iovec *iov, size_t niov, size_t len);

/* shm_cq.c: send completions, reported from progress */
bool shmp_cq_reserve(shm_port_t *p);
void shmp_cq_unreserve(shm_port_t *p);
void shmp_cq_push(shm_port_t *p, pcori_ctx_t *ctx, int status);
int shmp_cq_drain(shm_port_t *p);

/* shm_peer.c: peers */
bool shmp_peer_dead(const void *owner);
bool shmp_cells_free(const void *owner);
/* This host's and user's network name, for the port's info. */
void shmp_network_of(char *out, size_t len);
int shmp_addr_parse(const pcori_port_info_t *info, shm_addr_t *a);
/* Under peers_lock. */
shm_peer_t *shmp_peer_find(shm_port_t *p, int pid);
shm_peer_t *shmp_peer_new(shm_port_t *p, int pid);
int shmp_peer_get(shm_port_t *p, const shm_addr_t *a, shm_peer_t **d_p);
int shmp_peer_lookup(shm_port_t *p, int pid, shm_addr_t *a);
/* Claim a receive slot for us in d's segment.  d->tx_lock held. */
int shmp_peer_claim(shm_port_t *p, shm_peer_t *d);

/* shm_rx.c (progress: the port's progress lock held) */
void shmp_rslot_reset(shm_port_t *p, uint32_t s);
int shmp_drain(shm_port_t *p, uint32_t s);
int shmp_release_dead(shm_port_t *p);
int shmp_progress(pcori_port_t *bp, int timeout_ms);
uint64_t shmp_watch(pcori_port_t *bp, uint64_t dest);
int shmp_progress_watched(pcori_port_t *bp, uint64_t token);
void shmp_wait(pcori_port_t *bp, int timeout_ms, _Atomic uint32_t *word,
	       uint32_t value);
void shmp_signal(pcori_port_t *bp);

#endif /* PCOR_PORT_SHM_PORT_H */
