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

PCOR_API int pcori_ctx_recv(int pid, int thid, int tag, uint32_t ctx,
			    void *buf, size_t cap, pcor_msginfo_t *info_p,
			    pcor_handle_t *h_p)
{
	pcori_report_t rep = {.info = info_p};
	return pcori_api_recv(PCORI_REQ_RECV_COPY, pid, thid, tag, ctx, buf,
			      cap, &rep, h_p);
}

PCOR_API int pcori_ctx_probe(int pid, int thid, int tag, uint32_t ctx,
			     pcor_msginfo_t *info_p)
{
	int rc = pcori_api_pattern_check(pid, thid, tag);
	if (PCORI_UNLIKELY(rc))
		return rc;
	int self = pcori_self_thid();
	pcori_mq_t *mq = &pcori_msg.mqs[self];
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
