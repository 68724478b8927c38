/*
 * peer.c -- the peer table: one object per other process, made on first
 * use, with its route (port and fabric address, from the route table of
 * src/route) and its streams; and what happens when a peer is lost.
 *
 * Design notes: the table is an array indexed by pid that only grows.
 * Readers load the array pointer without a lock; a grown copy replaces it
 * and old copies are kept until finalize, so a reader never sees freed
 * memory.  Peer objects are never freed before finalize either.
 */
#include "msg.h"

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
	pcori_list_init(&p->gaps);
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

pcori_peer_t *pcori_peer_make(int pid)
{
	if (pid < 0 || pid >= pcori_rt.nprocs || pid == pcori_rt.pid)
		return NULL;
	int n = atomic_load_explicit(&pcori_net.npeers, memory_order_acquire);
	pcori_peer_t **arr = atomic_load_explicit(&pcori_net.peers,
						  memory_order_acquire);
	pcori_peer_t *known = pid < n ? pcori_peer_slot(arr, pid) : NULL;
	if (PCORI_LIKELY(known))
		return known;

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
	pcori_peer_t *p = arr[pid];
	if (!p) {
		p = peer_new(pid);
		__atomic_store_n(&arr[pid], p, __ATOMIC_RELEASE);
	}
	pcori_unlock(&pcori_net.peers_lock);
	return p;
}

/* ---------------------------------------------------- a peer's route */

/* The address of info on port p for peer (inserted once per port). */
static int dest_of(pcori_peer_t *peer, pcori_port_t *p,
		   const pcori_port_info_t *info, uint64_t *dest_p)
{
	int rc = PCOR_OK;
	pcori_lock(&peer->lock);
	if (!(peer->has_dest & (1u << p->index))) {
		rc = p->ops->insert_addr(p, info, &peer->dest_by_port[p->index]);
		if (rc == PCOR_OK)
			peer->has_dest |= (uint16_t)(1u << p->index);
	}
	*dest_p = peer->dest_by_port[p->index];
	pcori_unlock(&peer->lock);
	return rc;
}

/*
 * Put peer on the table's route.  Indirect routes reuse the next hop's
 * own (direct) address.  PCOR_OK, or PCOR_ERR_UNREACHABLE.
 */
static int route_set(pcori_peer_t *peer)
{
	pcori_route_entry_t e;
	pcori_port_info_t hop_port;
	if (!pcori_routes_lookup(peer->pid, &e, &hop_port) ||
	    e.port >= pcori_net.nports)
		return PCOR_ERR_UNREACHABLE;
	pcori_port_t *p = pcori_net.ports[e.port];
	uint64_t dest;
	int rc;
	if (e.next_hop == peer->pid) {
		rc = dest_of(peer, p, &hop_port, &dest);
	} else {
		pcori_peer_t *hop = pcori_peer_get(e.next_hop);
		rc = hop ? pcori_peer_ready(hop) : PCOR_ERR_UNREACHABLE;
		pcori_route_t *hr = hop ? pcori_peer_route(hop) : NULL;
		if (rc == PCOR_OK && (!hr || hr->hops != 1 || hr->port != p))
			rc = PCOR_ERR_UNREACHABLE;
		if (rc == PCOR_OK)
			dest = hr->dest;
	}
	if (rc)
		return rc == PCOR_ERR_PEER_LOST ? PCOR_ERR_UNREACHABLE : rc;
	pcori_route_t *cur = pcori_peer_route(peer);
	if (cur && cur->port == p && cur->dest == dest &&
	    cur->next_hop == e.next_hop && cur->hops == e.hops)
		return PCOR_OK;
	pcori_route_t *r = malloc(sizeof(*r));
	if (!r)
		return PCOR_ERR_NOMEM;
	*r = (pcori_route_t){p, dest, e.next_hop, e.hops, e.link_class};
	pcori_route_t *old = atomic_exchange(&peer->route, r);
	if (old) {
		pcori_route_retire(old);
		pcori_txstreams_rerouted(peer);
	}
	PCORI_INFO(PCORI_SUB_ROUTE,
		   "peer %d: through port %d (%s), next hop %d, %d hops",
		   peer->pid, p->index, p->info.network, e.next_hop, e.hops);
	return PCOR_OK;
}

int pcori_peer_connect(pcori_peer_t *peer)
{
	int st = atomic_load_explicit(&peer->state, memory_order_acquire);
	if (st == PCORI_PEER_READY)
		return PCOR_OK;
	if (st == PCORI_PEER_LOST)
		return PCOR_ERR_PEER_LOST;
	int rc = route_set(peer);
	if (rc == PCOR_ERR_UNREACHABLE) {
		/* Gone from the directory, or only out of reach? */
		pcori_member_t *m = malloc(sizeof(*m));
		int lrc = m ? pcori_dir_lookup(peer->pid, m) : PCOR_ERR_NOMEM;
		free(m);
		if (lrc == PCOR_ERR_PEER_LOST) {
			atomic_store(&peer->state, PCORI_PEER_LOST);
			return PCOR_ERR_PEER_LOST;
		}
		if (lrc == PCOR_ERR_NOPEER)
			return PCOR_ERR_NOPEER;
		/* Alive, just learnt of: the table may predate it. */
		if (lrc == PCOR_OK) {
			pcori_routes_stale();
			pcori_timers_kick();
			rc = route_set(peer);
		}
		if (rc)
			return rc;
	}
	if (rc == PCOR_OK) {
		int expect = PCORI_PEER_NEW;
		atomic_compare_exchange_strong(&peer->state, &expect,
					       PCORI_PEER_READY);
		if (expect == PCORI_PEER_LOST)
			return PCOR_ERR_PEER_LOST;
	}
	return rc;
}

static void peer_fail(int pid, int status, bool permanent);

/*
 * Move a peer in use onto the table's route, or fail what involves it.
 * A peer that left or died keeps its last route: the leaving and loss
 * paths settle its traffic (its last acks may still be on the way).
 */
static void reroute(pcori_peer_t *p)
{
	if (route_set(p) != PCOR_ERR_UNREACHABLE)
		return;
	pcori_member_t *m = malloc(sizeof(*m));
	int lrc = m ? pcori_dir_lookup(p->pid, m) : PCOR_ERR_NOMEM;
	free(m);
	if (lrc != PCOR_ERR_PEER_LOST)
		peer_fail(p->pid, PCOR_ERR_UNREACHABLE, false);
}

void pcori_peers_reroute(void)
{
	/*
	 * Move every peer in use onto its new route (or fail it): direct
	 * peers (and those without a route) first, so indirect ones find
	 * their hop ready.
	 */
	for (int pass = 0; pass < 2; pass++) {
		pcori_peer_t *p;
		for (int i = 0; (p = pcori_peer_next_ready(&i));) {
			pcori_route_t *r = pcori_peer_route(p);
			if (r && (r->hops == 1) == (pass == 1))
				continue;
			reroute(p);
		}
	}
}

/* Posted receives naming the lost pid can never be satisfied now. */
static void fail_posted(int pid, int status)
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
					   status);
		}
	}
}

/*
 * Fail everything that involves pid.  permanent: it is gone for good.
 * Otherwise it lives on out of reach: its streams resynchronise if a
 * route comes back.
 */
static void peer_fail(int pid, int status, bool permanent)
{
	if (!pcori_net.up || pid == pcori_rt.pid)
		return;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer)
		return;
	if (permanent) {
		if (atomic_exchange(&peer->leave_ns, 0))
			atomic_fetch_sub(&pcori_net.nleaving, 1);
		if (atomic_exchange(&peer->state, PCORI_PEER_LOST) ==
		    PCORI_PEER_LOST)
			return;
	} else {
		int expect = PCORI_PEER_READY;
		if (!atomic_compare_exchange_strong(&peer->state, &expect,
						    PCORI_PEER_NEW))
			return;
		pcori_route_t *old = atomic_exchange(&peer->route, NULL);
		if (old)
			pcori_route_retire(old);
	}
	PCORI_INFO(PCORI_SUB_DISPATCH, "peer %d %s: failing what involves it",
		   pid, permanent ? "lost" : "out of reach");
	for (int t = 0; t < pcori_rt.max_threads; t++) {
		pcori_txstream_t *ts = atomic_load(&peer->tx[t]);
		if (ts)
			pcori_txstream_fail(ts, status, !permanent);
	}
	pcori_rx_fail(peer, status);
	fail_posted(pid, status);
	if (permanent)
		pcori_spawn_peer_lost(pid);
}

void pcori_peer_lost(int pid)
{
	peer_fail(pid, PCOR_ERR_PEER_LOST, true);
}

/* Long enough for anything the leaver sent to have arrived. */
#define LEAVE_GRACE_NS 2000000000ull

/*
 * pid is to be lost at `at` (or earlier, if it already is): the reaper
 * (pcori_peers_reap) fails it then, outside its caller's locks.  false:
 * no such peer, or already lost.
 */
static bool lose_by(int pid, uint64_t at)
{
	if (!pcori_net.up)
		return false;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer || atomic_load(&peer->state) == PCORI_PEER_LOST)
		return false;
	uint64_t t = atomic_load(&peer->leave_ns);
	while (!t || t > at) {
		if (atomic_compare_exchange_weak(&peer->leave_ns, &t, at)) {
			if (!t)
				atomic_fetch_add(&pcori_net.nleaving, 1);
			break;
		}
	}
	pcori_timers_kick();
	return true;
}

void pcori_peer_leaving(int pid)
{
	lose_by(pid, pcori_now_ns() + LEAVE_GRACE_NS);
}

void pcori_port_peer_fault(pcori_port_t *port, int pid)
{
	/* Due now, but not in the port's progress call: the reaper's. */
	if (lose_by(pid, pcori_now_ns()))
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "port %d: what process %d sends here cannot be "
			   "read any more: it is lost to this process",
			   port->index, pid);
}

int pcori_peers_reap(void)
{
	if (!atomic_load_explicit(&pcori_net.nleaving, memory_order_relaxed))
		return 0;
	int n = 0, np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **arr = atomic_load(&pcori_net.peers);
	uint64_t now = pcori_now_ns();
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = pcori_peer_slot(arr, i);
		uint64_t t = p ? atomic_load(&p->leave_ns) : 0;
		if (t && t <= now) {
			pcori_peer_lost(p->pid);
			n++;
		}
	}
	return n;
}

pcori_peer_t *pcori_peer_next_ready(int *i)
{
	int np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **arr = atomic_load(&pcori_net.peers);
	while (*i < np) {
		pcori_peer_t *p = pcori_peer_slot(arr, (*i)++);
		if (p && atomic_load(&p->state) == PCORI_PEER_READY)
			return p;
	}
	return NULL;
}

int pcori_peers_bye(void)
{
	size_t cap = pcori_net.frag_size;
	uint8_t *body = malloc(cap);
	pcori_peer_t *p;
	int n = 0;
	for (int i = 0; (p = pcori_peer_next_ready(&i));) {
		if (!pcori_peer_route(p) || atomic_load(&p->bye_acked))
			continue;
		/* Without room for the acks, a bare BYE: they went twice. */
		size_t len = body ? pcori_acks_final(p, body, cap) : 0;
		if (pcori_ctrl_send(p, PCORI_CTRL_BYE, body, len) == PCOR_OK)
			n++;
	}
	free(body);
	return n;
}

/* Free one peer and what it still holds (finalize: ports are closed). */
static void peer_free(pcori_peer_t *p)
{
	for (int t = 0; t < pcori_rt.max_threads; t++) {
		pcori_txstream_t *ts = atomic_load(&p->tx[t]);
		if (ts)
			pcori_txstream_discard(ts);
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
	/*
	 * Rendezvous still listed are on pcori_net.rndvs too: freed there,
	 * with their blocks, once the ports are closed and no read can
	 * write into them (pcori_rndv_reap).
	 */
	HASH_CLEAR(hh, p->rndv);
	free(atomic_load(&p->route));
	free((void *)p->tx);
	free(p->rx);
	free(p);
}

uint64_t pcori_port_tx_frames(pcori_port_t *port)
{
	uint64_t n = atomic_load_explicit(&port->st.tx, memory_order_relaxed);
	int np = atomic_load_explicit(&pcori_net.npeers, memory_order_acquire);
	pcori_peer_t **arr =
	    atomic_load_explicit(&pcori_net.peers, memory_order_acquire);
	for (int i = 0; i < np && arr; i++) {
		pcori_peer_t *p = pcori_peer_slot(arr, i);
		for (int t = 0; p && t < pcori_rt.max_threads; t++) {
			pcori_txstream_t *ts = atomic_load(&p->tx[t]);
			if (!ts)
				continue;
			pcori_lock(&ts->lock);
			if (ts->fast_port == port)
				n += ts->fast_tx;
			pcori_unlock(&ts->lock);
		}
	}
	return n;
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
	pcori_routes_fini();
}
