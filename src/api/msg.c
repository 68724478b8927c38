/*
 * msg.c -- the prefixed messaging API: argument checks, then the path
 * for the destination (same process here).
 */
#include "api.h"

/* Sizes beyond this are nonsense for any path (negative ints cast). */
#define PCORI_MAX_MSG ((size_t)SSIZE_MAX)

static int check_send(int pid, int thid, int tag, const void *buf, size_t len,
		      pcor_handle_t *h_p)
{
	PCORI_HOP(PCORI_HOP_SEND);
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
	return PCOR_OK;
}

static int send_to(pcori_req_kind_t kind, int pid, int thid, int tag,
		   uint32_t ctx, const void *buf, size_t len, unsigned flags,
		   pcor_handle_t *h_p)
{
	if (PCORI_LIKELY(pid == pcori_rt.pid))
		return pcori_local_send(kind, thid, tag, ctx, buf, len, flags,
					h_p);
	if (!pcori_net.up)
		return PCOR_ERR_UNREACHABLE;
	return pcori_remote_send(kind, pid, thid, tag, ctx, buf, len, flags,
				 h_p);
}

int pcori_api_send_copy(int pid, int thid, int tag, uint32_t ctx,
			const void *buf, size_t len, pcor_handle_t *h_p)
{
	int rc = check_send(pid, thid, tag, buf, len, h_p);
	if (PCORI_UNLIKELY(rc))
		return rc;
	return send_to(PCORI_REQ_SEND_COPY, pid, thid, tag, ctx, buf, len, 0,
		       h_p);
}

int pcori_api_send_hold(int pid, int thid, int tag, uint32_t ctx,
			const void *buf, size_t len, pcor_handle_t *h_p)
{
	int rc = check_send(pid, thid, tag, buf, len, h_p);
	if (PCORI_UNLIKELY(rc))
		return rc;
	/*
	 * To another process: a sendDMA from any memory (the ports read it
	 * where it is).  To our own, a copy: a send to oneself must not wait
	 * for the receive the same thread would post next.
	 */
	pcori_req_kind_t kind = pid == pcori_rt.pid ? PCORI_REQ_SEND_COPY
						   : PCORI_REQ_SEND_DMA;
	return send_to(kind, pid, thid, tag, ctx, buf, len, 0, h_p);
}

PCOR_API int pcor_send_copy(int pid, int thid, int tag, const void *buf,
			    size_t len, pcor_handle_t *h_p)
{
	return pcori_api_send_copy(pid, thid, tag, 0, buf, len, h_p);
}

PCOR_API int pcor_send_dma(int pid, int thid, int tag, void *buf, size_t len,
			   unsigned flags, pcor_handle_t *h_p)
{
	int rc = check_send(pid, thid, tag, buf, len, h_p);
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(flags & ~PCOR_SEND_HANDOVER))
		return PCOR_ERR_INVAL;
	if (buf) {
		rc = pcori_dma_check(buf, len);
		if (PCORI_UNLIKELY(rc))
			return rc;
		/* A handed-over buffer is passed on whole, so it must be one. */
		if ((flags & PCOR_SEND_HANDOVER) &&
		    PCORI_UNLIKELY(!pcori_dma_is_block_start(buf)))
			return PCOR_ERR_NOTDMA;
	}
	return send_to(PCORI_REQ_SEND_DMA, pid, thid, tag, 0, buf, len, flags,
		       h_p);
}

int pcori_api_pattern_check(int pid, int thid, int tag)
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
	return PCOR_OK;
}

int pcori_api_recv(pcori_req_kind_t kind, int pid, int thid, int tag,
		   uint32_t ctx, void *buf, size_t cap,
		   const pcori_report_t *rep, pcor_handle_t *h_p)
{
	int rc = pcori_api_pattern_check(pid, thid, tag);
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (PCORI_UNLIKELY(cap > PCORI_MAX_MSG))
		return PCOR_ERR_BADSIZE;
	if (kind == PCORI_REQ_RECV_COPY) {
		if (PCORI_UNLIKELY(!buf && cap))
			return PCOR_ERR_BADBUF;
	} else if (PCORI_UNLIKELY(!rep->dma)) {
		return PCOR_ERR_BADBUF;
	}
	if (PCORI_UNLIKELY(!h_p))
		return PCOR_ERR_INVAL;
	return pcori_recv_post(kind, pid, thid, tag, ctx, buf, cap, rep, h_p);
}

PCOR_API int pcor_recv_copy(int pid, int thid, int tag, void *buf,
			    size_t cap, pcor_msginfo_t *info_p,
			    pcor_handle_t *h_p)
{
	pcori_report_t rep = {.info = info_p};
	return pcori_api_recv(PCORI_REQ_RECV_COPY, pid, thid, tag, 0, buf, cap,
			      &rep, h_p);
}

PCOR_API int pcor_recv_dma(int pid, int thid, int tag, void **buf_p,
			   pcor_msginfo_t *info_p, pcor_handle_t *h_p)
{
	pcori_report_t rep = {.info = info_p, .dma = buf_p};
	return pcori_api_recv(PCORI_REQ_RECV_DMA, pid, thid, tag, 0, NULL, 0,
			      &rep, h_p);
}
