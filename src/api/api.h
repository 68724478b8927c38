/*
 * api.h -- private glue of the public API layer (src/api).
 */
#ifndef PCOR_API_H
#define PCOR_API_H

#include "../dispatch/dispatch.h"

/* Internal receive entry shared by pcor_recv_* and the paper's recv*. */
int pcori_api_recv(pcori_req_kind_t kind, int pid, int thid, int tag,
		   uint32_t ctx, void *buf, size_t cap,
		   const pcori_report_t *rep, pcor_handle_t *h_p);
/* pcor_send_copy on a matching context (0: the pcor API's). */
int pcori_api_send_copy(int pid, int thid, int tag, uint32_t ctx,
			const void *buf, size_t len, pcor_handle_t *h_p);
/* The same, holding buf until the handle completes (see ctx.h). */
int pcori_api_send_hold(int pid, int thid, int tag, uint32_t ctx,
			const void *buf, size_t len, pcor_handle_t *h_p);
/* The checks of a receive's pattern (and of the runtime and caller). */
int pcori_api_pattern_check(int pid, int thid, int tag);

#endif /* PCOR_API_H */
