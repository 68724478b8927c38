/*
 * compat.c -- the pCoR paper's API: sendCopy, sendDMA, recvCopy, recvDMA,
 * testHandle.  Real exported functions (visible to nm, gdb and dlsym),
 * each forwarding to the pcor_ call of the same meaning; only the int
 * sizes and the handle-or-status return are converted here.
 */
#include "api.h"

/* The paper's sizes are ints: a negative one is refused here. */
static int negative_size(void)
{
	int rc = pcori_rt_check();
	return rc ? rc : PCOR_ERR_BADSIZE;
}

/* A send or receive returns its handle, or the negative status. */
static inline int handle_or_status(int rc, pcor_handle_t h)
{
	return rc == PCOR_OK ? h : rc;
}

PCOR_API int sendCopy(int trgt_pid, int trgt_thid, int tag, void *data,
		      int size)
{
	pcor_handle_t h = 0;
	if (size < 0)
		return negative_size();
	int rc = pcor_send_copy(trgt_pid, trgt_thid, tag, data, (size_t)size,
				&h);
	return handle_or_status(rc, h);
}

PCOR_API int sendDMA(int trgt_pid, int trgt_thid, int tag, void *data,
		     int size)
{
	pcor_handle_t h = 0;
	if (size < 0)
		return negative_size();
	int rc = pcor_send_dma(trgt_pid, trgt_thid, tag, data, (size_t)size, 0,
			       &h);
	return handle_or_status(rc, h);
}

PCOR_API int recvCopy(int src_pid, int src_thid, int tag, void *data,
		      int size, int *apid, int *athid, int *atag, int *asize)
{
	pcor_handle_t h = 0;
	if (size < 0)
		return negative_size();
	pcori_report_t rep = {
		.pid = apid, .thid = athid, .tag = atag, .size = asize};
	int rc = pcori_api_recv(PCORI_REQ_RECV_COPY, src_pid, src_thid, tag, 0,
				data, (size_t)size, &rep, &h);
	return handle_or_status(rc, h);
}

PCOR_API int recvDMA(int src_pid, int src_thid, int tag, void **data,
		     int *apid, int *athid, int *atag, int *asize)
{
	pcor_handle_t h = 0;
	pcori_report_t rep = {.pid = apid,
			      .thid = athid,
			      .tag = atag,
			      .size = asize,
			      .dma = data};
	int rc = pcori_api_recv(PCORI_REQ_RECV_DMA, src_pid, src_thid, tag, 0,
				NULL, 0, &rep, &h);
	return handle_or_status(rc, h);
}

PCOR_API int testHandle(int handle, int mode)
{
	return pcor_handle_test(handle, mode);
}
