/*
 * ctx.c -- context-taking send and receive for the MPI shim (see ctx.h).
 * The checks mirror msg.c's; only the context differs.
 */
#include "api.h"
#include "ctx.h"

#define PCORI_MAX_MSG ((size_t)SSIZE_MAX)

PCOR_API int pcori_ctx_send(int pid, int thid, int tag, uint32_t ctx,
			    const void *buf, size_t len, pcor_handle_t *h_p)
{
	int rc = pcori_rt_check();
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(pcori_self_thid() < 0))
		return PCOR_ERR_NOTATTACHED;
	if (PCORI_UNLIKELY(pid < 0 || pid >= pcori_rt.nprocs))
		return PCOR_ERR_BADPID;
	if (PCORI_UNLIKELY(thid < 0 || thid >= pcori_rt.max_threads))
		return PCOR_ERR_BADTHID;
	if (PCORI_UNLIKELY(tag < 0))
		return PCOR_ERR_BADTAG;
	if (PCORI_UNLIKELY(len > PCORI_MAX_MSG))
		return PCOR_ERR_BADSIZE;
	if (PCORI_UNLIKELY(!buf && len))
		return PCOR_ERR_BADBUF;
	if (PCORI_UNLIKELY(!h_p))
		return PCOR_ERR_INVAL;
	if (PCORI_LIKELY(pid == pcori_rt.pid))
		return pcori_local_send(PCORI_REQ_SEND_COPY, thid, tag, ctx,
					buf, len, 0, h_p);
	if (!pcori_net.up)
		return PCOR_ERR_UNREACHABLE;
	return pcori_remote_send(PCORI_REQ_SEND_COPY, pid, thid, tag, ctx, buf,
				 len, 0, h_p);
}

PCOR_API int pcori_ctx_recv(int pid, int thid, int tag, uint32_t ctx,
			    void *buf, size_t cap, pcor_msginfo_t *info_p,
			    pcor_handle_t *h_p)
{
	int rc = pcori_rt_check();
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(pcori_self_thid() < 0))
		return PCOR_ERR_NOTATTACHED;
	if (PCORI_UNLIKELY(pid != PCOR_ANY_PID &&
			   (pid < 0 || pid >= pcori_rt.nprocs)))
		return PCOR_ERR_BADPID;
	if (PCORI_UNLIKELY(thid != PCOR_ANY_THID &&
			   (thid < 0 || thid >= pcori_rt.max_threads)))
		return PCOR_ERR_BADTHID;
	if (PCORI_UNLIKELY(tag < PCOR_ANY_TAG))
		return PCOR_ERR_BADTAG;
	if (PCORI_UNLIKELY(cap > PCORI_MAX_MSG))
		return PCOR_ERR_BADSIZE;
	if (PCORI_UNLIKELY(!buf && cap))
		return PCOR_ERR_BADBUF;
	if (PCORI_UNLIKELY(!h_p))
		return PCOR_ERR_INVAL;
	pcori_report_t rep = {.info = info_p};
	return pcori_recv_post(PCORI_REQ_RECV_COPY, pid, thid, tag, ctx, buf,
			       cap, &rep, h_p);
}

PCOR_API int pcori_ctx_probe(int pid, int thid, int tag, uint32_t ctx,
			     pcor_msginfo_t *info_p)
{
	int rc = pcori_rt_check();
	if (PCORI_UNLIKELY(rc))
		return rc;
	int self = pcori_self_thid();
	if (PCORI_UNLIKELY(self < 0))
		return PCOR_ERR_NOTATTACHED;
	if (PCORI_UNLIKELY(pid != PCOR_ANY_PID &&
			   (pid < 0 || pid >= pcori_rt.nprocs)))
		return PCOR_ERR_BADPID;
	if (PCORI_UNLIKELY(thid != PCOR_ANY_THID &&
			   (thid < 0 || thid >= pcori_rt.max_threads)))
		return PCOR_ERR_BADTHID;
	if (PCORI_UNLIKELY(tag < PCOR_ANY_TAG))
		return PCOR_ERR_BADTAG;
	pcori_mq_t *mq = &pcori_msg.mqs[self];
	int found = 0;
	pcori_lock(&mq->lock);
	pcori_list_t *pos;
	pcori_list_foreach(pos, &mq->unexp)
	{
		const pcori_mcb_t *m = PCORI_CONTAINER_OF(pos, pcori_mcb_t,
							  arrival);
		const pcori_mkey_t *k = &m->hent.key;
		if ((pid == PCOR_ANY_PID || pid == k->src_pid) &&
		    (thid == PCOR_ANY_THID || thid == k->src_thid) &&
		    (tag == PCOR_ANY_TAG || tag == k->tag) && k->ctx == ctx) {
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
