/*
 * ctx.h -- send and receive on a matching context other than 0.
 *
 * The small internal interface the MPI shim (src/mpi) builds on.  Every
 * message carries a 32-bit matching context on the wire and in its MCB;
 * the public pcor_ calls always use context 0.  A receive matches only
 * messages of its own context, so each communicator (and its collective
 * traffic) gets contexts of its own and never meets the messages of
 * another in a thread's unexpected queue.
 *
 * These functions are exported from libpcor (so libpcor_mpi can call them)
 * but are not part of the supported API: their names keep the pcori_
 * prefix and they are declared only here.
 */
#ifndef PCOR_API_CTX_H
#define PCOR_API_CTX_H

#include <stddef.h>
#include <stdint.h>

#include <pcor/pcor.h>

/*
 * pcori_ctx_send -- pcor_send_copy on matching context ctx.
 * Same checks, statuses and completion as pcor_send_copy.
 */
PCOR_API int pcori_ctx_send(int pid, int thid, int tag, uint32_t ctx,
			    const void *buf, size_t len, pcor_handle_t *h_p);

/*
 * pcori_ctx_send_hold -- pcori_ctx_send without the copy: buf (any
 * memory) stays the caller's responsibility until the handle completes,
 * and pcor reads it in place, as pcor_send_dma does with DMA memory -- a
 * large message to another process on the host moves with one copy,
 * straight into the receive.  The handle completes when the data has
 * been taken (eager: accepted; rendezvous: read).  To the caller's own
 * process it copies, as pcori_ctx_send.
 */
PCOR_API int pcori_ctx_send_hold(int pid, int thid, int tag, uint32_t ctx,
				 const void *buf, size_t len,
				 pcor_handle_t *h_p);

/*
 * pcori_ctx_recv -- pcor_recv_copy on matching context ctx: matches only
 * messages sent with the same ctx.  pid, thid and tag may be wildcards.
 *
 * qthid names the thread whose queue the receive joins: -1 for the
 * caller's own (as pcor_recv_copy), or any valid thread id, so that any
 * thread may take messages addressed to a shared "lane" thread id (the
 * MPI shim gives each communicator one; its threads need not own it).
 * A lane should be an id no thread attaches to: a thread that detaches
 * cancels the receives posted in its queue.
 */
PCOR_API int pcori_ctx_recv(int qthid, int pid, int thid, int tag,
			    uint32_t ctx, void *buf, size_t cap,
			    pcor_msginfo_t *info_p, pcor_handle_t *h_p);

/*
 * pcori_ctx_probe -- look, without taking it, for the oldest message in
 * the calling thread's unexpected queue that a receive (pid, thid, tag,
 * ctx) would match (wildcards allowed).  Messages still arriving count:
 * their size is known from their first fragment.  Read-only, under the
 * queue's lock.  qthid: the queue, as for pcori_ctx_recv.
 *
 * Returns 1 and fills *info_p (may be NULL) if one is there, 0 if not;
 * PCOR_ERR_NOTATTACHED and the other statuses of pcori_ctx_recv.
 */
PCOR_API int pcori_ctx_probe(int qthid, int pid, int thid, int tag,
			     uint32_t ctx, pcor_msginfo_t *info_p);

/*
 * pcori_ctx_cancel -- withdraw a receive that is still posted (nothing
 * has matched it): it completes with PCOR_ERR_CANCELED, to be reported
 * and released by the next test of h as usual.  Any thread may call it.
 *
 * Returns 1 if the receive was withdrawn, 0 if it had already matched
 * (or is not a posted receive); PCOR_ERR_BADHANDLE for an unknown h.
 */
PCOR_API int pcori_ctx_cancel(pcor_handle_t h);

/*
 * pcori_ctx_knob -- the value pcor_init read for the numeric knob
 * PCOR_<name> (an INT or SIZE row of the knob table, such as the MPI
 * shim's MPI_BCAST_LARGE), so the shim's tunables are declared, checked
 * and listed by pcor_info with all the others.  Call after pcor_init.
 *
 * Returns PCOR_OK and sets *v_p; PCOR_ERR_INVAL if there is no such
 * numeric knob.  Any thread.
 */
PCOR_API int pcori_ctx_knob(const char *name, int64_t *v_p);

#endif /* PCOR_API_CTX_H */
