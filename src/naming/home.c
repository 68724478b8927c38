/*
 * home.c -- the entries this agent is home for: directory entries of
 * processes, published names, and lookups waiting for a name.
 *
 * Everything here runs on the agent thread.  Requests come from peers
 * (already authenticated, their pid known from the connection, never
 * from the payload) or from this process itself through the same path.
 */
#include "naming_priv.h"

#define NM pcori_nm
#define MAX_WAITERS 65536

static int nwaiters;

static void reply_name(int src, uint32_t reqid, const pcori_hname_t *n)
{
	pcori_wbuf_t w = {0};
	pcori_w_u32(&w, (uint32_t)n->pid);
	pcori_w_u32(&w, (uint32_t)n->thid);
	pcori_agent_reply(src, reqid, w.err ? PCOR_ERR_NOMEM : PCOR_OK, &w);
	pcori_wbuf_free(&w);
}

static void waiter_free(pcori_hwait_t *h)
{
	pcori_list_remove(&h->link);
	free(h);
	nwaiters--;
}

static int on_reg(int src, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	pcori_member_t m;
	pcori_r_member(r, &m);
	if (!pcori_r_done(r) || m.pid != src)
		return PCOR_ERR_PROTO; /* only one's own entry */
	pcori_hmember_t *h;
	HASH_FIND_INT(NM.hmembers, &src, h);
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h) {
			pcori_agent_reply(src, reqid, PCOR_ERR_NOMEM, NULL);
			return PCOR_OK;
		}
		h->pid = src;
		HASH_ADD_INT(NM.hmembers, pid, h);
	}
	h->m = m;
	pcori_agent_reply(src, reqid, PCOR_OK, NULL);
	return PCOR_OK;
}

static int on_mlookup(int src, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	uint32_t upid = pcori_r_u32(r);
	if (!pcori_r_done(r) || upid > INT_MAX)
		return PCOR_ERR_PROTO;
	int pid = (int)upid;
	pcori_member_t m;
	bool found = false;
	if (pid == NM.boot.pid) {
		pcori_lock(&NM.lock);
		m = NM.self;
		found = m.pid == pid && NM.self.host[0];
		pcori_unlock(&NM.lock);
	} else {
		pcori_hmember_t *h;
		HASH_FIND_INT(NM.hmembers, &pid, h);
		if (h) {
			m = h->m;
			found = true;
		}
	}
	if (!found) {
		pcori_agent_reply(src, reqid, PCOR_ERR_NOTFOUND, NULL);
		return PCOR_OK;
	}
	pcori_wbuf_t w = {0};
	pcori_w_member(&w, &m);
	pcori_agent_reply(src, reqid, w.err ? PCOR_ERR_NOMEM : PCOR_OK, &w);
	pcori_wbuf_free(&w);
	return PCOR_OK;
}

static int on_pub(int src, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	uint8_t flags = pcori_r_u8(r);
	uint32_t pid = pcori_r_u32(r), thid = pcori_r_u32(r);
	char name[PCORI_NAME_MAX];
	pcori_r_str(r, name, sizeof(name));
	if (!pcori_r_done(r) || !name[0] || pid > INT_MAX || thid > INT_MAX)
		return PCOR_ERR_PROTO;
	pcori_hname_t *n;
	HASH_FIND_STR(NM.hnames, name, n);
	if (n) {
		/* An owner moving its own entry may overwrite it. */
		bool mine = (flags & PCORI_PUB_REPUBLISH) && n->owner == src;
		if (!mine) {
			pcori_agent_reply(src, reqid, PCOR_ERR_EXISTS, NULL);
			return PCOR_OK;
		}
	} else {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pcori_agent_reply(src, reqid, PCOR_ERR_NOMEM, NULL);
			return PCOR_OK;
		}
		snprintf(n->name, sizeof(n->name), "%s", name);
		HASH_ADD_STR(NM.hnames, name, n);
	}
	n->pid = (int)pid;
	n->thid = (int)thid;
	n->owner = src;
	/*
	 * Wake the lookups waiting for this name before the publisher
	 * hears back: when the publisher is this process, it may act on
	 * the reply (even die) before this thread writes another byte.
	 */
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.hwaits)
	{
		pcori_hwait_t *h = PCORI_CONTAINER_OF(pos, pcori_hwait_t, link);
		if (strcmp(h->name, name))
			continue;
		int wsrc = h->src;
		uint32_t wid = h->reqid;
		waiter_free(h);
		reply_name(wsrc, wid, n);
	}
	pcori_agent_reply(src, reqid, PCOR_OK, NULL);
	return PCOR_OK;
}

static int on_unpub(int src, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	char name[PCORI_NAME_MAX];
	pcori_r_str(r, name, sizeof(name));
	if (!pcori_r_done(r))
		return PCOR_ERR_PROTO;
	pcori_hname_t *n;
	HASH_FIND_STR(NM.hnames, name, n);
	if (!n || n->owner != src) {
		pcori_agent_reply(src, reqid, PCOR_ERR_NOTFOUND, NULL);
		return PCOR_OK;
	}
	HASH_DEL(NM.hnames, n);
	free(n);
	pcori_agent_reply(src, reqid, PCOR_OK, NULL);
	return PCOR_OK;
}

static int on_nlookup(int src, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	uint32_t wait_ms = pcori_r_u32(r);
	char name[PCORI_NAME_MAX];
	pcori_r_str(r, name, sizeof(name));
	if (!pcori_r_done(r))
		return PCOR_ERR_PROTO;
	pcori_hname_t *n;
	HASH_FIND_STR(NM.hnames, name, n);
	if (n) {
		reply_name(src, reqid, n);
		return PCOR_OK;
	}
	if (!wait_ms || !reqid) {
		pcori_agent_reply(src, reqid, PCOR_ERR_NOTFOUND, NULL);
		return PCOR_OK;
	}
	pcori_hwait_t *h = nwaiters < MAX_WAITERS ? calloc(1, sizeof(*h)) : NULL;
	if (!h) {
		pcori_agent_reply(src, reqid, PCOR_ERR_NOMEM, NULL);
		return PCOR_OK;
	}
	h->src = src;
	h->reqid = reqid;
	h->deadline_ns = wait_ms == UINT32_MAX
				 ? UINT64_MAX
				 : pcori_now_ns() + (uint64_t)wait_ms * 1000000ull;
	snprintf(h->name, sizeof(h->name), "%s", name);
	pcori_list_push_back(&NM.hwaits, &h->link);
	nwaiters++;
	return PCOR_OK;
}

int pcori_home_request(int src, int type, pcori_rbuf_t *body)
{
	switch (type) {
	case PCORI_CTL_REG:
		return on_reg(src, body);
	case PCORI_CTL_MLOOKUP:
		return on_mlookup(src, body);
	case PCORI_CTL_PUB:
		return on_pub(src, body);
	case PCORI_CTL_UNPUB:
		return on_unpub(src, body);
	case PCORI_CTL_NLOOKUP:
		return on_nlookup(src, body);
	default:
		return PCOR_ERR_PROTO;
	}
}

void pcori_home_member_gone(int pid)
{
	pcori_hmember_t *h;
	HASH_FIND_INT(NM.hmembers, &pid, h);
	if (h) {
		HASH_DEL(NM.hmembers, h);
		free(h);
	}
	pcori_hname_t *n, *nt;
	HASH_ITER(hh, NM.hnames, n, nt)
	{
		if (n->owner == pid) {
			HASH_DEL(NM.hnames, n);
			free(n);
		}
	}
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.hwaits)
	{
		pcori_hwait_t *w = PCORI_CONTAINER_OF(pos, pcori_hwait_t, link);
		if (w->src == pid)
			waiter_free(w);
	}
}

void pcori_home_retry_waiters(void)
{
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.hwaits)
	{
		pcori_hwait_t *w = PCORI_CONTAINER_OF(pos, pcori_hwait_t, link);
		if (pcori_agent_home_of(pcori_hash_str(w->name)) == NM.boot.pid)
			continue;
		int src = w->src;
		uint32_t reqid = w->reqid;
		waiter_free(w);
		pcori_agent_reply(src, reqid, PCOR_ERR_AGAIN, NULL);
	}
}

uint64_t pcori_home_expire(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.hwaits)
	{
		pcori_hwait_t *w = PCORI_CONTAINER_OF(pos, pcori_hwait_t, link);
		if (w->deadline_ns > now) {
			next = PCORI_MIN(next, w->deadline_ns);
			continue;
		}
		int src = w->src;
		uint32_t reqid = w->reqid;
		waiter_free(w);
		pcori_agent_reply(src, reqid, PCOR_ERR_NOTFOUND, NULL);
	}
	return next;
}

void pcori_home_fini(void)
{
	pcori_hmember_t *h, *ht;
	HASH_ITER(hh, NM.hmembers, h, ht)
	{
		HASH_DEL(NM.hmembers, h);
		free(h);
	}
	pcori_hname_t *n, *nt;
	HASH_ITER(hh, NM.hnames, n, nt)
	{
		HASH_DEL(NM.hnames, n);
		free(n);
	}
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.hwaits)
	{
		waiter_free(PCORI_CONTAINER_OF(pos, pcori_hwait_t, link));
	}
}
