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
 *    request by its deadline at the latest.
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

/* Request ids with this bit are the agent's own registrations. */
#define REQID_REG 0x80000000u

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

static void handle_reply(uint32_t reqid, int status, pcori_rbuf_t *r);

void pcori_agent_reply(int src, uint32_t reqid, int status,
		       pcori_wbuf_t *payload)
{
	if (!reqid)
		return; /* fire-and-forget request */
	if (src == self_pid()) {
		pcori_rbuf_t r;
		pcori_rbuf_init(&r, payload ? payload->p : NULL,
				payload ? payload->len : 0);
		handle_reply(reqid, status, &r);
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

/* ---------------------------------------------------------------- homes */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

int pcori_agent_home_of(uint64_t key_hash)
{
	int best = self_pid();
	uint64_t best_score = 0;
	bool any = false;
	pcori_lock(&NM.lock);
	for (pcori_view_t *e = NM.view; e; e = e->hh.next) {
		if (!view_live(e))
			continue;
		uint64_t s = mix64(key_hash ^ pcori_hash_pid(e->pid));
		if (!any || s > best_score || (s == best_score && e->pid < best)) {
			best = e->pid;
			best_score = s;
			any = true;
		}
	}
	pcori_unlock(&NM.lock);
	return best;
}

static void send_reg(int home)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_REG);
	pcori_w_u32(&w, REQID_REG | (NM.next_reqid++ & 0x7fffffffu));
	pcori_lock(&NM.lock);
	pcori_w_member(&w, &NM.self);
	pcori_unlock(&NM.lock);
	NM.self_home = home;
	if (pcori_frame_end(&w))
		pcori_agent_to(home, &w);
	pcori_wbuf_free(&w);
}

static void send_pub(int home, const pcori_myname_t *n, uint32_t reqid,
		     uint8_t flags)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_PUB);
	pcori_w_u32(&w, reqid);
	pcori_w_u8(&w, flags);
	pcori_w_u32(&w, (uint32_t)n->pid);
	pcori_w_u32(&w, (uint32_t)n->thid);
	pcori_w_str(&w, n->name);
	if (pcori_frame_end(&w))
		pcori_agent_to(home, &w);
	pcori_wbuf_free(&w);
}

/* Membership changed: move what we own to its new homes. */
static void rehome(void)
{
	if (NM.self_home >= 0) {
		int h = pcori_agent_home_of(pcori_hash_pid(self_pid()));
		if (h != NM.self_home)
			send_reg(h);
	}
	for (pcori_myname_t *n = NM.mynames; n; n = n->hh.next) {
		int h = pcori_agent_home_of(pcori_hash_str(n->name));
		if (h != n->home) {
			send_pub(h, n, 0, PCORI_PUB_REPUBLISH);
			n->home = h;
		}
	}
	pcori_home_retry_waiters();
}

/* ------------------------------------------------------------- requests */

static void complete(pcori_dreq_t *r, int status)
{
	r->status = status;
	pcori_wake_word(&r->done, PCORI_REQ_DONE);
}

static void pending_add(pcori_dreq_t *r, int target)
{
	/* Clear of REQID_REG and PCORI_REQID_PROBE. */
	r->reqid = ++NM.next_reqid & 0x3fffffffu;
	if (!r->reqid)
		r->reqid = ++NM.next_reqid & 0x3fffffffu;
	r->target = target;
	HASH_ADD(hh, NM.pending, reqid, sizeof(r->reqid), r);
}

/* Send r's request frame to target; the reply comes to handle_reply. */
static void send_req(pcori_dreq_t *r, int target)
{
	pcori_wbuf_t w = {0};
	pending_add(r, target);
	switch (r->op) {
	case PCORI_OP_MLOOKUP:
		pcori_frame_begin(&w, PCORI_CTL_MLOOKUP);
		pcori_w_u32(&w, r->reqid);
		pcori_w_u32(&w, (uint32_t)r->pid);
		break;
	case PCORI_OP_PUB:
		pcori_frame_begin(&w, PCORI_CTL_PUB);
		pcori_w_u32(&w, r->reqid);
		pcori_w_u8(&w, 0);
		pcori_w_u32(&w, (uint32_t)r->pid);
		pcori_w_u32(&w, (uint32_t)r->thid);
		pcori_w_str(&w, r->name);
		break;
	case PCORI_OP_UNPUB:
		pcori_frame_begin(&w, PCORI_CTL_UNPUB);
		pcori_w_u32(&w, r->reqid);
		pcori_w_str(&w, r->name);
		break;
	case PCORI_OP_NLOOKUP: {
		int64_t ms = 0;
		if (r->wait_ms < 0)
			ms = UINT32_MAX;
		else if (r->wait_ms > 0) {
			uint64_t now = pcori_now_ns();
			uint64_t end = r->deadline_ns - (uint64_t)NM.req_timeout_ms *
							       1000000ull;
			ms = end > now ? (int64_t)((end - now) / 1000000) : 0;
		}
		pcori_frame_begin(&w, PCORI_CTL_NLOOKUP);
		pcori_w_u32(&w, r->reqid);
		pcori_w_u32(&w, (uint32_t)PCORI_MIN(ms, (int64_t)UINT32_MAX));
		pcori_w_str(&w, r->name);
		break;
	}
	case PCORI_OP_SPAWN: {
		pcori_frame_begin(&w, PCORI_CTL_SPAWN);
		pcori_w_u32(&w, r->reqid);
		pcori_w_str(&w, r->host ? r->host : "");
		uint16_t argc = 0;
		while (r->argv[argc] && argc < PCORI_SPAWN_ARGS_MAX)
			argc++;
		pcori_w_u16(&w, argc);
		for (uint16_t i = 0; i < argc; i++)
			pcori_w_str(&w, r->argv[i]);
		break;
	}
	default:
		PCORI_ASSERT(0);
	}
	if (!pcori_frame_end(&w)) {
		HASH_DEL(NM.pending, r);
		pcori_wbuf_free(&w);
		complete(r, w.err ? PCOR_ERR_NOMEM : PCOR_ERR_INVAL);
		return;
	}
	if (target == -2)
		conn_push(NM.seed, &w);
	else
		pcori_agent_to(target, &w);
	pcori_wbuf_free(&w);
}

static int key_home(const pcori_dreq_t *r)
{
	if (r->op == PCORI_OP_MLOOKUP)
		return pcori_agent_home_of(pcori_hash_pid(r->pid));
	return pcori_agent_home_of(pcori_hash_str(r->name));
}

/* The agent r was sent to went away: try the next home or give up. */
static void retarget(pcori_dreq_t *r)
{
	HASH_DEL(NM.pending, r);
	if (r->op == PCORI_OP_UNPUB) {
		complete(r, PCOR_OK); /* the entry went with its home */
		return;
	}
	if ((r->op == PCORI_OP_MLOOKUP && r->phase == 1) ||
	    r->op == PCORI_OP_SPAWN || ++r->attempts > 8) {
		complete(r, PCOR_ERR_PEER_LOST);
		return;
	}
	send_req(r, key_home(r));
}

static bool join_done(void)
{
	if (!NM.registered)
		return false;
	bool done = true;
	pcori_lock(&NM.lock);
	for (pcori_view_t *e = NM.view; e && done; e = e->hh.next) {
		if (e->pid == self_pid())
			continue;
		/* The initial members must be registered... */
		if (e->pid < NM.boot.nprocs && e->state == PCORI_VIEW_JOINING)
			done = false;
		/* ...and we must reach everyone we were told about. */
		if (e->dialed && !e->conn && view_live(e))
			done = false;
	}
	pcori_unlock(&NM.lock);
	return done;
}

/* JOIN and SPAWN requests wait here for membership to catch up. */
static void check_waiting(void)
{
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.waiting)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		int st = 0;
		if (r->op == PCORI_OP_JOIN) {
			if (!join_done())
				continue;
			pcori_lock(&NM.lock);
			NM.joined = true;
			pcori_unlock(&NM.lock);
		} else {
			pcori_lock(&NM.lock);
			pcori_view_t *e = view_find(r->out_pid);
			int s = e ? e->state : PCORI_VIEW_JOINING;
			pcori_unlock(&NM.lock);
			if (s == PCORI_VIEW_JOINING)
				continue;
			st = s == PCORI_MEMBER_ALIVE ? PCOR_OK
						      : PCOR_ERR_PEER_LOST;
		}
		pcori_list_remove(&r->link);
		complete(r, st);
	}
}

static void send_ready(void)
{
	if (NM.ready_sent)
		return;
	NM.ready_sent = true;
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_READY);
	pcori_lock(&NM.lock);
	pcori_w_member(&w, &NM.self);
	pcori_unlock(&NM.lock);
	if (pcori_frame_end(&w)) {
		pcori_list_t *pos;
		pcori_list_foreach(pos, &NM.conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			if (c->hello_sent)
				conn_push(c, &w);
		}
	}
	pcori_wbuf_free(&w);
}

static void handle_reply(uint32_t reqid, int status, pcori_rbuf_t *r)
{
	if (reqid & REQID_REG) {
		if (status == PCOR_OK && !NM.registered) {
			NM.registered = true;
			pcori_lock(&NM.lock);
			pcori_view_t *me = view_find(self_pid());
			if (me)
				me->state = PCORI_MEMBER_ALIVE;
			pcori_unlock(&NM.lock);
			send_ready();
			check_waiting();
		}
		return;
	}
	pcori_dreq_t *q;
	HASH_FIND(hh, NM.pending, &reqid, sizeof(reqid), q);
	if (!q)
		return; /* late: already timed out or retried */
	HASH_DEL(NM.pending, q);
	switch (q->op) {
	case PCORI_OP_MLOOKUP: {
		if (status == PCOR_ERR_NOTFOUND && q->phase == 0 &&
		    q->pid != q->target) {
			/* Not at home (yet): ask the process itself. */
			q->phase = 1;
			send_req(q, q->pid);
			return;
		}
		if (status) {
			complete(q, status == PCOR_ERR_NOTFOUND
					    ? PCOR_ERR_NOPEER
					    : status);
			return;
		}
		pcori_member_t m;
		pcori_r_member(r, &m);
		if (!pcori_r_done(r) || m.pid != q->pid) {
			complete(q, PCOR_ERR_PROTO);
			return;
		}
		pcori_lock(&NM.lock);
		pcori_view_t *e = view_find(q->pid);
		if (e && e->state == PCORI_MEMBER_ALIVE) {
			e->member = m;
			e->member.state = PCORI_MEMBER_ALIVE;
			e->cached = true;
		}
		pcori_unlock(&NM.lock);
		*q->out_member = m;
		q->out_member->state = PCORI_MEMBER_ALIVE;
		complete(q, PCOR_OK);
		return;
	}
	case PCORI_OP_PUB:
		if (status == PCOR_OK) {
			pcori_myname_t *n = calloc(1, sizeof(*n));
			if (!n) {
				complete(q, PCOR_ERR_NOMEM);
				return;
			}
			snprintf(n->name, sizeof(n->name), "%s", q->name);
			n->pid = q->pid;
			n->thid = q->thid;
			n->home = q->target;
			HASH_ADD_STR(NM.mynames, name, n);
		}
		complete(q, status);
		return;
	case PCORI_OP_UNPUB:
		complete(q, status == PCOR_ERR_NOTFOUND ? PCOR_OK : status);
		return;
	case PCORI_OP_NLOOKUP:
		if (status == PCOR_ERR_AGAIN) {
			send_req(q, key_home(q)); /* the home moved */
			return;
		}
		if (status == PCOR_OK) {
			uint32_t pid = pcori_r_u32(r), thid = pcori_r_u32(r);
			if (!pcori_r_done(r) || pid > INT_MAX || thid > INT_MAX) {
				complete(q, PCOR_ERR_PROTO);
				return;
			}
			q->out_pid = (int)pid;
			q->out_thid = (int)thid;
		} else if (status == PCOR_ERR_NOTFOUND && q->wait_ms) {
			status = PCOR_ERR_TIMEDOUT;
		}
		complete(q, status);
		return;
	case PCORI_OP_SPAWN: {
		if (status) {
			complete(q, status);
			return;
		}
		uint32_t pid = pcori_r_u32(r);
		if (!pcori_r_done(r) || pid > INT_MAX) {
			complete(q, PCOR_ERR_PROTO);
			return;
		}
		q->out_pid = (int)pid;
		pcori_dir_grow_nprocs((int)pid);
		/* Done when the newcomer says READY (or fails). */
		pcori_list_push_back(&NM.waiting, &q->link);
		check_waiting();
		return;
	}
	default:
		complete(q, PCOR_ERR_PROTO);
	}
}

/* A request from an application thread, on the agent thread. */
static void start_request(pcori_dreq_t *r)
{
	uint64_t now = pcori_now_ns();
	uint64_t rt = (uint64_t)NM.req_timeout_ms * 1000000ull;
	r->target = -1;
	r->phase = 0;
	r->attempts = 0;
	r->deadline_ns = now + rt;
	switch (r->op) {
	case PCORI_OP_JOIN:
		r->deadline_ns = now + (uint64_t)NM.join_timeout_ms * 1000000ull;
		pcori_list_push_back(&NM.waiting, &r->link);
		send_reg(pcori_agent_home_of(pcori_hash_pid(self_pid())));
		check_waiting();
		return;
	case PCORI_OP_MLOOKUP:
		send_req(r, key_home(r));
		return;
	case PCORI_OP_PUB: {
		pcori_myname_t *n;
		HASH_FIND_STR(NM.mynames, r->name, n);
		if (n) {
			complete(r, PCOR_ERR_EXISTS);
			return;
		}
		send_req(r, key_home(r));
		return;
	}
	case PCORI_OP_UNPUB: {
		pcori_myname_t *n;
		HASH_FIND_STR(NM.mynames, r->name, n);
		if (!n) {
			complete(r, PCOR_ERR_NOTFOUND);
			return;
		}
		HASH_DEL(NM.mynames, n);
		/* Former homes may hold a copy: tell everyone, no reply. */
		pcori_wbuf_t w = {0};
		pcori_frame_begin(&w, PCORI_CTL_UNPUB);
		pcori_w_u32(&w, 0);
		pcori_w_str(&w, n->name);
		if (pcori_frame_end(&w)) {
			pcori_list_t *pos;
			pcori_list_foreach(pos, &NM.conns)
			{
				pcori_conn_t *c = PCORI_CONTAINER_OF(
					pos, pcori_conn_t, link);
				if (c->kind == CONN_PEER)
					conn_push(c, &w);
			}
		}
		pcori_wbuf_free(&w);
		free(n);
		send_req(r, key_home(r));
		return;
	}
	case PCORI_OP_NLOOKUP:
		if (r->wait_ms < 0)
			r->deadline_ns = UINT64_MAX;
		else
			r->deadline_ns += (uint64_t)r->wait_ms * 1000000ull;
		send_req(r, key_home(r));
		return;
	case PCORI_OP_SPAWN:
		if (!NM.seed) {
			complete(r, PCOR_ERR_NOSUPPORT);
			return;
		}
		r->deadline_ns = now + (uint64_t)NM.join_timeout_ms * 1000000ull;
		send_req(r, -2);
		return;
	default:
		complete(r, PCOR_ERR_INVAL);
	}
}

int pcori_agent_call(pcori_dreq_t *r)
{
	/* A hook calling back into the directory would wait for itself. */
	if (NM.thread_started && pthread_equal(pthread_self(), NM.thread))
		return PCOR_ERR_AGAIN;
	atomic_store(&r->done, PCORI_WORD_PENDING);
	pcori_list_init(&r->link);
	pcori_lock(&NM.qlock);
	bool stopped = atomic_load(&NM.stop);
	if (!stopped)
		pcori_list_push_back(&NM.reqq, &r->link);
	pcori_unlock(&NM.qlock);
	if (stopped)
		return PCOR_ERR_FINALIZED;
	uint64_t one = 1;
	if (write(NM.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		PCORI_WARN(PCORI_SUB_NAMING, "agent: wake-up failed: %s",
			   strerror(errno));
	/* No timeout: the agent completes every request by its deadline. */
	pcori_wait_word(&r->done, PCORI_WORD_PENDING, 20000, -1);
	return r->status;
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
			retarget(q);
	}
	rehome();
	check_waiting();
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
				retarget(q);
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
	check_waiting();
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
	c->kind = CONN_PEER;
	e->conn = c;
	pcori_dial_ok(e);
	if (e->backlog.len) {
		conn_push(c, &e->backlog);
		pcori_wbuf_free(&e->backlog);
	}
	if (fresh) {
		pcori_dir_grow_nprocs(pid);
		rehome();
	}
	if (ready) {
		cache_entry(e, &m);
		set_alive(e);
	}
	check_waiting();
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
		if (r->err || (reqid & REQID_REG))
			return PCOR_ERR_PROTO;
		if (reqid & PCORI_REQID_PROBE) {
			pcori_dial_probe_reply(
				(int)(reqid & ~PCORI_REQID_PROBE), status);
			return PCOR_OK;
		}
		handle_reply(reqid, status, r);
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
	case PCORI_CTL_REPLY: {
		uint32_t reqid = pcori_r_u32(r);
		int status = (int32_t)pcori_r_u32(r);
		if (r->err)
			return PCOR_ERR_PROTO;
		handle_reply(reqid, status, r);
		return PCOR_OK;
	}
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
			complete(q, PCOR_ERR_TIMEDOUT);
		} else {
			next = PCORI_MIN(next, q->deadline_ns);
		}
	}
	pcori_list_foreach_safe(pos, tmp, &NM.waiting)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		if (r->deadline_ns <= now) {
			pcori_list_remove(&r->link);
			complete(r, PCOR_ERR_TIMEDOUT);
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
		start_request(r);
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
		complete(r, PCOR_ERR_FINALIZED);
	}
	pcori_unlock(&NM.qlock);
	pcori_dreq_t *q, *qt;
	HASH_ITER(hh, NM.pending, q, qt)
	{
		HASH_DEL(NM.pending, q);
		complete(q, PCOR_ERR_FINALIZED);
	}
	pcori_list_foreach_safe(pos, tmp, &NM.waiting)
	{
		pcori_dreq_t *r = PCORI_CONTAINER_OF(pos, pcori_dreq_t, link);
		pcori_list_remove(&r->link);
		complete(r, PCOR_ERR_FINALIZED);
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
