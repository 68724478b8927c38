/*
 * api.h -- private glue of the public API layer (src/api).
 */
#ifndef PCOR_API_H
#define PCOR_API_H

#include "../dispatch/dispatch.h"

/* Internal receive entry shared by pcor_recv_* and the paper's recv*. */
int pcori_api_recv(pcori_req_kind_t kind, int pid, int thid, int tag,
		   void *buf, size_t cap, const pcori_report_t *rep,
		   pcor_handle_t *h_p);

#endif /* PCOR_API_H */
