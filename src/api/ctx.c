/*
 * ctx.c -- context-taking send and receive for the MPI shim (see ctx.h).
 * Forwarders to msg.c's checked paths with a context of the caller's.
 */
#include "api.h"
#include "ctx.h"

PCOR_API int pcori_ctx_send(int pid, int thid, int tag, uint32_t ctx,
			    const void *buf, size_t len, pcor_handle_t *h_p)
{
	return pcori_api_send_copy(pid, thid, tag, ctx, buf, len, h_p);
}

PCOR_API int pcori_ctx_send_hold(int pid, int thid, int tag, uint32_t ctx,
				 const void *buf, size_t len,
				 pcor_handle_t *h_p)
{
	return pcori_api_send_hold(pid, thid, tag, ctx, buf, len, h_p);
}

/*
 * A copy receive posted in queue q, which need not be the caller's: the
 * steps of pcori_recv_post with the queue as a parameter.  The request
 * records q as its owner, where pcori_ctx_cancel looks for it.
 */
static int post_on(int q, int pid, int thid, int tag, uint32_t ctx,
		   void *buf, size_t cap, pcor_msginfo_t *info_p,
		   pcor_handle_t *h_p)
{
	pcori_mq_t *mq = &pcori_msg.mqs[q];
	pcori_req_t *r = pcori_req_alloc();
	if (PCORI_UNLIKELY(!r))
		return PCOR_ERR_AGAIN;
	r->kind = (uint16_t)PCORI_REQ_RECV_COPY;
	r->pid = pid;
	r->thid = thid;
	r->tag = tag;
	r->ctx = ctx;
	r->buf = buf;
	r->len = cap;
	r->report = (pcori_report_t){.info = info_p};
	r->owner_thid = q;
	pcori_peer_t *peer = NULL;
	if (pcori_net.up && pid != pcori_rt.pid) {
		pcori_req_flags(r, r->flags | PCORI_REQF_REMOTE);
		if (pid != PCOR_ANY_PID)
			peer = pcori_peer_get(pid);
	}
	bool lost = false;
	pcori_lock(&mq->lock);
	pcori_mcb_t *m = pcori_mq_take_unexp(mq, r);
	/* As pcori_recv_post: the loss check pairs with the loss scan. */
	if (!m && peer && atomic_load(&peer->state) == PCORI_PEER_LOST)
		lost = true;
	else if (!m)
		pcori_mq_post(mq, r);
	pcori_unlock(&mq->lock);
	*h_p = pcori_req_handle(r);
	if (m)
		pcori_mcb_claim(r, m);
	else if (lost)
		pcori_req_complete(r, PCOR_ERR_PEER_LOST);
	return PCOR_OK;
}

PCOR_API int pcori_ctx_recv(int qthid, int pid, int thid, int tag,
			    uint32_t ctx, void *buf, size_t cap,
			    pcor_msginfo_t *info_p, pcor_handle_t *h_p)
{
	pcori_report_t rep = {.info = info_p};
	if (qthid < 0 || qthid == pcori_self_thid())
		return pcori_api_recv(PCORI_REQ_RECV_COPY, pid, thid, tag, ctx,
				      buf, cap, &rep, h_p);
	int rc = pcori_api_pattern_check(pid, thid, tag);
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(qthid >= pcori_rt.max_threads))
		return PCOR_ERR_BADTHID;
	if (PCORI_UNLIKELY((!buf && cap) || cap > (size_t)SSIZE_MAX))
		return PCOR_ERR_BADBUF;
	if (PCORI_UNLIKELY(!h_p))
		return PCOR_ERR_INVAL;
	return post_on(qthid, pid, thid, tag, ctx, buf, cap, info_p, h_p);
}

PCOR_API int pcori_ctx_probe(int qthid, int pid, int thid, int tag,
			     uint32_t ctx, pcor_msginfo_t *info_p)
{
	int rc = pcori_api_pattern_check(pid, thid, tag);
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(qthid >= pcori_rt.max_threads))
		return PCOR_ERR_BADTHID;
	pcori_mq_t *mq = &pcori_msg.mqs[qthid < 0 ? pcori_self_thid() : qthid];
	/* The pattern as a posted receive would hold it. */
	pcori_req_t want = {.pid = pid, .thid = thid, .tag = tag, .ctx = ctx};
	int found = 0;
	pcori_lock(&mq->lock);
	pcori_list_t *pos;
	pcori_list_foreach(pos, &mq->unexp)
	{
		const pcori_mcb_t *m = PCORI_CONTAINER_OF(pos, pcori_mcb_t,
							  arrival);
		const pcori_mkey_t *k = &m->hent.key;
		if (pcori_mq_accepts(&want, k)) {
			if (info_p)
				*info_p = (pcor_msginfo_t){
					.pid = k->src_pid, .thid = k->src_thid,
					.tag = k->tag, .size = m->size};
			found = 1;
			break;
		}
	}
	pcori_unlock(&mq->lock);
	return found;
}

PCOR_API int pcori_ctx_cancel(pcor_handle_t h)
{
	/* A done token is a send already complete: nothing to cancel. */
	if (pcori_req_is_token(h))
		return pcori_req_token_test(h, false) ? PCOR_ERR_BADHANDLE : 0;
	pcori_req_t *r = pcori_req_lookup(h, NULL);
	if (!r)
		return PCOR_ERR_BADHANDLE;
	if (r->kind != PCORI_REQ_RECV_COPY || r->owner_thid < 0)
		return 0;
	/* Posted receives live in their poster's queue, under its lock. */
	pcori_mq_t *mq = &pcori_msg.mqs[r->owner_thid];
	pcori_lock(&mq->lock);
	bool was = pcori_mq_unpost(mq, r);
	pcori_unlock(&mq->lock);
	if (!was)
		return 0;
	pcori_req_complete(r, PCOR_ERR_CANCELED);
	return 1;
}

PCOR_API int pcori_ctx_knob(const char *name, int64_t *v_p)
{
	for (size_t i = 0; i < pcori_nknobs; i++) {
		const pcori_knob_t *k = &pcori_knobs[i];
		if (k->type == PCORI_KNOB_STRING || strcmp(k->name, name))
			continue;
		*v_p = *(const int64_t *)((const char *)&pcori_rt.cfg +
					  k->offset);
		return PCOR_OK;
	}
	return PCOR_ERR_INVAL;
}
