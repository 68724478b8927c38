/*
 * agent.c -- the directory agent: one thread per process that owns every
 * control connection.
 *
 * Design notes.
 *  - Peers form a mesh: each pair of agents shares one authenticated TCP
 *    connection.  Among the initial processes the higher pid dials the
 *    lower; a process that joins later dials everyone it was told about.
 *    After the handshake both sides say HELLO (pid, ready, address).
 *  - A peer is JOINING from the moment we learn of it and ALIVE once it
 *    said READY (its directory entry is registered).  Its connection
 *    closing after BYE is a normal exit, without BYE a failure: the kernel
 *    closes a killed process's sockets at once, so failures are seen in
 *    milliseconds.
 *  - Every key (a pid's entry, a name) has a home: the JOINING or ALIVE
 *    member with the highest rendezvous hash for it.  When membership
 *    changes, owners re-send their entries to the new homes, and homes
 *    tell waiting lookups to retry; so nothing needs migrating.
 *  - Application threads never touch sockets.  They queue a request
 *    (pcori_dreq_t) and sleep on its word; the agent completes every
 *    request by its deadline at the latest (req.c).
 *  - Connecting and liveness (retries, suspicion, heartbeats, fencing)
 *    are in dial.c; admission of unauthenticated connections in admit.c.
 *  - Membership hooks run on this thread with no lock held.
 */
#include "naming_priv.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

pcori_nm_t pcori_nm;
#define NM pcori_nm

enum { CONN_NEW = 0, CONN_PEER, CONN_SEED };

static int self_pid(void)
{
	return NM.boot.pid;
}

static pcori_view_t *view_find(int pid)
{
	pcori_view_t *e;
	HASH_FIND_INT(NM.view, &pid, e);
	return e;
}

pcori_view_t *pcori_agent_view(int pid)
{
	pcori_lock(&NM.lock);
	pcori_view_t *e = view_find(pid);
	pcori_unlock(&NM.lock);
	return e;
}

/* Find or add (as JOINING).  nm.lock held.  NULL on no memory. */
static pcori_view_t *view_get(int pid, const char *agent)
{
	pcori_view_t *e = view_find(pid);
	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->pid = pid;
	e->state = PCORI_VIEW_JOINING;
	snprintf(e->agent, sizeof(e->agent), "%s", agent ? agent : "");
	HASH_ADD_INT(NM.view, pid, e);
	return e;
}

static bool view_live(const pcori_view_t *e)
{
	return e->state == PCORI_VIEW_JOINING || e->state == PCORI_MEMBER_ALIVE;
}

bool pcori_agent_view_live(const pcori_view_t *e)
{
	return view_live(e);
}

/* ------------------------------------------------------------- sending */

static void arm(pcori_conn_t *c)
{
	bool want = pcori_conn_wants_write(c);
	if (want == c->out_armed)
		return;
	struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0),
				 .data.ptr = c};
	if (epoll_ctl(NM.epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->out_armed = want;
}

static void conn_push(pcori_conn_t *c, const pcori_wbuf_t *frame)
{
	if (c->dead)
		return;
	int rc = pcori_conn_send(c, frame);
	if (!rc)
		rc = pcori_conn_flush(c);
	if (rc)
		c->dead = rc;
	else
		arm(c);
}

void pcori_agent_push(pcori_conn_t *c, const pcori_wbuf_t *frame)
{
	conn_push(c, frame);
}

void pcori_agent_to(int pid, pcori_wbuf_t *frame)
{
	if (pid == self_pid()) {
		pcori_rbuf_t r;
		pcori_rbuf_init(&r, frame->p + PCORI_CTL_HDR,
				frame->len - PCORI_CTL_HDR);
		pcori_home_request(pid, frame->p[5], &r);
		return;
	}
	pcori_lock(&NM.lock);
	pcori_view_t *e = view_find(pid);
	pcori_unlock(&NM.lock);
	if (!e || !view_live(e))
		return; /* the caller's request fails over or times out */
	if (e->conn)
		conn_push(e->conn, frame);
	else
		pcori_w_bytes(&e->backlog, frame->p, frame->len);
}

void pcori_agent_reply(int src, uint32_t reqid, int status,
		       pcori_wbuf_t *payload)
{
	if (!reqid)
		return; /* fire-and-forget request */
	if (src == self_pid()) {
		pcori_rbuf_t r;
		pcori_rbuf_init(&r, payload ? payload->p : NULL,
				payload ? payload->len : 0);
		pcori_dreq_reply_in(reqid, status, &r);
		return;
	}
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_REPLY);
	pcori_w_u32(&w, reqid);
	pcori_w_u32(&w, (uint32_t)status);
	if (payload)
		pcori_w_bytes(&w, payload->p, payload->len);
	if (pcori_frame_end(&w))
		pcori_agent_to(src, &w);
	pcori_wbuf_free(&w);
}

/* ---------------------------------------------------------- membership */

static void member_gone(pcori_view_t *e, bool bye)
{
	int pid = e->pid;
	e->conn = NULL;
	e->suspect_ns = e->redial_ns = 0;
	e->probing = false;
	pcori_wbuf_free(&e->backlog);
	if (!view_live(e))
		return;
	int ev = bye ? PCORI_EV_EXIT : PCORI_EV_FAILURE;
	PCORI_INFO(PCORI_SUB_NAMING, "agent: process %d %s", pid,
		   bye ? "exited" : "failed (control connection lost)");
	pcori_dir_event(pid, ev);
	pcori_home_member_gone(pid);
	/* Requests that were waiting on it go elsewhere or fail. */
	pcori_dreq_t *q, *tmp;
	HASH_ITER(hh, NM.pending, q, tmp)
	{
		if (q->target == pid)
			pcori_dreq_retarget(q);
	}
	pcori_dreq_rehome();
	pcori_dreq_check_waiting();
}

bool pcori_agent_is_peer(const pcori_conn_t *c)
{
	return c->kind == CONN_PEER;
}

void pcori_agent_member_gone(pcori_view_t *e, bool bye)
{
	member_gone(e, bye);
}

static void conn_close(pcori_conn_t *c, int rc)
{
	pcori_admit_leave(c);
	pcori_list_remove(&c->link);
	epoll_ctl(NM.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c == NM.seed) {
		PCORI_INFO(PCORI_SUB_NAMING, "agent: launcher connection "
					     "closed: %s",
			   pcor_strerror(rc));
		NM.seed = NULL;
		pcori_dreq_t *q, *tmp;
		HASH_ITER(hh, NM.pending, q, tmp)
		{
			if (q->target == -2)
				pcori_dreq_retarget(q);
		}
		pcori_conn_free(c);
		return;
	}
	if (c->kind == CONN_PEER) {
		pcori_lock(&NM.lock);
		pcori_view_t *e = view_find(c->pid);
		pcori_unlock(&NM.lock);
		if (e && e->conn == c)
			member_gone(e, c->bye);
	} else if (c->pid >= 0) {
		/* We dialed it and never got through: a suspicion only. */
		pcori_lock(&NM.lock);
		pcori_view_t *e = view_find(c->pid);
		pcori_unlock(&NM.lock);
		if (e && !e->conn && view_live(e))
			pcori_dial_failed(e, rc, c->refused_key_id);
	} else if (rc == PCOR_ERR_AUTH || rc == PCOR_ERR_PROTO ||
		   rc == PCOR_ERR_TIMEDOUT) {
		/* A stranger: counted, and nothing it sent was kept. */
		char from[PCORI_AGENT_ADDR_MAX];
		pcori_sock_peer(c->fd, from, sizeof(from));
		if (rc == PCOR_ERR_AUTH)
			atomic_fetch_add(&NM.n_auth_fail, 1);
		else
			atomic_fetch_add(&NM.n_proto_fail, 1);
		pcori_admit_refused(rc == PCOR_ERR_AUTH	   ? PCORI_REFUSE_AUTH
				    : rc == PCOR_ERR_PROTO ? PCORI_REFUSE_PROTO
							   : PCORI_REFUSE_TIMEOUT,
				    from);
	}
	pcori_conn_free(c);
}

static void send_hello(pcori_conn_t *c)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_HELLO);
	pcori_w_u32(&w, (uint32_t)self_pid());
	pcori_w_u8(&w, NM.ready_sent ? 1 : 0);
	pcori_w_str(&w, NM.agent);
	pcori_w_os_proc(&w, &NM.self_proc);
	if (NM.ready_sent) {
		pcori_lock(&NM.lock);
		pcori_w_member(&w, &NM.self);
		pcori_unlock(&NM.lock);
	}
	if (pcori_frame_end(&w))
		conn_push(c, &w);
	pcori_wbuf_free(&w);
	c->hello_sent = true;
}

static void set_alive(pcori_view_t *e)
{
	if (e->state != PCORI_VIEW_JOINING)
		return;
	pcori_dir_event(e->pid, PCORI_EV_STARTUP);
	pcori_dreq_check_waiting();
}

/*
 * A READY (or a HELLO from a ready process) carries the sender's entry:
 * caching it here means hooks can resolve the newcomer on this thread
 * without a round trip; the home's copy serves lookups after the cache
 * has dropped it.
 */
static int read_entry(int pid, pcori_rbuf_t *r, pcori_member_t *m)
{
	pcori_r_member(r, m);
	if (!pcori_r_done(r) || m->pid != pid || m->nports < 0)
		return PCOR_ERR_PROTO;
	m->state = PCORI_MEMBER_ALIVE;
	return PCOR_OK;
}

static void cache_entry(pcori_view_t *e, const pcori_member_t *m)
{
	pcori_lock(&NM.lock);
	e->member = *m;
	e->cached = true;
	pcori_unlock(&NM.lock);
}

static int on_hello(pcori_conn_t *c, pcori_rbuf_t *r)
{
	uint32_t upid = pcori_r_u32(r);
	uint8_t ready = pcori_r_u8(r);
	char agent[PCORI_AGENT_ADDR_MAX];
	pcori_r_str(r, agent, sizeof(agent));
	pcori_os_proc_t proc;
	pcori_r_os_proc(r, &proc);
	pcori_member_t m;
	if (r->err || upid > INT_MAX || (int)upid == self_pid() || ready > 1)
		return PCOR_ERR_PROTO;
	if (ready ? read_entry((int)upid, r, &m) : !pcori_r_done(r))
		return PCOR_ERR_PROTO;
	int pid = (int)upid;
	if (!c->server && pid != c->pid)
		return PCOR_ERR_PROTO;
	pcori_lock(&NM.lock);
	bool fresh = !view_find(pid);
	pcori_view_t *e = view_get(pid, agent);
	/* pids are never reused, and one connection per pair */
	int bad = !e ? PCOR_ERR_NOMEM
		     : (e->conn || !view_live(e)) ? PCOR_ERR_PROTO : PCOR_OK;
	bool fenced = e && e->state == PCORI_MEMBER_FAILED;
	if (!bad && !e->agent[0])
		snprintf(e->agent, sizeof(e->agent), "%s", agent);
	pcori_unlock(&NM.lock);
	if (fenced)
		PCORI_WARN(PCORI_SUB_NAMING,
			   "agent: refused process %d: it was declared lost "
			   "and is fenced out",
			   pid);
	if (bad)
		return bad;
	if (c->server)
		send_hello(c);
	c->pid = pid;
	c->proc = proc;
	c->kind = CONN_PEER;
	e->conn = c;
	pcori_dial_ok(e);
	if (e->backlog.len) {
		conn_push(c, &e->backlog);
		pcori_wbuf_free(&e->backlog);
	}
	if (fresh) {
		pcori_dir_grow_nprocs(pid);
		pcori_dreq_rehome();
	}
	if (ready) {
		cache_entry(e, &m);
		set_alive(e);
	}
	pcori_dreq_check_waiting();
	return PCOR_OK;
}

static int on_frame(pcori_conn_t *c, int type, pcori_rbuf_t *r, void *ctx)
{
	(void)ctx;
	if (c == NM.seed) {
		if (type != PCORI_CTL_REPLY)
			return PCOR_ERR_PROTO;
		uint32_t reqid = pcori_r_u32(r);
		int status = (int32_t)pcori_r_u32(r);
		if (r->err || (reqid & PCORI_REQID_REG))
			return PCOR_ERR_PROTO;
		if (reqid & PCORI_REQID_PROBE) {
			pcori_dial_probe_reply(
				(int)(reqid & ~PCORI_REQID_PROBE), status);
			return PCOR_OK;
		}
		pcori_dreq_reply_in(reqid, status, r);
		return PCOR_OK;
	}
	if (c->kind != CONN_PEER)
		return type == PCORI_CTL_HELLO ? on_hello(c, r) : PCOR_ERR_PROTO;
	switch (type) {
	case PCORI_CTL_READY: {
		pcori_member_t m;
		if (read_entry(c->pid, r, &m))
			return PCOR_ERR_PROTO;
		pcori_lock(&NM.lock);
		pcori_view_t *e = view_find(c->pid);
		pcori_unlock(&NM.lock);
		if (e) {
			cache_entry(e, &m);
			set_alive(e);
		}
		return PCOR_OK;
	}
	case PCORI_CTL_BYE:
		c->bye = true;
		return PCOR_OK;
	case PCORI_CTL_PING:
		return pcori_r_done(r) ? PCOR_OK : PCOR_ERR_PROTO;
	case PCORI_CTL_FENCED:
		return pcori_live_fenced(c->pid, r);
	case PCORI_CTL_SILENT:
		return pcori_live_silent(c->pid, r);
	case PCORI_CTL_REPLY: {
		uint32_t reqid = pcori_r_u32(r);
		int status = (int32_t)pcori_r_u32(r);
		if (r->err)
			return PCOR_ERR_PROTO;
		if ((reqid & (PCORI_REQID_REG | PCORI_REQID_PROBE)) ==
		    PCORI_REQID_PROBE) { /* a witness answers */
			pcori_dial_probe_reply(
				(int)(reqid & ~PCORI_REQID_PROBE), status);
			return PCOR_OK;
		}
		pcori_dreq_reply_in(reqid, status, r);
		return PCOR_OK;
	}
	case PCORI_CTL_PROBE:
		return pcori_dial_probe_request(c, r);
	case PCORI_CTL_REG:
	case PCORI_CTL_MLOOKUP:
	case PCORI_CTL_PUB:
	case PCORI_CTL_UNPUB:
	case PCORI_CTL_NLOOKUP:
		return pcori_home_request(c->pid, type, r);
	default:
		return PCOR_ERR_PROTO;
	}
}

void pcori_agent_add_conn(pcori_conn_t *c, bool want_out)
{
	struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0),
				 .data.ptr = c};
	c->out_armed = want_out;
	pcori_list_push_back(&NM.conns, &c->link);
	if (epoll_ctl(NM.epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		c->dead = PCOR_ERR_SYSTEM;
}

/*
 * Accept a bounded batch per wake-up, so the connections already here
 * (members finishing their handshake among them) are read in between.
 */
#define ACCEPT_BATCH 32

static void on_accept(void)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(NM.listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				pcori_admit_accept_failed(NM.listen_fd, errno);
			return;
		}
		pcori_sock_tune(fd);
		pcori_conn_t *c = pcori_conn_new(
			fd, true, false, NM.boot.key,
			(uint64_t)NM.auth_timeout_ms * 1000000ull);
		if (!c) {
			close(fd);
			continue;
		}
		atomic_fetch_add(&NM.n_accepted, 1);
		/*
		 * A member's ticket is usually in the socket by now: read it,
		 * and a member never enters the strangers' pool.
		 */
		bool opened;
		int rc = pcori_conn_input(c, on_frame, NULL, &opened);
		if (rc)
			c->dead = rc;
		else if (!c->ticket_ok && pcori_admit_add(c)) {
			pcori_conn_free(c);
			continue;
		}
		pcori_agent_add_conn(c, true);
	}
}

static void on_conn_event(pcori_conn_t *c, uint32_t events)
{
	if (c->dead)
		return;
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP) ||
	    c->state == PCORI_CONN_CONNECTING) {
		bool opened = false;
		int rc = pcori_conn_input(c, on_frame, NULL, &opened);
		if ((opened || c->ticket_ok) && c->server)
			pcori_admit_leave(c); /* a member: never shed */
		if (opened && !c->server && c != NM.seed)
			send_hello(c);
		if (rc) {
			c->dead = rc;
			return;
		}
	}
	int rc = pcori_conn_flush(c);
	if (rc)
		c->dead = rc;
	else
		arm(c);
}

/* Expire what is past its deadline; return the nearest one left. */
static uint64_t expire(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	pcori_list_t *pos, *tmp;
	pcori_list_foreach(pos, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		if (c->kind != CONN_NEW || c->dead)
			continue;
		if (c->auth_deadline_ns <= now)
			c->dead = PCOR_ERR_TIMEDOUT;
		else
			next = PCORI_MIN(next, c->auth_deadline_ns);
	}
	pcori_dreq_t *q, *qt;
	HASH_ITER(hh, NM.pending, q, qt)
	{
		if (q->deadline_ns <= now) {
			HASH_DEL(NM.pending, q);
			pcori_dreq_complete(q, PCOR_ERR_TIMEDOUT);
		} else {
			next = PCORI_MIN(next, q->deadline_ns);
		}
	}
	pcori_list_foreach_safe(pos, tmp, &NM.waiting)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		if (r->deadline_ns <= now) {
			pcori_list_remove(&r->link);
			pcori_dreq_complete(r, PCOR_ERR_TIMEDOUT);
		} else {
			next = PCORI_MIN(next, r->deadline_ns);
		}
	}
	next = PCORI_MIN(next, pcori_dial_expire(now));
	next = PCORI_MIN(next, pcori_live_tick(now));
	next = PCORI_MIN(next, pcori_admit_tick(now));
	return PCORI_MIN(next, pcori_home_expire(now));
}

static void reap_dead(void)
{
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		if (c->dead)
			conn_close(c, c->dead);
	}
}

static void drain_queue(void)
{
	uint64_t v;
	while (read(NM.efd, &v, sizeof(v)) > 0)
		;
	for (;;) {
		pcori_lock(&NM.qlock);
		pcori_dreq_t *r = NULL;
		if (!pcori_list_empty(&NM.reqq)) {
			r = PCORI_CONTAINER_OF(NM.reqq.next, pcori_dreq_t,
					       link);
			pcori_list_remove(&r->link);
		}
		pcori_unlock(&NM.qlock);
		if (!r)
			return;
		pcori_dreq_start(r);
	}
}

/* Leave: say goodbye to everyone, fail what is still open. */
static void shutdown_all(void)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_BYE);
	pcori_frame_end(&w);
	uint64_t deadline = pcori_now_ns() + 1000000000ull;
	pcori_list_t *pos, *tmp;
	int npeers = 0;
	pcori_list_foreach(pos, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		if (c->kind == CONN_PEER && !c->dead &&
		    !pcori_conn_send(c, &w) &&
		    !pcori_conn_flush_sync(c, deadline) &&
		    !shutdown(c->fd, SHUT_WR))
			npeers++;
		else
			c->dead = PCOR_ERR_FINALIZED;
	}
	pcori_wbuf_free(&w);
	/*
	 * Closing a socket with unread data in it sends a reset, and a reset
	 * can destroy the BYE still queued at the peer, which then takes our
	 * exit for a failure.  So read (and drop) until each peer closes its
	 * side, as it does on our end of stream, or the deadline passes.
	 */
	struct pollfd *pf = npeers ? calloc((size_t)npeers, sizeof(*pf)) : NULL;
	if (pf) {
		int k = 0;
		pcori_list_foreach(pos, &NM.conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			if (c->kind == CONN_PEER && !c->dead)
				pf[k++] = (struct pollfd){.fd = c->fd,
							  .events = POLLIN};
		}
		for (int open = k; open > 0;) {
			uint64_t now = pcori_now_ns();
			if (now >= deadline ||
			    poll(pf, (nfds_t)k,
				 (int)((deadline - now) / 1000000 + 1)) < 0)
				break;
			for (int i = 0; i < k; i++) {
				char sink[4096];
				if (pf[i].fd < 0 || !pf[i].revents)
					continue;
				ssize_t n = recv(pf[i].fd, sink, sizeof(sink), 0);
				if (n > 0 || (n < 0 && errno == EINTR))
					continue;
				if (n < 0 && errno == EAGAIN)
					continue;
				pf[i].fd = -1; /* its end of stream (or an error) */
				open--;
			}
		}
		free(pf);
	}
	pcori_list_foreach_safe(pos, tmp, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		pcori_list_remove(&c->link);
		pcori_conn_free(c);
	}
	if (NM.seed) {
		pcori_conn_flush_sync(NM.seed, deadline);
		pcori_conn_free(NM.seed);
		NM.seed = NULL;
	}
	/* Requests still open end now; their callers are waiting. */
	pcori_lock(&NM.qlock);
	pcori_list_foreach_safe(pos, tmp, &NM.reqq)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		pcori_list_remove(&r->link);
		pcori_dreq_complete(r, PCOR_ERR_FINALIZED);
	}
	pcori_unlock(&NM.qlock);
	pcori_dreq_t *q, *qt;
	HASH_ITER(hh, NM.pending, q, qt)
	{
		HASH_DEL(NM.pending, q);
		pcori_dreq_complete(q, PCOR_ERR_FINALIZED);
	}
	pcori_list_foreach_safe(pos, tmp, &NM.waiting)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		pcori_list_remove(&r->link);
		pcori_dreq_complete(r, PCOR_ERR_FINALIZED);
	}
}

static void *agent_main(void *arg)
{
	(void)arg;
	struct epoll_event evs[64];
	while (!atomic_load(&NM.stop)) {
		uint64_t now = pcori_now_ns();
		uint64_t next = expire(now);
		reap_dead();
		int ms = -1;
		if (next != UINT64_MAX)
			ms = (int)PCORI_MIN((next - now) / 1000000 + 1, 60000);
		int n = epoll_wait(NM.epfd, evs, PCORI_ARRAY_LEN(evs), ms);
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &NM.listen_fd)
				on_accept();
			else if (p == &NM.efd)
				drain_queue();
			else
				on_conn_event(p, evs[i].events);
		}
		reap_dead();
	}
	shutdown_all();
	return NULL;
}

int pcori_agent_start(pcori_boot_out_t *bo)
{
	NM.listen_fd = bo->listen_fd;
	NM.seed = bo->seed;
	NM.self_home = -1;
	pcori_list_init(&NM.conns);
	pcori_list_init(&NM.waiting);
	pcori_list_init(&NM.hwaits);
	pcori_admit_init();
	NM.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	NM.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (NM.efd < 0 || NM.epfd < 0)
		return PCOR_ERR_SYSTEM;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &NM.listen_fd};
	epoll_ctl(NM.epfd, EPOLL_CTL_ADD, NM.listen_fd, &ev);
	ev.data.ptr = &NM.efd;
	epoll_ctl(NM.epfd, EPOLL_CTL_ADD, NM.efd, &ev);
	if (NM.seed) {
		NM.seed->kind = CONN_SEED;
		ev.data.ptr = NM.seed;
		epoll_ctl(NM.epfd, EPOLL_CTL_ADD, NM.seed->fd, &ev);
		pcori_list_init(&NM.seed->link);
	}

	/* Everyone the bootstrap told us of; dial those we must. */
	pcori_lock(&NM.lock);
	pcori_view_t *me = view_get(self_pid(), NM.agent);
	bool ok = me != NULL;
	for (int i = 0; ok && i < bo->ntable; i++) {
		const pcori_boot_entry_t *t = &bo->table[i];
		if (t->pid == self_pid())
			continue;
		pcori_view_t *e = view_get(t->pid, t->agent);
		if (!e) {
			ok = false;
			break;
		}
		if (t->state == PCORI_MEMBER_EXITED ||
		    t->state == PCORI_MEMBER_FAILED)
			e->state = t->state;
	}
	pcori_unlock(&NM.lock);
	if (!ok)
		return PCOR_ERR_NOMEM;
	for (int i = 0; i < bo->ntable; i++) {
		int pid = bo->table[i].pid;
		pcori_dir_grow_nprocs(pid);
		if (pid == self_pid())
			continue;
		pcori_view_t *e = view_find(pid);
		/* The later one dials: see the design notes. */
		bool mine = NM.boot.spawned || pid < self_pid();
		if (mine && view_live(e))
			pcori_dial(e);
	}
	reap_dead();
	if (pthread_create(&NM.thread, NULL, agent_main, NULL))
		return PCOR_ERR_SYSTEM;
	/* Named for ps, top and gdb (and the tests that find it). */
	pthread_setname_np(NM.thread, "pcor-agent");
	NM.thread_started = true;
	return PCOR_OK;
}

void pcori_agent_stop(void)
{
	if (NM.thread_started) {
		pcori_lock(&NM.qlock);
		atomic_store(&NM.stop, true);
		pcori_unlock(&NM.qlock);
		uint64_t one = 1;
		if (write(NM.efd, &one, sizeof(one)) < 0)
			PCORI_WARN(PCORI_SUB_NAMING, "agent: stop: %s",
				   strerror(errno));
		pthread_join(NM.thread, NULL);
		NM.thread_started = false;
	} else {
		pcori_list_t *pos, *tmp;
		pcori_list_foreach_safe(pos, tmp, &NM.conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			pcori_list_remove(&c->link);
			pcori_conn_free(c);
		}
		pcori_conn_free(NM.seed);
		NM.seed = NULL;
	}
	if (NM.listen_fd >= 0)
		close(NM.listen_fd);
	if (NM.efd >= 0)
		close(NM.efd);
	if (NM.epfd >= 0)
		close(NM.epfd);
	NM.listen_fd = NM.efd = NM.epfd = -1;
	pcori_admit_fini();
	pcori_home_fini();
	pcori_myname_t *n, *nt;
	HASH_ITER(hh, NM.mynames, n, nt)
	{
		HASH_DEL(NM.mynames, n);
		free(n);
	}
}
