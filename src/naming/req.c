/*
 * req.c -- the agent's requests: homes by rendezvous hashing, the own
 * entry and published names re-sent to their homes, application requests
 * (join, lookups, publish, spawn) sent, retried elsewhere when a home goes
 * away, and completed by their deadline at the latest.  Agent thread
 * only, except pcori_agent_call (any thread).  See agent.c's design notes.
 */
#include "naming_priv.h"

#include <errno.h>
#include <unistd.h>

#define NM pcori_nm

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

static bool view_live(const pcori_view_t *e)
{
	return e->state == PCORI_VIEW_JOINING || e->state == PCORI_MEMBER_ALIVE;
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
	pcori_w_u32(&w, PCORI_REQID_REG | (NM.next_reqid++ & 0x7fffffffu));
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
void pcori_dreq_rehome(void)
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

void pcori_dreq_complete(pcori_dreq_t *r, int status)
{
	r->status = status;
	pcori_wake_word(&r->done, PCORI_REQ_DONE);
}

static void pending_add(pcori_dreq_t *r, int target)
{
	/* Clear of PCORI_REQID_REG and PCORI_REQID_PROBE. */
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
		pcori_dreq_complete(r, w.err ? PCOR_ERR_NOMEM : PCOR_ERR_INVAL);
		return;
	}
	if (target == -2)
		pcori_agent_push(NM.seed, &w);
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
void pcori_dreq_retarget(pcori_dreq_t *r)
{
	HASH_DEL(NM.pending, r);
	if (r->op == PCORI_OP_UNPUB) {
		pcori_dreq_complete(r, PCOR_OK); /* the entry went with its home */
		return;
	}
	if ((r->op == PCORI_OP_MLOOKUP && r->phase == 1) ||
	    r->op == PCORI_OP_SPAWN || ++r->attempts > 8) {
		pcori_dreq_complete(r, PCOR_ERR_PEER_LOST);
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
void pcori_dreq_check_waiting(void)
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
		pcori_dreq_complete(r, st);
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
				pcori_agent_push(c, &w);
		}
	}
	pcori_wbuf_free(&w);
}

void pcori_dreq_reply_in(uint32_t reqid, int status, pcori_rbuf_t *r)
{
	if (reqid & PCORI_REQID_REG) {
		if (status == PCOR_OK && !NM.registered) {
			NM.registered = true;
			pcori_lock(&NM.lock);
			pcori_view_t *me = view_find(self_pid());
			if (me)
				me->state = PCORI_MEMBER_ALIVE;
			pcori_unlock(&NM.lock);
			send_ready();
			pcori_dreq_check_waiting();
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
			pcori_dreq_complete(q, status == PCOR_ERR_NOTFOUND
					    ? PCOR_ERR_NOPEER
					    : status);
			return;
		}
		pcori_member_t m;
		pcori_r_member(r, &m);
		if (!pcori_r_done(r) || m.pid != q->pid) {
			pcori_dreq_complete(q, PCOR_ERR_PROTO);
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
		pcori_dreq_complete(q, PCOR_OK);
		return;
	}
	case PCORI_OP_PUB:
		if (status == PCOR_OK) {
			pcori_myname_t *n = calloc(1, sizeof(*n));
			if (!n) {
				pcori_dreq_complete(q, PCOR_ERR_NOMEM);
				return;
			}
			snprintf(n->name, sizeof(n->name), "%s", q->name);
			n->pid = q->pid;
			n->thid = q->thid;
			n->home = q->target;
			HASH_ADD_STR(NM.mynames, name, n);
		}
		pcori_dreq_complete(q, status);
		return;
	case PCORI_OP_UNPUB:
		pcori_dreq_complete(q, status == PCOR_ERR_NOTFOUND ? PCOR_OK : status);
		return;
	case PCORI_OP_NLOOKUP:
		if (status == PCOR_ERR_AGAIN) {
			send_req(q, key_home(q)); /* the home moved */
			return;
		}
		if (status == PCOR_OK) {
			uint32_t pid = pcori_r_u32(r), thid = pcori_r_u32(r);
			if (!pcori_r_done(r) || pid > INT_MAX || thid > INT_MAX) {
				pcori_dreq_complete(q, PCOR_ERR_PROTO);
				return;
			}
			q->out_pid = (int)pid;
			q->out_thid = (int)thid;
		} else if (status == PCOR_ERR_NOTFOUND && q->wait_ms) {
			status = PCOR_ERR_TIMEDOUT;
		}
		pcori_dreq_complete(q, status);
		return;
	case PCORI_OP_SPAWN: {
		if (status) {
			pcori_dreq_complete(q, status);
			return;
		}
		uint32_t pid = pcori_r_u32(r);
		if (!pcori_r_done(r) || pid > INT_MAX) {
			pcori_dreq_complete(q, PCOR_ERR_PROTO);
			return;
		}
		q->out_pid = (int)pid;
		pcori_dir_grow_nprocs((int)pid);
		/* Done when the newcomer says READY (or fails). */
		pcori_list_push_back(&NM.waiting, &q->link);
		pcori_dreq_check_waiting();
		return;
	}
	default:
		pcori_dreq_complete(q, PCOR_ERR_PROTO);
	}
}

/* A request from an application thread, on the agent thread. */
void pcori_dreq_start(pcori_dreq_t *r)
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
		pcori_dreq_check_waiting();
		return;
	case PCORI_OP_MLOOKUP:
		send_req(r, key_home(r));
		return;
	case PCORI_OP_PUB: {
		pcori_myname_t *n;
		HASH_FIND_STR(NM.mynames, r->name, n);
		if (n) {
			pcori_dreq_complete(r, PCOR_ERR_EXISTS);
			return;
		}
		send_req(r, key_home(r));
		return;
	}
	case PCORI_OP_UNPUB: {
		pcori_myname_t *n;
		HASH_FIND_STR(NM.mynames, r->name, n);
		if (!n) {
			pcori_dreq_complete(r, PCOR_ERR_NOTFOUND);
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
				if (pcori_agent_is_peer(c))
					pcori_agent_push(c, &w);
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
			pcori_dreq_complete(r, PCOR_ERR_NOSUPPORT);
			return;
		}
		r->deadline_ns = now + (uint64_t)NM.join_timeout_ms * 1000000ull;
		send_req(r, -2);
		return;
	default:
		pcori_dreq_complete(r, PCOR_ERR_INVAL);
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
