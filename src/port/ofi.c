/*
 * ofi.c -- the libfabric port kind: one RDM endpoint of one provider
 * and domain, its completion queue, pre-posted receive buffers and the
 * registration of the DMA range.
 *
 * Design notes
 *  - One completion queue per port takes sends, receives and reads; each
 *    operation's context starts with a pcori_ctx_t saying what it is.
 *  - Receive buffers are a few large slabs posted with FI_MULTI_RECV when
 *    the provider has it and gets it right (each slab takes many
 *    messages), else many buffers of one fragment each.  The protocol
 *    copies every arrival out before the upcall returns, so a slab is
 *    reposted as soon as the provider releases it.
 *  - The whole DMA range is registered once for remote reads, so a
 *    rendezvous from DMA memory needs no registration at send time.  We
 *    ask only for memory-registration modes that do not pin (no
 *    FI_MR_LOCAL): providers that need them are skipped, and logged.
 *  - -FI_E* codes are translated to pcor statuses here, and the original
 *    logged.
 *  - A port is the provider named in PCOR_PROVIDERS, never a utility
 *    libfabric layers over it to meet our hints (named_in).
 *  - Reads from a process that died: rxm over tcp, and net, fail them
 *    (FI_ECANCELED) once its connection closes, which a killed process's
 *    does at once; net alone keeps them while a dead link holds the
 *    connection open.  rxd never completes, fails or cancels one whose
 *    request its source acknowledged (fi_cancel and fi_av_remove do not
 *    reach it); it ends only with the endpoint.  shm waits for the
 *    source to serve it, forever if the source is dead.  Such ports say
 *    reads_may_hang, and the protocol keeps application buffers off them.
 *  - rxd adds the peers it hears from to its datagram address vector from
 *    inside its progress, while fi_av_insert reads that vector under
 *    another lock (a data race inside libfabric, found by ThreadSanitizer
 *    with a growing vector).  On rxd ports av_lock keeps our completion
 *    reads and our inserts apart; nothing else is done under it.
 */
#include "port.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <time.h>

#define OFI_VERSION FI_VERSION(1, 17)
#define OFI_SLABS 4
#define OFI_SLAB_FRAGS 16
#define OFI_SINGLE_BUFS 64
#define OFI_CQ_BATCH 16
/* Largest fast-path frame (header included) asked of the provider. */
#define OFI_FAST_FRAME 1024

typedef struct ofi_port ofi_port_t;

typedef struct ofi_rxbuf {
	pcori_ctx_t ctx; /* PCORI_CTX_RX */
	ofi_port_t *port;
	void *buf;
	size_t len;
	bool posted;
	bool single; /* takes one message even on a multi-receive port */
} ofi_rxbuf_t;

struct ofi_port {
	pcori_port_t base;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *dma_mr;
	uint64_t dma_key;
	char *dma_base;
	size_t dma_len;
	bool virt_addr;  /* remote addresses are virtual, not offsets */
	bool multi_recv;
	bool waitable;   /* the CQ has a file-descriptor wait object */
	bool av_serial;  /* CQ reads and AV inserts exclude each other */
	bool keep_open;  /* the net provider's: never closed (ofi_close) */
	pcori_lock_t av_lock;
	_Atomic int av_waiters; /* inserts waiting: do not sleep in the CQ */
	int nrx;
	ofi_rxbuf_t *rx;
	int unposted;       /* buffers a full provider refused back */
	bool told_unposted;
	ofi_rxbuf_t rescue; /* drains the provider's queue meanwhile */
	_Atomic uint64_t next_key;
	/*
	 * Lossless ports: completions held back, in order, because the
	 * protocol could not take a fast message yet (the sender kept no
	 * copy, so it must not be dropped).  They are offered again before
	 * the queue is read, no sooner than backlog_ns.
	 */
	struct fi_cq_data_entry backlog[OFI_CQ_BATCH];
	int nbacklog;
	uint64_t backlog_ns;
};

/* How long held-back completions wait before they are offered again. */
#define OFI_BACKLOG_NS 100000

static int fi_status(int fi_rc, const char *what, const ofi_port_t *p)
{
	if (fi_rc == -FI_EAGAIN)
		return PCOR_ERR_AGAIN;
	PCORI_WARN(PCORI_SUB_DISPATCH, "port %d (%s): %s: %s",
		   p ? p->base.index : -1, p ? p->base.info.provider : "?", what,
		   fi_strerror(-fi_rc));
	if (fi_rc == -FI_ENOMEM)
		return PCOR_ERR_NOMEM;
	return PCOR_ERR_FABRIC;
}

static int post_rx(ofi_port_t *p, ofi_rxbuf_t *b)
{
	ssize_t rc = 0;
	/* The queue is sized far above what we post: AGAIN is transient. */
	for (int tries = 0; tries < 1000; tries++) {
		if (!b->single) {
			struct iovec iov = {b->buf, b->len};
			struct fi_msg msg = {.msg_iov = &iov,
					     .iov_count = 1,
					     .addr = FI_ADDR_UNSPEC,
					     .context = &b->ctx};
			rc = fi_recvmsg(p->ep, &msg, FI_MULTI_RECV);
		} else {
			rc = fi_recv(p->ep, b->buf, b->len, NULL,
				     FI_ADDR_UNSPEC, &b->ctx);
		}
		if (rc != -FI_EAGAIN)
			break;
	}
	if (!rc) {
		b->posted = true;
		return PCOR_OK;
	}
	/*
	 * A provider whose receive entries are all taken by unexpected
	 * messages (shm) refuses new buffers: keep this one for a retry
	 * rather than lose it, and say so once.
	 */
	p->unposted++;
	if (!p->told_unposted && b != &p->rescue) {
		p->told_unposted = true;
		return fi_status((int)rc, "post receive (will retry)", p);
	}
	return rc == -FI_EAGAIN ? PCOR_ERR_AGAIN : PCOR_ERR_NOMEM;
}

/*
 * Retry refused buffers.  While multi-receive buffers are refused, a
 * single-message receive still matches an unexpected message without a
 * new provider entry: it frees entries one message at a time.
 */
static void repost_rx(ofi_port_t *p)
{
	int nbuf = p->multi_recv ? OFI_SLABS : OFI_SINGLE_BUFS;
	p->unposted = 0;
	for (int i = 0; i < nbuf; i++)
		if (!p->rx[i].posted)
			post_rx(p, &p->rx[i]);
	if (p->unposted && p->multi_recv && !p->rescue.posted)
		post_rx(p, &p->rescue);
}
static int ofi_insert_addr(pcori_port_t *bp, const pcori_port_info_t *peer,
			   uint64_t *dest_p)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	fi_addr_t a;
	if (p->av_serial) {
		/* A dispatcher asleep in the CQ holds av_lock: cut it short. */
		atomic_fetch_add(&p->av_waiters, 1);
		if (p->waitable)
			fi_cq_signal(p->cq);
		pcori_lock(&p->av_lock);
	}
	int n = fi_av_insert(p->av, peer->addr, 1, &a, 0, NULL);
	if (p->av_serial) {
		pcori_unlock(&p->av_lock);
		atomic_fetch_sub(&p->av_waiters, 1);
	}
	if (n != 1)
		return fi_status(n < 0 ? n : -FI_EINVAL, "av insert", p);
	*dest_p = a;
	return PCOR_OK;
}

/* A send's or inject's return as a status; a full queue is counted. */
static int send_status(ofi_port_t *p, ssize_t rc, const char *what)
{
	if (PCORI_LIKELY(rc == 0))
		return PCOR_OK;
	if (rc == -FI_EAGAIN) {
		atomic_fetch_add_explicit(&p->base.st.eagain, 1,
					  memory_order_relaxed);
		return PCOR_ERR_AGAIN;
	}
	return fi_status((int)rc, what, p);
}

static int ofi_sendv(pcori_port_t *bp, uint64_t dest, const struct iovec *iov,
		     size_t niov, pcori_ctx_t *ctx)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	return send_status(p, fi_sendv(p->ep, iov, NULL, niov, dest, ctx),
			   "send");
}

static int ofi_inject(pcori_port_t *bp, uint64_t dest, const void *buf,
		      size_t len)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	return send_status(p, fi_inject(p->ep, buf, len, dest), "inject");
}

/*
 * A fast-path message: header and payload as one frame, injected (the
 * provider copies it before returning).  Lossless ports only.
 */
static int ofi_inject_fast(pcori_port_t *bp, uint64_t dest, int dst_pid,
			   const pcori_fast_hdr_t *f, const void *payload,
			   size_t plen)
{
	size_t len = PCORI_WIRE_HDR_SIZE + plen;
	if (len > bp->inject_max || len > OFI_FAST_FRAME)
		return PCOR_ERR_AGAIN; /* the full path takes it */
	const pcori_wire_hdr_t h = pcori_fast_wire(
	    f, pcori_rt.pid, dst_pid, plen, bp->par.key_check);
	uint8_t frame[OFI_FAST_FRAME];
	pcori_wire_encode(&h, frame);
	if (plen)
		memcpy(frame + PCORI_WIRE_HDR_SIZE, payload, plen);
	return ofi_inject(bp, dest, frame, len);
}

static int ofi_read(pcori_port_t *bp, uint64_t src, void *dst, size_t len,
		    uint64_t raddr, uint64_t key, pcori_ctx_t *ctx)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	ssize_t rc = fi_read(p->ep, dst, len, NULL, src, raddr, key, ctx);
	if (rc == 0)
		return PCOR_OK;
	if (rc == -FI_EAGAIN)
		return PCOR_ERR_AGAIN;
	return fi_status((int)rc, "read", p);
}

static int ofi_expose(pcori_port_t *bp, const void *buf, size_t len,
		      uint64_t *raddr_p, uint64_t *key_p, void **reg_p)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	const char *b = buf;
	if (p->dma_mr && b >= p->dma_base && len <= p->dma_len &&
	    (size_t)(b - p->dma_base) <= p->dma_len - len) {
		*raddr_p = p->virt_addr ? (uint64_t)(uintptr_t)b
					: (uint64_t)(b - p->dma_base);
		*key_p = p->dma_key;
		*reg_p = NULL;
		return PCOR_OK;
	}
	struct fid_mr *mr;
	uint64_t key = atomic_fetch_add(&p->next_key, 1);
	int rc = fi_mr_reg(p->domain, buf, len ? len : 1, FI_REMOTE_READ, 0,
			   key, 0, &mr, NULL);
	if (rc)
		return fi_status(rc, "register memory", p);
	*raddr_p = p->virt_addr ? (uint64_t)(uintptr_t)b : 0;
	*key_p = fi_mr_key(mr);
	*reg_p = mr;
	return PCOR_OK;
}

static void ofi_unexpose(pcori_port_t *bp, void *reg)
{
	(void)bp;
	if (reg)
		fi_close(&((struct fid_mr *)reg)->fid);
}

/* A receive completed: give its buffer back once the provider has. */
static void rx_done(ofi_port_t *p, ofi_rxbuf_t *b, uint64_t flags)
{
	if (b->single || (flags & FI_MULTI_RECV)) {
		b->posted = false;
		if (b != &p->rescue)
			post_rx(p, b);
	}
}

static void handle_error(ofi_port_t *p)
{
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof(e));
	if (fi_cq_readerr(p->cq, &e, 0) != 1)
		return;
	pcori_ctx_t *ctx = e.op_context;
	if (!ctx)
		return;
	switch (ctx->kind) {
	case PCORI_CTX_RX:
		/* Canceled at close; otherwise keep the buffer posted. */
		if (e.err != FI_ECANCELED && !atomic_load(&p->base.stop)) {
			PCORI_WARN(PCORI_SUB_DISPATCH,
				   "port %d: receive error: %s", p->base.index,
				   fi_strerror(e.err));
			rx_done(p, (ofi_rxbuf_t *)ctx, e.flags);
		}
		break;
	case PCORI_CTX_TX:
	case PCORI_CTX_TXCTL:
		PCORI_INFO(PCORI_SUB_DISPATCH, "port %d: send error: %s",
			   p->base.index, fi_strerror(e.err));
		pcori_port_tx_done(&p->base, ctx, PCOR_ERR_FABRIC);
		break;
	case PCORI_CTX_READ:
		PCORI_INFO(PCORI_SUB_DISPATCH, "port %d: read error: %s",
			   p->base.index, fi_strerror(e.err));
		pcori_port_read_done(&p->base, ctx, PCOR_ERR_FABRIC);
		break;
	}
}

/* One completion read, sleeping up to timeout_ms (0: none). */
static ssize_t cq_read(ofi_port_t *p, struct fi_cq_data_entry *ev,
		       int timeout_ms)
{
	if (p->av_serial) {
		pcori_lock(&p->av_lock);
		if (atomic_load(&p->av_waiters))
			timeout_ms = 0; /* an insert waits for the lock */
	}
	ssize_t n = timeout_ms ? fi_cq_sread(p->cq, ev, OFI_CQ_BATCH, NULL,
					     timeout_ms)
			       : fi_cq_read(p->cq, ev, OFI_CQ_BATCH);
	if (p->av_serial)
		pcori_unlock(&p->av_lock);
	return n;
}

/*
 * Hand n completions to the protocol, in order.  A fast message it cannot
 * take yet stops the run: it and what follows it go to the backlog.
 * Returns how many were handled.
 */
static int deliver(ofi_port_t *p, const struct fi_cq_data_entry *ev, int n)
{
	pcori_port_t *bp = &p->base;
	for (int i = 0; i < n; i++) {
		pcori_ctx_t *ctx = ev[i].op_context;
		switch (ctx->kind) {
		case PCORI_CTX_RX: {
			ofi_rxbuf_t *b = (ofi_rxbuf_t *)ctx;
			const void *data = b->single ? b->buf : ev[i].buf;
			if (ev[i].len && !pcori_port_recv(bp, data, ev[i].len)) {
				/* ev may be the backlog itself: move. */
				memmove(p->backlog, ev + i,
					(size_t)(n - i) * sizeof(*ev));
				p->nbacklog = n - i;
				p->backlog_ns = pcori_now_ns() + OFI_BACKLOG_NS;
				atomic_fetch_add_explicit(&bp->st.parked, 1,
							  memory_order_relaxed);
				return i;
			}
			rx_done(p, b, ev[i].flags);
			break;
		}
		case PCORI_CTX_TX:
		case PCORI_CTX_TXCTL: /* the protocol frees these */
			pcori_port_tx_done(bp, ctx, PCOR_OK);
			break;
		case PCORI_CTX_READ:
			pcori_port_read_done(bp, ctx, PCOR_OK);
			break;
		}
	}
	p->nbacklog = 0;
	return n;
}

static int ofi_progress(pcori_port_t *bp, int timeout_ms)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	struct fi_cq_data_entry ev[OFI_CQ_BATCH];
	ssize_t n;
	if (p->unposted)
		repost_rx(p);
	if (PCORI_UNLIKELY(p->nbacklog)) {
		/* Nothing overtakes what is held back. */
		uint64_t now = pcori_now_ns();
		if (now < p->backlog_ns) {
			if (timeout_ms > 0) {
				uint64_t left = p->backlog_ns - now;
				struct timespec ts = {0, (long)left};
				nanosleep(&ts, NULL);
			}
			return 0;
		}
		int held = p->nbacklog;
		int done = deliver(p, p->backlog, held);
		if (done < held)
			return done;
		return done + ofi_progress(bp, 0);
	}
	if (timeout_ms > 0 && p->waitable) {
		n = cq_read(p, ev, timeout_ms);
	} else {
		n = cq_read(p, ev, 0);
		/*
		 * Without a wait descriptor the provider only moves data when
		 * polled (shm must even answer connection requests that way),
		 * so "blocking" here is polling with short sleeps.
		 */
		if (n == -FI_EAGAIN && timeout_ms > 0) {
			struct timespec ts = {0, pcori_rt.cfg.block_poll_ns};
			nanosleep(&ts, NULL);
			n = cq_read(p, ev, 0);
		}
	}
	if (n <= 0) {
		if (n == -FI_EAVAIL) {
			handle_error(p);
			return 1;
		}
		return 0;
	}
	return deliver(p, ev, (int)n);
}

static void ofi_signal(pcori_port_t *bp)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	if (p->waitable)
		fi_cq_signal(p->cq);
}

/*
 * Ports of the net provider left open at finalize (see ofi_close): kept
 * reachable, with their buffers, until the process ends.
 */
static ofi_port_t *_Atomic kept_open[8];

static void ofi_close(pcori_port_t *bp)
{
	ofi_port_t *p = (ofi_port_t *)bp;
	/*
	 * libfabric 1.17's net provider crashes now and then inside fi_close
	 * of an endpoint whose peers have gone (docs/reliability.md).  Such
	 * an endpoint is left open instead, its receive buffers with it (the
	 * provider may still write into them); the process's end closes its
	 * sockets.  A process that initializes again gets a new endpoint.
	 */
	if (p->ep && p->keep_open) {
		for (size_t i = 0; i < PCORI_ARRAY_LEN(kept_open); i++) {
			ofi_port_t *none = NULL;
			if (atomic_compare_exchange_strong(&kept_open[i], &none,
							   p))
				return;
		}
	}
	if (p->ep)
		fi_close(&p->ep->fid);
	if (p->dma_mr)
		fi_close(&p->dma_mr->fid);
	if (p->cq)
		fi_close(&p->cq->fid);
	if (p->av)
		fi_close(&p->av->fid);
	if (p->domain)
		fi_close(&p->domain->fid);
	if (p->fabric)
		fi_close(&p->fabric->fid);
	if (p->rx) {
		int nbuf = p->multi_recv ? OFI_SLABS : OFI_SINGLE_BUFS;
		for (int i = 0; i < nbuf; i++)
			free(p->rx[i].buf);
		free(p->rx);
	}
	free(p->rescue.buf);
	if (p->info)
		fi_freeinfo(p->info);
	free(p);
}

static const pcori_port_ops_t ofi_ops = {
	.kind = "ofi",
	.insert_addr = ofi_insert_addr,
	.sendv = ofi_sendv,
	.inject = ofi_inject,
	.inject_fast = ofi_inject_fast,
	.read = ofi_read,
	.expose = ofi_expose,
	.unexpose = ofi_unexpose,
	.progress = ofi_progress,
	.signal = ofi_signal,
	.close = ofi_close,
};

/*
 * Reliable endpoints that deliver in order and never drop what they
 * accepted: the fast path may use them.  Not rxd over udp (its window
 * has stalled and it has delivered damaged frames here), nor the
 * deprecated sockets provider.
 */
static bool lossless_provider(const char *prov)
{
	return strstr(prov, "ofi_rxm") || !strcmp(prov, "shm") ||
	       !strcmp(prov, "net");
}

static pcori_link_class_t link_class_of(const char *prov)
{
	if (!strncmp(prov, "shm", 3))
		return PCORI_LINK_SHM;
	if (!strncmp(prov, "udp", 3))
		return PCORI_LINK_UDP;
	if (!strncmp(prov, "tcp", 3) || !strncmp(prov, "net", 3) ||
	    !strncmp(prov, "sockets", 7))
		return PCORI_LINK_TCP;
	return PCORI_LINK_RDMA;
}

/*
 * A network reachable only from this host names the host too (as a hash
 * of its identity, to keep the string short).
 */
static void network_of(const struct fi_info *fi, const char *prov,
		       const char *host, char *out, size_t len)
{
	const char *fab = fi->fabric_attr->name ? fi->fabric_attr->name : "";
	bool host_local = !strncmp(prov, "shm", 3) ||
			  !strncmp(fab, "127.", 4) || !strcmp(fab, "::1/128");
	if (host_local) {
		uint64_t h = 14695981039346656037ull;
		for (const char *c = host; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
		snprintf(out, len, "%.32s/%.40s@%016llx", prov, fab,
			 (unsigned long long)h);
	} else {
		snprintf(out, len, "%.32s/%.60s", prov, fab);
	}
}

static struct fi_info *make_hints(const char *provider, bool multi_recv)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_REMOTE_READ;
	if (multi_recv)
		h->caps |= FI_MULTI_RECV;
	h->mode = 0;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY |
				  FI_MR_ALLOCATED;
	h->fabric_attr->prov_name = strdup(provider);
	return h;
}

/*
 * Is this domain wanted by PCOR_IFACES (comma list)?  Empty: all of them,
 * or, for a job that runs on one host, only those that stay on it (a
 * device port would only add a dispatcher competing for the cores).
 */
static bool iface_wanted(const struct fi_info *fi, bool one_host)
{
	const char *want = pcori_rt.cfg.ifaces;
	const char *domain = fi->domain_attr->name;
	if (!want[0] && one_host) {
		const char *fab = fi->fabric_attr->name ? fi->fabric_attr->name
							: "";
		return !strncmp(fab, "127.", 4) || !strcmp(fab, "shm") ||
		       (domain && !strcmp(domain, "lo")) ||
		       !fi->fabric_attr->name;
	}
	if (!want[0] || !domain)
		return true;
	size_t n = strlen(domain);
	for (const char *s = want; *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l == n && !strncmp(s, domain, n))
			return true;
		s = e ? e + 1 : s + l;
	}
	return false;
}

static int open_one(struct fi_info *fi, const char *provider, int index,
		    const pcori_port_params_t *par, pcori_port_t **port_p)
{
	ofi_port_t *p = calloc(1, sizeof(*p));
	if (!p)
		return PCOR_ERR_NOMEM;
	p->base.ops = &ofi_ops;
	p->base.index = index;
	p->base.par = *par;
	pcori_lock_init(&p->base.progress_lock);
	pcori_lock_init(&p->av_lock);
	atomic_init(&p->av_waiters, 0);
	atomic_init(&p->next_key, 1000);
	p->info = fi_dupinfo(fi);
	p->virt_addr = fi->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	/*
	 * rxd (libfabric 1.17) hands out frames of a multi-receive slab after
	 * releasing it: under load we saw truncated and corrupted frames.
	 * net (1.17) now and then reports a message at the wrong place in a
	 * slab: under 4 x 250 threads all to all, one in a few runs got a
	 * "message" whose first 44 bytes were the tail of the frame before
	 * it, and the frame it should have been was lost (a fast one: its
	 * stream hung).  Both get single-fragment buffers.
	 */
	p->multi_recv = (fi->caps & FI_MULTI_RECV) &&
			!strstr(provider, "rxd") && strcmp(provider, "net");
	p->av_serial = strstr(provider, "rxd") != NULL;
	/*
	 * Reads a dead source never ends (1.17): rxd moves a read whose
	 * request its source acknowledged onto a list that only closing the
	 * endpoint empties, and still copies in data already received for
	 * it; shm has the source process itself copy the data into us and
	 * then answer; net alone keeps a read whose source's link went down
	 * until TCP gives up on the connection, many minutes later (rxm over
	 * it failed them within the peer timeout).
	 */
	p->base.reads_may_hang = strstr(provider, "rxd") != NULL ||
				 !strncmp(provider, "shm", 3) ||
				 !strcmp(provider, "net");
	int rc;
	const char *step;

	step = "fabric";
	if ((rc = fi_fabric(fi->fabric_attr, &p->fabric, NULL)))
		goto err;
	step = "domain";
	if ((rc = fi_domain(p->fabric, fi, &p->domain, NULL)))
		goto err;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	step = "address vector";
	if ((rc = fi_av_open(p->domain, &av_attr, &p->av, NULL)))
		goto err;
	/* A descriptor to sleep on where the provider has one. */
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = FI_WAIT_FD,
		.size = fi->tx_attr->size + fi->rx_attr->size + 64,
	};
	step = "completion queue";
	if (fi_cq_open(p->domain, &cq_attr, &p->cq, NULL)) {
		cq_attr.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL)))
			goto err;
	} else {
		int fd = -1;
		p->waitable = fi_control(&p->cq->fid, FI_GETWAIT, &fd) == 0 &&
			      fd >= 0;
		if (!p->waitable) {
			fi_close(&p->cq->fid);
			cq_attr.wait_obj = FI_WAIT_NONE;
			if ((rc = fi_cq_open(p->domain, &cq_attr, &p->cq,
					     NULL)))
				goto err;
		}
	}
	step = "endpoint";
	if ((rc = fi_endpoint(p->domain, fi, &p->ep, NULL)))
		goto err;
	if ((rc = fi_ep_bind(p->ep, &p->av->fid, 0)) ||
	    (rc = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)))
		goto err;
	size_t msgmax = PCORI_WIRE_HDR_SIZE + par->frag_size;
	/*
	 * The threshold belongs before fi_enable, except that shm (up to
	 * libfabric 2.0) crashes there and only honours it afterwards.
	 */
	bool shm = !strncmp(provider, "shm", 3);
	step = "multi-receive threshold";
	if (p->multi_recv && !shm &&
	    (rc = fi_setopt(&p->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			    &msgmax, sizeof(msgmax))))
		goto err;
	step = "enable";
	if ((rc = fi_enable(p->ep)))
		goto err;
	step = "multi-receive threshold";
	if (p->multi_recv && shm &&
	    (rc = fi_setopt(&p->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			    &msgmax, sizeof(msgmax))))
		goto err;

	/* The DMA range, for remote reads of rendezvous data. */
	void *dbase;
	size_t dlen;
	pcori_dma_range(&dbase, &dlen);
	step = "register DMA memory";
	if ((rc = fi_mr_reg(p->domain, dbase, dlen, FI_REMOTE_READ, 0, 1, 0,
			    &p->dma_mr, NULL)))
		goto err;
	p->dma_key = fi_mr_key(p->dma_mr);
	p->dma_base = dbase;
	p->dma_len = dlen;

	int nbuf = p->multi_recv ? OFI_SLABS : OFI_SINGLE_BUFS;
	size_t blen = p->multi_recv ? msgmax * OFI_SLAB_FRAGS : msgmax;
	p->rx = calloc((size_t)nbuf, sizeof(*p->rx));
	if (!p->rx) {
		rc = -FI_ENOMEM;
		goto err;
	}
	for (int i = 0; i < nbuf; i++) {
		p->rx[i].ctx.kind = PCORI_CTX_RX;
		p->rx[i].port = p;
		p->rx[i].len = blen;
		p->rx[i].single = !p->multi_recv;
		p->rx[i].buf = aligned_alloc(PCORI_CACHELINE, blen);
		if (!p->rx[i].buf) {
			rc = -FI_ENOMEM;
			goto err;
		}
		/*
		 * A slab fills in order, a page at a time: touched now, its
		 * pages are not faulted in under the first messages (15 us a
		 * page on a paravirtual guest).
		 */
		if (p->multi_recv)
			memset(p->rx[i].buf, 0, blen);
		int prc = post_rx(p, &p->rx[i]);
		if (prc) {
			ofi_close(&p->base);
			return prc;
		}
	}
	p->rescue = (ofi_rxbuf_t){.ctx.kind = PCORI_CTX_RX,
				  .port = p,
				  .len = msgmax,
				  .single = true};
	if (p->multi_recv &&
	    !(p->rescue.buf = aligned_alloc(PCORI_CACHELINE, msgmax))) {
		rc = -FI_ENOMEM;
		goto err;
	}

	pcori_port_info_t *info = &p->base.info;
	snprintf(info->provider, sizeof(info->provider), "%s", provider);
	network_of(fi, provider, pcori_rt.host, info->network,
		   sizeof(info->network));
	info->link_class = (uint8_t)link_class_of(provider);
	size_t alen = sizeof(info->addr);
	step = "get address";
	if ((rc = fi_getname(&p->ep->fid, info->addr, &alen)))
		goto err;
	info->addrlen = (uint16_t)alen;
	p->base.inject_max = fi->tx_attr->inject_size;
	p->base.can_read = (fi->caps & FI_READ) != 0;
	p->base.lossless = lossless_provider(provider) &&
			   !pcori_rt.cfg.drop_every;
	/* "net" alone or under a utility provider ("net;ofi_rxm"). */
	p->keep_open = !strncmp(provider, "net", 3) &&
		       (provider[3] == '\0' || provider[3] == ';');
	size_t frame = PCORI_MIN(p->base.inject_max, (size_t)OFI_FAST_FRAME);
	p->base.fast_max = p->base.lossless && frame > PCORI_WIRE_HDR_SIZE
				   ? frame - PCORI_WIRE_HDR_SIZE
				   : 0;
	p->base.read_above = SIZE_MAX; /* PCOR_EAGER_MAX decides */
	/* The provider as libfabric opened it (tests check the name). */
	PCORI_INFO(PCORI_SUB_DISPATCH,
		   "port %d: %s domain %s network %s, %s receive buffers, "
		   "%s, fast path up to %zu bytes",
		   index, fi->fabric_attr->prov_name, fi->domain_attr->name,
		   info->network, p->multi_recv ? "multi" : "single",
		   p->waitable ? "waits on a descriptor" : "waits by polling",
		   p->base.fast_max);
	*port_p = &p->base;
	return PCOR_OK;
err:;
	int st = fi_status(rc, step, p);
	ofi_close(&p->base);
	return st;
}

/*
 * Does info hold the provider as named?  libfabric answers hints it
 * cannot meet natively with a utility layered over the named provider
 * ("net" asked for a 1 KiB inject comes back as "net;ofi_rxm"): a port
 * must be the provider the user named, or the one the measurements were
 * taken on.
 */
static bool named_in(const struct fi_info *info, const char *provider)
{
	for (const struct fi_info *fi = info; fi; fi = fi->next)
		if (fi->fabric_attr->prov_name &&
		    !strcmp(fi->fabric_attr->prov_name, provider))
			return true;
	return false;
}

int pcori_port_ofi_open(const char *provider, int index,
			const pcori_port_params_t *par,
			pcori_port_t **ports_p, int max, int *n_p)
{
	struct fi_info *info = NULL;
	int rc = -FI_ENODATA;
	*n_p = 0;
	/*
	 * rxd reads its window once, when libfabric first loads providers.
	 * With its default of 128 packets, two processes sending both ways
	 * on loopback stall (each side's transmit queue stays full); 32
	 * keeps it moving.  A value the user set wins.
	 */
	if (pcori_rt.cfg.rxd_window > 0) {
		char w[16];
		snprintf(w, sizeof(w), "%d", (int)pcori_rt.cfg.rxd_window);
		setenv("FI_OFI_RXD_MAX_UNACKED", w, 0);
	}
	/*
	 * Multi-receive slabs where the provider has them; injects of a
	 * fast-path frame where it can take them (rxm reports 64 bytes
	 * unless asked).  Hints only the named provider itself meets: net
	 * asked for more than its 128-byte inject came back under rxm,
	 * whose own layer cost about 1 us a message on loopback, and whose
	 * 12 MiB completion ring, touched a page at a time over its first
	 * 260,000 completions, stalled about one message in thirty.
	 */
	for (int v = 3; v >= 0 && rc; v--) {
		struct fi_info *h = make_hints(provider, v & 1);
		if (!h)
			return PCOR_ERR_NOMEM;
		if (v & 2)
			h->tx_attr->inject_size = OFI_FAST_FRAME;
		rc = fi_getinfo(OFI_VERSION, NULL, NULL, 0, h, &info);
		fi_freeinfo(h);
		if (!rc && !named_in(info, provider)) {
			fi_freeinfo(info);
			info = NULL;
			rc = -FI_ENODATA;
		}
	}
	if (rc) {
		PCORI_INFO(PCORI_SUB_DISPATCH, "provider %s: not usable: %s",
			   provider, fi_strerror(-rc));
		return PCOR_ERR_NOSUPPORT;
	}
	/* One port per domain; IPv4 before IPv6 duplicates of it. */
	int n = 0;
	char seen[PCORI_MAX_PORTS][64];
	for (struct fi_info *fi = info; fi && n < max; fi = fi->next) {
		const char *dom = fi->domain_attr->name;
		const char *name = fi->fabric_attr->prov_name;
		if (!iface_wanted(fi, par->one_host) || !name ||
		    strcmp(name, provider))
			continue;
		if (fi->addr_format == FI_SOCKADDR_IN6)
			continue;
		bool dup = false;
		for (int i = 0; i < n; i++)
			dup |= !strcmp(seen[i], dom ? dom : "");
		if (dup)
			continue;
		pcori_port_t *p;
		if (open_one(fi, provider, index + n, par, &p) == PCOR_OK) {
			snprintf(seen[n], sizeof(seen[n]), "%s", dom ? dom : "");
			ports_p[n++] = p;
		}
	}
	fi_freeinfo(info);
	*n_p = n;
	return n ? PCOR_OK : PCOR_ERR_NOSUPPORT;
}
