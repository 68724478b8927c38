/*
 * peer.c -- the peer table: one object per other process, made on first
 * use, with its route (port and fabric address) and its streams; and what
 * happens when a peer is lost.
 *
 * Design notes: the table is an array indexed by pid that only grows.
 * Readers load the array pointer without a lock; a grown copy replaces it
 * and old copies are kept until finalize, so a reader never sees freed
 * memory.  Peer objects are never freed before finalize either.
 */
#include "dispatch.h"

typedef struct retired {
	struct retired *next;
	pcori_peer_t **arr;
} retired_t;
static retired_t *retired_arrays; /* guarded by pcori_net.peers_lock */

static pcori_peer_t *peer_new(int pid)
{
	pcori_peer_t *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	pcori_lock_init(&p->lock);
	pcori_lock_init(&p->rx_lock);
	pcori_list_init(&p->acks);
	p->tx = calloc((size_t)pcori_rt.max_threads, sizeof(*p->tx));
	p->rx = calloc((size_t)pcori_rt.max_threads, sizeof(*p->rx));
	if (!p->tx || !p->rx) {
		free((void *)p->tx);
		free(p->rx);
		free(p);
		return NULL;
	}
	return p;
}

pcori_peer_t *pcori_peer_get(int pid)
{
	if (pid < 0 || pid >= pcori_rt.nprocs || pid == pcori_rt.pid)
		return NULL;
	int n = atomic_load_explicit(&pcori_net.npeers, memory_order_acquire);
	pcori_peer_t **arr = atomic_load_explicit(&pcori_net.peers,
						  memory_order_acquire);
	if (PCORI_LIKELY(pid < n && arr[pid]))
		return arr[pid];

	pcori_lock(&pcori_net.peers_lock);
	n = atomic_load(&pcori_net.npeers);
	arr = atomic_load(&pcori_net.peers);
	if (pid >= n) {
		int cap = n ? n : 16;
		while (cap <= pid)
			cap *= 2;
		pcori_peer_t **bigger = calloc((size_t)cap, sizeof(*bigger));
		retired_t *r = malloc(sizeof(*r));
		if (!bigger || !r) {
			free(bigger);
			free(r);
			pcori_unlock(&pcori_net.peers_lock);
			return NULL;
		}
		if (arr)
			memcpy(bigger, arr, sizeof(*arr) * (size_t)n);
		r->arr = arr;
		r->next = retired_arrays;
		retired_arrays = r;
		atomic_store_explicit(&pcori_net.peers, bigger,
				      memory_order_release);
		atomic_store_explicit(&pcori_net.npeers, cap,
				      memory_order_release);
		arr = bigger;
	}
	if (!arr[pid])
		arr[pid] = peer_new(pid);
	pcori_peer_t *p = arr[pid];
	pcori_unlock(&pcori_net.peers_lock);
	return p;
}

/* Pick our first port that shares a network with one of the peer's. */
static int route(pcori_peer_t *peer, const pcori_member_t *m)
{
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		for (int j = 0; j < m->nports; j++) {
			if (strcmp(p->info.network, m->ports[j].network))
				continue;
			uint64_t dest;
			int rc = p->ops->insert_addr(p, &m->ports[j], &dest);
			if (rc)
				return rc;
			peer->dest = dest;
			peer->port = p;
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "peer %d: reached through port %d (%s)",
				   peer->pid, p->index, p->info.network);
			return PCOR_OK;
		}
	}
	return PCOR_ERR_UNREACHABLE;
}

int pcori_peer_ready(pcori_peer_t *peer)
{
	int st = atomic_load_explicit(&peer->state, memory_order_acquire);
	if (PCORI_LIKELY(st == PCORI_PEER_READY))
		return PCOR_OK;
	if (st == PCORI_PEER_LOST)
		return PCOR_ERR_PEER_LOST;
	int rc;
	pcori_lock(&peer->lock);
	st = atomic_load(&peer->state);
	if (st == PCORI_PEER_NEW) {
		pcori_member_t *m = malloc(sizeof(*m));
		rc = m ? pcori_dir_lookup(peer->pid, m) : PCOR_ERR_NOMEM;
		if (rc == PCOR_OK)
			rc = route(peer, m);
		free(m);
		if (rc == PCOR_OK)
			atomic_store(&peer->state, PCORI_PEER_READY);
		else if (rc == PCOR_ERR_PEER_LOST)
			atomic_store(&peer->state, PCORI_PEER_LOST);
	} else {
		rc = st == PCORI_PEER_READY ? PCOR_OK : PCOR_ERR_PEER_LOST;
	}
	pcori_unlock(&peer->lock);
	return rc;
}

/* Posted receives naming the lost pid can never be satisfied now. */
static void fail_posted(int pid)
{
	for (int t = 0; t < pcori_msg.nmq; t++) {
		pcori_mq_t *mq = &pcori_msg.mqs[t];
		pcori_list_t gone;
		pcori_list_init(&gone);
		pcori_lock(&mq->lock);
		pcori_list_t *pos, *tmp;
		pcori_list_foreach_safe(pos, tmp, &mq->posted)
		{
			pcori_req_t *r = PCORI_CONTAINER_OF(pos, pcori_req_t,
							    link);
			if (r->pid == pid) {
				pcori_list_remove(pos);
				mq->nposted--;
				pcori_list_push_back(&gone, pos);
			}
		}
		pcori_unlock(&mq->lock);
		while (!pcori_list_empty(&gone)) {
			pcori_list_t *n = gone.next;
			pcori_list_remove(n);
			pcori_req_complete(PCORI_CONTAINER_OF(n, pcori_req_t,
							      link),
					   PCOR_ERR_PEER_LOST);
		}
	}
}

void pcori_peer_lost(int pid)
{
	if (!pcori_net.up || pid == pcori_rt.pid)
		return;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer)
		return;
	if (atomic_exchange(&peer->leave_ns, 0))
		atomic_fetch_sub(&pcori_net.nleaving, 1);
	if (atomic_exchange(&peer->state, PCORI_PEER_LOST) == PCORI_PEER_LOST)
		return;
	PCORI_INFO(PCORI_SUB_DISPATCH, "peer %d lost: failing what involves it",
		   pid);
	for (int t = 0; t < pcori_rt.max_threads; t++) {
		pcori_txstream_t *ts = atomic_load(&peer->tx[t]);
		if (ts)
			pcori_txstream_fail(ts);
	}
	pcori_rx_fail(peer);
	fail_posted(pid);
	pcori_spawn_peer_lost(pid);
}

/* Long enough for anything the leaver sent to have arrived. */
#define LEAVE_GRACE_NS 2000000000ull

void pcori_peer_leaving(int pid)
{
	if (!pcori_net.up)
		return;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer || atomic_load(&peer->state) == PCORI_PEER_LOST)
		return;
	uint64_t zero = 0;
	if (atomic_compare_exchange_strong(&peer->leave_ns, &zero,
					   pcori_now_ns() + LEAVE_GRACE_NS))
		atomic_fetch_add(&pcori_net.nleaving, 1);
	pcori_dispatch_kick();
}

int pcori_peers_reap(void)
{
	if (!atomic_load_explicit(&pcori_net.nleaving, memory_order_relaxed))
		return 0;
	int n = 0, np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **arr = atomic_load(&pcori_net.peers);
	uint64_t now = pcori_now_ns();
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = arr[i];
		uint64_t t = p ? atomic_load(&p->leave_ns) : 0;
		if (t && t <= now) {
			pcori_peer_lost(p->pid);
			n++;
		}
	}
	return n;
}

void pcori_peers_bye(void)
{
	int np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **arr = atomic_load(&pcori_net.peers);
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = arr[i];
		if (p && atomic_load(&p->state) == PCORI_PEER_READY)
			pcori_ctrl_send(p, PCORI_CTRL_BYE, NULL, 0);
	}
}

/* Free one peer and what it still holds (finalize: ports are closed). */
static void peer_free(pcori_peer_t *p)
{
	for (int t = 0; t < pcori_rt.max_threads; t++) {
		pcori_txstream_t *ts = atomic_load(&p->tx[t]);
		if (ts) {
			pcori_list_t *lists[] = {&ts->sent, &ts->waiting,
						 &ts->waiting_fin,
						 &ts->orphans};
			for (int i = 0; i < 4; i++)
				while (!pcori_list_empty(lists[i])) {
					pcori_list_t *n = lists[i]->next;
					pcori_list_remove(n);
					pcori_txmsg_t *m = PCORI_CONTAINER_OF(
						n, pcori_txmsg_t, link);
					if (m->flags & PCORI_TXM_OWNDMA)
						pcori_dma_free(m->data);
					free(m);
				}
			free(ts);
		}
		pcori_rxstream_t *rs = p->rx[t];
		if (rs) {
			while (!pcori_list_empty(&rs->held)) {
				pcori_list_t *n = rs->held.next;
				pcori_list_remove(n);
				free(n); /* the link is a held frame's first field */
			}
			if (rs->active && rs->req && rs->req->buf &&
			    rs->req->kind == PCORI_REQ_RECV_DMA)
				pcori_dma_free(rs->req->buf);
			free(rs);
		}
	}
	pcori_rndv_t *v, *tmp;
	HASH_ITER(hh, p->rndv, v, tmp)
	{
		HASH_DEL(p->rndv, v);
		pcori_dma_free(v->own_dma);
		free(v);
	}
	free((void *)p->tx);
	free(p->rx);
	free(p);
}

void pcori_peers_fini(void)
{
	int n = atomic_load(&pcori_net.npeers);
	pcori_peer_t **arr = atomic_load(&pcori_net.peers);
	for (int i = 0; i < n && arr; i++)
		if (arr[i])
			peer_free(arr[i]);
	free(arr);
	while (retired_arrays) {
		retired_t *r = retired_arrays;
		retired_arrays = r->next;
		free(r->arr);
		free(r);
	}
	atomic_store(&pcori_net.peers, NULL);
	atomic_store(&pcori_net.npeers, 0);
}
