/*
 * dispatch.h -- private interface of src/dispatch: the message layer
 * (match queues of this process, the MCB pool, delivery into posted
 * receives) and the data paths built on it.  This file covers the
 * same-process path; ports and dispatcher threads join it for the
 * other paths.
 */
#ifndef PCOR_DISPATCH_H
#define PCOR_DISPATCH_H

#include "../frag/frag.h"

/* Process-wide message state; set up in pcori_msg_init. */
typedef struct pcori_msg {
	pcori_mq_t *mqs;         /* one per thread id */
	int nmq;
	pcori_mcb_pool_t pool;
	_Atomic int64_t unexp_bytes; /* DMA data held by unexpected MCBs */
	int64_t unexp_max;
	int64_t backpressure_ns;
} pcori_msg_t;

extern pcori_msg_t pcori_msg;

int pcori_msg_init(const pcori_config_t *cfg, int max_threads);
/* Drop what is still queued (logged) and free everything. */
void pcori_msg_fini(void);
/* Thread registry hook: thid stopped being used; cancel its receives. */
void pcori_msg_thread_gone(int thid);

/*
 * Complete posted receive r with a message of key k: len bytes at data.
 * own_dma, when not NULL, is a DMA block holding the data (data ==
 * own_dma) that pcor owns: a recvDMA takes it as is, otherwise it is freed.
 */
void pcori_deliver(pcori_req_t *r, const pcori_mkey_t *k, const void *data,
		   size_t len, void *own_dma);

/*
 * Start a send (kind PCORI_REQ_SEND_COPY or _DMA) to a thread of this
 * process.  Arguments are validated by the caller.
 */
int pcori_local_send(pcori_req_kind_t kind, int dst_thid, int tag,
		     uint32_t ctx, const void *buf, size_t len,
		     unsigned flags, pcor_handle_t *h_p);

/*
 * Post a receive for the calling thread (kind PCORI_REQ_RECV_COPY or
 * _DMA).  Arguments are validated by the caller.
 */
int pcori_recv_post(pcori_req_kind_t kind, int pid, int thid, int tag,
		    uint32_t ctx, void *buf, size_t cap,
		    const pcori_report_t *rep, pcor_handle_t *h_p);

#endif /* PCOR_DISPATCH_H */
