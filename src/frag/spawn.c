/*
 * spawn.c -- remote thread creation (the paper's remote thread launch):
 * a process registers functions by name; any thread may start one in any
 * process and learns the new thread's id.
 *
 * Wire: a CTRL message whose body is, little-endian,
 *   u32 op, u32 id, i32 status, i32 thid, u32 arglen, char name[64], arg.
 * SPAWN asks, SPAWNED answers (status and thid).  Requests wait in a
 * small table keyed by id; a lost peer fails its waiting requests.
 *
 * Control messages ride outside the streams, so a fabric that loses one
 * would leave the asker waiting: SPAWN is sent again every
 * retransmission timeout (doubling) until answered.  The answering side
 * keeps each answer, and repeats it for a repeated request instead of
 * starting a second thread.  A SPAWN's status field carries the asker's
 * lowest unanswered id: answers to it below that are known received
 * and dropped.
 */
#include "msg.h"

#define CTRL_SPAWN PCORI_CTRL_SPAWN
#define CTRL_SPAWNED PCORI_CTRL_SPAWNED
#define NAME_MAX_ 64
#define CTRL_BODY (5 * 4 + NAME_MAX_)

typedef struct fn_entry {
	UT_hash_handle hh;
	char name[NAME_MAX_];
	pcor_remote_fn fn;
} fn_entry_t;

typedef struct pending {
	pcori_list_t link;
	uint32_t id;
	int pid;
	pcori_req_t *req;
	int thid;
} pending_t;

/* An answer we gave, kept until the asker has it. */
typedef struct answer {
	pcori_list_t link;
	int pid;
	uint32_t id;
	bool ready; /* false: the thread is being started */
	int32_t status, thid;
} answer_t;

static struct {
	pcori_lock_t lock; /* guards fns, pending, next_id, answers */
	fn_entry_t *fns;
	pcori_list_t pending;
	uint32_t next_id;
	pcori_list_t answers;
} sp = {.lock = PCORI_LOCK_INITIALIZER,
	.pending = {&sp.pending, &sp.pending},
	.answers = {&sp.answers, &sp.answers}};

/* The argument a spawned thread owns until its function returns. */
typedef struct start_arg {
	pcor_remote_fn fn;
	size_t len;
	uint8_t data[];
} start_arg_t;


static size_t arg_max(void)
{
	return pcori_net.up ? pcori_net.frag_size - CTRL_BODY
			    : (size_t)pcori_rt.cfg.frag_size - CTRL_BODY;
}

static bool name_ok(const char *name)
{
	return name && name[0] && strnlen(name, NAME_MAX_) < NAME_MAX_;
}

PCOR_API int pcor_function_register(const char *name, pcor_remote_fn fn)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!name_ok(name) || !fn)
		return PCOR_ERR_INVAL;
	fn_entry_t *e = calloc(1, sizeof(*e));
	if (!e)
		return PCOR_ERR_NOMEM;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->fn = fn;
	fn_entry_t *old;
	pcori_lock(&sp.lock);
	HASH_FIND_STR(sp.fns, e->name, old);
	if (!old)
		HASH_ADD_STR(sp.fns, name, e);
	pcori_unlock(&sp.lock);
	if (old) {
		free(e);
		return PCOR_ERR_EXISTS;
	}
	return PCOR_OK;
}

static void *spawned_main(void *p)
{
	start_arg_t *a = p;
	a->fn(a->data, a->len);
	free(a);
	return NULL;
}

/* Start a registered function here; *thid_p on success. */
static int spawn_local(const char *name, const void *arg, size_t len,
		       int *thid_p)
{
	fn_entry_t *e;
	pcori_lock(&sp.lock);
	HASH_FIND_STR(sp.fns, name, e);
	pcor_remote_fn fn = e ? e->fn : NULL;
	pcori_unlock(&sp.lock);
	if (!fn)
		return PCOR_ERR_NOTFOUND;
	start_arg_t *a = malloc(sizeof(*a) + len);
	if (!a)
		return PCOR_ERR_NOMEM;
	a->fn = fn;
	a->len = len;
	if (len)
		memcpy(a->data, arg, len);
	int rc = pcori_thread_start(spawned_main, a, true, thid_p);
	if (rc)
		free(a);
	return rc;
}

static int ctrl_post(pcori_peer_t *peer, const uint8_t *body, size_t len)
{
	return pcori_ctrl_send(peer, CTRL_SPAWN, body, len);
}

static void answer_send(pcori_peer_t *peer, uint32_t id, int32_t status,
			int32_t thid)
{
	uint8_t reply[CTRL_BODY];
	memset(reply, 0, sizeof(reply));
	pcori_put32(reply, CTRL_SPAWNED);
	pcori_put32(reply + 4, id);
	pcori_put32(reply + 8, (uint32_t)status);
	pcori_put32(reply + 12, (uint32_t)thid);
	pcori_ctrl_send(peer, CTRL_SPAWNED, reply, sizeof(reply));
}

/*
 * Forget pid's answers below low (received); find (pid, id).  Lock held.
 */
static answer_t *answers_sweep(int pid, uint32_t low, uint32_t id)
{
	answer_t *hit = NULL;
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &sp.answers)
	{
		answer_t *a = PCORI_CONTAINER_OF(pos, answer_t, link);
		if (a->pid != pid)
			continue;
		if (a->ready && low && (int32_t)(a->id - low) < 0) {
			pcori_list_remove(pos);
			free(a);
		} else if (a->id == id) {
			hit = a;
		}
	}
	return hit;
}

/* Answer SPAWN request id from peer once; repeat the answer after. */
static void spawn_request(pcori_peer_t *peer, uint32_t id, uint32_t low,
			  const char *name, const uint8_t *arg, size_t len)
{
	pcori_lock(&sp.lock);
	answer_t *a = answers_sweep(peer->pid, low, id);
	if (a) {
		bool ready = a->ready;
		int32_t status = a->status, thid = a->thid;
		pcori_unlock(&sp.lock);
		if (ready) /* our answer was lost: again */
			answer_send(peer, id, status, thid);
		return;    /* else being started: its answer will go */
	}
	a = calloc(1, sizeof(*a));
	if (a) {
		a->pid = peer->pid;
		a->id = id;
		pcori_list_push_back(&sp.answers, &a->link);
	}
	pcori_unlock(&sp.lock);
	int thid = -1;
	int rc = a ? spawn_local(name, arg, len, &thid) : PCOR_ERR_NOMEM;
	if (a) {
		pcori_lock(&sp.lock);
		a->status = rc;
		a->thid = thid;
		a->ready = true;
		pcori_unlock(&sp.lock);
	}
	answer_send(peer, id, rc, thid);
}

/* Take p off the waiting list if it is still on it. */
static bool pending_take(pending_t *p)
{
	bool found = false;
	pcori_lock(&sp.lock);
	pcori_list_t *pos;
	pcori_list_foreach(pos, &sp.pending)
	{
		if (pos == &p->link) {
			pcori_list_remove(pos);
			found = true;
			break;
		}
	}
	pcori_unlock(&sp.lock);
	return found;
}

/* The lowest id still waiting for an answer (0: none).  Lock held. */
static uint32_t pending_low(void)
{
	uint32_t low = 0;
	pcori_list_t *pos;
	pcori_list_foreach(pos, &sp.pending)
	{
		pending_t *p = PCORI_CONTAINER_OF(pos, pending_t, link);
		if (!low || (int32_t)(p->id - low) < 0)
			low = p->id;
	}
	return low;
}

void pcori_ctrl_recv(pcori_peer_t *peer, const pcori_wire_hdr_t *h,
		     const uint8_t *b)
{
	/*
	 * Everything the peer sent before leaving has been processed; its
	 * final acks come with the BYE (in case the fabric lost the last
	 * ones), and the BYE is acknowledged before the peer is let go.
	 */
	if (h->ctx == PCORI_CTRL_BYE) {
		pcori_acks_final_in(peer, b, h->frag_len);
		pcori_ctrl_send(peer, PCORI_CTRL_BYE_ACK, NULL, 0);
		pcori_peer_lost(peer->pid);
		return;
	}
	if (h->ctx == PCORI_CTRL_BYE_ACK) {
		atomic_store(&peer->bye_acked, true);
		return;
	}
	if (h->frag_len < CTRL_BODY)
		return;
	uint32_t op = pcori_get32(b), id = pcori_get32(b + 4);
	if (op == CTRL_SPAWN) {
		uint32_t arglen = pcori_get32(b + 16);
		char name[NAME_MAX_];
		memcpy(name, b + 20, NAME_MAX_);
		name[NAME_MAX_ - 1] = '\0';
		if (arglen > h->frag_len - CTRL_BODY)
			return; /* malformed: counted by nobody, dropped */
		spawn_request(peer, id, pcori_get32(b + 8), name, b + CTRL_BODY,
			      arglen);
		return;
	}
	if (op != CTRL_SPAWNED)
		return;
	pcori_req_t *req = NULL;
	int status = (int32_t)pcori_get32(b + 8);
	pcori_lock(&sp.lock);
	pcori_list_t *pos;
	pcori_list_foreach(pos, &sp.pending)
	{
		pending_t *p = PCORI_CONTAINER_OF(pos, pending_t, link);
		if (p->id == id && p->pid == peer->pid) {
			p->thid = (int32_t)pcori_get32(b + 12);
			req = p->req;
			pcori_list_remove(pos);
			break;
		}
	}
	pcori_unlock(&sp.lock);
	if (req)
		pcori_req_complete(req, status);
}

void pcori_spawn_peer_lost(int pid)
{
	pcori_list_t gone;
	pcori_list_init(&gone);
	pcori_lock(&sp.lock);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &sp.pending)
	{
		pending_t *p = PCORI_CONTAINER_OF(pos, pending_t, link);
		if (p->pid == pid) {
			pcori_list_remove(pos);
			pcori_list_push_back(&gone, pos);
		}
	}
	pcori_list_foreach_safe(pos, tmp, &sp.answers)
	{
		answer_t *a = PCORI_CONTAINER_OF(pos, answer_t, link);
		if (a->pid == pid && a->ready) {
			pcori_list_remove(pos);
			free(a);
		}
	}
	pcori_unlock(&sp.lock);
	while (!pcori_list_empty(&gone)) {
		pending_t *p = PCORI_CONTAINER_OF(gone.next, pending_t, link);
		pcori_list_remove(&p->link);
		pcori_req_complete(p->req, PCOR_ERR_PEER_LOST);
	}
}

PCOR_API int pcor_thread_spawn(int pid, const char *name, const void *arg,
			       size_t len, int *thid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!name_ok(name) || !thid_p || (len && !arg))
		return PCOR_ERR_INVAL;
	if (len > arg_max())
		return PCOR_ERR_BADSIZE;
	if (pid < 0 || pid >= pcori_rt.nprocs)
		return PCOR_ERR_BADPID;
	if (pid == pcori_rt.pid)
		return spawn_local(name, arg, len, thid_p);
	if (!pcori_net.up)
		return PCOR_ERR_UNREACHABLE;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer)
		return PCOR_ERR_BADPID;
	if ((rc = pcori_peer_ready(peer)))
		return rc;

	pcori_req_t *req = pcori_req_alloc();
	uint8_t *body = malloc(CTRL_BODY + len);
	if (!req || !body) {
		if (req)
			pcori_req_free(req);
		free(body);
		return req ? PCOR_ERR_NOMEM : PCOR_ERR_AGAIN;
	}
	req->kind = PCORI_REQ_SEND_COPY;
	pcori_req_flags(req, PCORI_REQF_REMOTE);
	pending_t pend = {.pid = pid, .req = req, .thid = -1};
	pcori_list_init(&pend.link);
	pcori_lock(&sp.lock);
	pend.id = ++sp.next_id;
	pcori_list_push_back(&sp.pending, &pend.link);
	pcori_unlock(&sp.lock);

	memset(body, 0, CTRL_BODY);
	pcori_put32(body, CTRL_SPAWN);
	pcori_put32(body + 4, pend.id);
	pcori_put32(body + 16, (uint32_t)len);
	snprintf((char *)body + 20, NAME_MAX_, "%s", name);
	if (len)
		memcpy(body + CTRL_BODY, arg, len);
	/* The answer (or the peer's loss) completes req; ask until then. */
	pcor_handle_t h = pcori_req_handle(req);
	for (uint32_t shift = 0;; shift++) {
		if (shift)
			PCORI_INFO(PCORI_SUB_DISPATCH,
				   "peer %d: no answer to spawn request %u, "
				   "asking again", pid, pend.id);
		pcori_lock(&sp.lock);
		pcori_put32(body + 8, pending_low());
		pcori_unlock(&sp.lock);
		rc = ctrl_post(peer, body, CTRL_BODY + len);
		if (rc) {
			if (pending_take(&pend)) {
				pcori_req_free(req);
				free(body);
				return rc;
			}
			/* Answered (or failed) meanwhile: take that. */
			rc = pcor_handle_test(h, PCOR_BLOCK);
			break;
		}
		int64_t wait = (int64_t)pcori_rt.cfg.rto_ms * 1000000
			       << PCORI_MIN(shift, 4u);
		rc = pcor_handle_wait(h, wait);
		if (rc != PCOR_ERR_TIMEDOUT)
			break;
	}
	free(body);
	if (rc == PCOR_OK)
		*thid_p = pend.thid;
	return rc;
}
