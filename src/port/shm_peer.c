/*
 * shm_peer.c -- the pcor-shm port's peers: their addresses, the mapping
 * of their segments, the receive slot claimed in each, and whether the
 * cells given to one that left may be reused.  Called by shm.c and
 * shm_rx.c; calls only single copy (shm_cma.c), to probe a new peer.
 */
#include "shm_port.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool shmp_peer_dead(const void *owner)
{
	return atomic_load_explicit(&((const shm_peer_t *)owner)->dead,
				    memory_order_acquire);
}

/* Has d's process ended?  Asks the kernel at most every
 * SHM_EXIT_CHECK_NS.  pool_lock held. */
static bool peer_ended(shm_peer_t *d)
{
	if (d->ended)
		return true;
	uint64_t now = pcori_now_ns();
	if (now < d->ended_check_ns)
		return false;
	d->ended_check_ns = now + SHM_EXIT_CHECK_NS;
	if (d->pidfd >= 0) {
		/* Readable once the process has terminated. */
		struct pollfd pf = {.fd = d->pidfd, .events = POLLIN};
		d->ended = poll(&pf, 1, 0) == 1;
	} else {
		/* A reused pid keeps the cells: a leak, never a hazard. */
		d->ended = d->ospid > 0 && kill(d->ospid, 0) < 0 &&
			   errno == ESRCH;
	}
	return d->ended;
}

/*
 * May a cell run given to owner be reused without its DONE mark?  Only
 * once its process has ended: a process declared lost may still be
 * running (stopped, starved) and read the run in place when it resumes,
 * so reusing it would hand it other bytes as the message.  Until then
 * the run is held back (at most what was in flight to it).  pool_lock
 * held.
 */
bool shmp_cells_free(const void *owner)
{
	shm_peer_t *d = (shm_peer_t *)(uintptr_t)owner;
	return shmp_peer_dead(d) && peer_ended(d);
}

/* Our network: this host (its identity includes the network namespace)
 * and user, who alone can open each other's segments. */
void shmp_network_of(char *out, size_t len)
{
	uint64_t h = 14695981039346656037ull;
	for (const char *c = pcori_rt.host; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	snprintf(out, len, "%s/%016llx-u%u", SHM_PROVIDER,
		 (unsigned long long)h, (unsigned)getuid());
}

int shmp_addr_parse(const pcori_port_info_t *info, shm_addr_t *a)
{
	if (info->addrlen != sizeof(*a))
		return PCOR_ERR_PROTO;
	memcpy(a, info->addr, sizeof(*a));
	if (a->magic != PCORI_SHM_ADDR_MAGIC ||
	    a->version != PCORI_SHM_VERSION || a->pid < 0 || a->ospid <= 0 ||
	    a->fd < 0 || !a->size)
		return PCOR_ERR_PROTO;
	return PCOR_OK;
}

/*
 * Map peer d's segment described by a, and check it.  peers_lock held.
 * PCOR_ERR_PEER_LOST when the process is gone.
 */
static int peer_map(shm_port_t *p, shm_peer_t *d, const shm_addr_t *a)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	/*
	 * Opened before the segment, whose nonce then proves this is the
	 * owner's process: how we later learn that it has ended.
	 */
	if (d->pidfd < 0)
		d->pidfd = (int)syscall(SYS_pidfd_open, a->ospid, 0);
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
		PCORI_WARN(
		    PCORI_SUB_DISPATCH,
		    "pcor-shm: segment of process %d is not as announced",
		    a->pid);
		return PCOR_ERR_PROTO;
	}
	void *m =
	    mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
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
	    h->key_check != p->base.par.key_check || pcori_shm_layout(&g) ||
	    g.size != a->size)
		rc = PCOR_ERR_PROTO;
	/* Probe cross-memory attach on its header before any rendezvous. */
	if (!rc && p->base.can_read) {
		uint64_t v = 0;
		uint64_t where = *(volatile const uint64_t *)&h->base;
		int crc = shmp_cma_copy(a->ospid, &v, where, sizeof(v));
		if (crc == PCOR_ERR_PEER_LOST)
			rc = crc;
		else if (crc || v != PCORI_SHM_MAGIC)
			shmp_cma_disable(p, a->pid, crc ? crc : PCOR_ERR_PROTO);
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
	/* Its choice; ours too when we cannot be reached by its membarrier. */
	d->fence = h->fenced != 0 || !pcori_asym_global;
	d->marks = (_Atomic uint32_t *)((uint8_t *)m + g.off_mark);
	d->cells = (uint8_t *)m + g.off_cell;
	d->base = m; /* last: a mapped peer is complete */
	return PCOR_OK;
}

shm_peer_t *shmp_peer_find(shm_port_t *p, int pid)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	for (shm_peer_t *d = p->peers; d; d = d->next)
		if (d->pid == pid)
			return d;
	return NULL;
}

shm_peer_t *shmp_peer_new(shm_port_t *p, int pid)
{
	PCORI_ASSERT_LOCKED(&p->peers_lock);
	shm_peer_t *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->pid = pid;
	d->slot = -1;
	atomic_init(&d->rx_slot, -1);
	d->pidfd = -1;
	pcori_lock_init(&d->tx_lock);
	d->next = p->peers;
	p->peers = d;
	return d;
}

/* The peer of address a, mapped.  PCOR_OK and *d_p, or an error. */
int shmp_peer_get(shm_port_t *p, const shm_addr_t *a, shm_peer_t **d_p)
{
	int rc = PCOR_OK;
	pcori_lock(&p->peers_lock);
	shm_peer_t *d = shmp_peer_find(p, a->pid);
	if (!d)
		d = shmp_peer_new(p, a->pid);
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
int shmp_peer_lookup(shm_port_t *p, int pid, shm_addr_t *a)
{
	pcori_member_t *m = malloc(sizeof(*m));
	if (!m)
		return PCOR_ERR_NOMEM;
	int rc = pcori_dir_lookup(pid, m);
	if (!rc) {
		rc = PCOR_ERR_UNREACHABLE;
		for (int i = 0; i < m->nports && i < PCORI_MAX_PORTS; i++)
			if (!strcmp(m->ports[i].network, p->base.info.network))
				rc = shmp_addr_parse(&m->ports[i], a);
	}
	free(m);
	return rc;
}

/* Claim a receive slot for us in d's segment.  d->tx_lock held. */
int shmp_peer_claim(shm_port_t *p, shm_peer_t *d)
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
		d->ring.buf =
		    d->base + d->g.off_ring + (uint64_t)i * d->g.ring_size;
		d->ring.head =
		    (_Atomic uint64_t *)(d->base + d->g.off_head) + i;
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
