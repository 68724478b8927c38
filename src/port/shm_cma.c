/*
 * shm_cma.c -- the pcor-shm port's single copy: a receiver reads a large
 * message straight from its sender's memory with process_vm_readv
 * (cross-memory attach), after Miao et al.  Whether that is allowed at
 * all, reading with the checks a peer that declared us lost needs, and
 * exposing our own buffers (nothing to register).
 */
#include "shm_port.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

/* Copy len bytes from the peer's address space (cross-memory attach). */
int shmp_cma_copy(pid_t pid, void *dst, uint64_t src, size_t len)
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
void shmp_cma_disable(shm_port_t *p, int pid, int rc)
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


int shmp_read(pcori_port_t *bp, uint64_t src, void *dst, size_t len,
		    uint64_t raddr, uint64_t key, pcori_ctx_t *ctx)
{
	shm_port_t *p = (shm_port_t *)bp;
	shm_peer_t *d = (shm_peer_t *)(uintptr_t)src;
	if (!bp->can_read)
		return PCOR_ERR_NOSUPPORT;
	/* Only what this peer exposed on a pcor-shm port. */
	if (key != shmp_key_of(d->nonce))
		return PCOR_ERR_PROTO;
	/*
	 * Counted as a reader before looking at dead (both sequentially
	 * consistent): release_one, which sets dead first, then waits for
	 * us before it unmaps the header read below.
	 */
	atomic_fetch_add(&d->readers, 1);
	int st = PCOR_ERR_PEER_LOST;
	if (!atomic_load(&d->dead) && d->base) {
		/*
		 * The receiver's thread copies now and completes at once: the
		 * protocol calls read holding no lock, and a completion
		 * reported from another thread could finish the rendezvous
		 * (and free it) while the caller is still issuing its next
		 * chunk.  If the peer declared us lost meanwhile, it may have
		 * let go of (and reused) what we read: the read fails.
		 */
		uint32_t before = atomic_load_explicit(&d->hdr->nlost,
						       memory_order_relaxed);
		st = shmp_cma_copy(d->ospid, dst, raddr, len);
		if (st == PCOR_OK &&
		    pcori_shm_lost_since(d->hdr, before, pcori_rt.pid))
			st = PCOR_ERR_PEER_LOST;
	}
	atomic_fetch_sub_explicit(&d->readers, 1, memory_order_release);
	if (st == PCOR_ERR_NOSUPPORT)
		shmp_cma_disable(p, d->pid, st);
	pcori_port_read_done(bp, ctx, st);
	return PCOR_OK;
}

int shmp_expose(pcori_port_t *bp, const void *buf, size_t len,
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

void shmp_unexpose(pcori_port_t *bp, void *reg)
{
	(void)bp;
	(void)reg;
}


/* Is cross-memory attach possible at all?  (Peers are probed later.) */
bool shmp_cma_usable(void)
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
	if (shmp_cma_copy(getpid(), &dst, (uint64_t)(uintptr_t)&src, sizeof(dst)) ||
	    dst != src) {
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "pcor-shm: process_vm_readv unavailable; large "
			   "messages go through cells");
		return false;
	}
	return true;
}
