/*
 * dispatch.h -- private interface of src/dispatch: bringing the ports up
 * and down, the dispatcher threads of each port (polling, blocking,
 * adaptive), and who drives progress: a waiting application thread
 * polls the port its message comes through while the port's dispatcher
 * stays parked (the drive operations core/handle.c calls).  The message
 * layer and the protocol they drive are src/frag (msg.h).
 */
#ifndef PCOR_DISPATCH_H
#define PCOR_DISPATCH_H

#include "../frag/msg.h"

/* Bring ports up (after naming init) and fill self's port list. */
int pcori_net_init(const pcori_config_t *cfg, const pcori_boot_t *boot,
		   pcori_member_t *self);
/* Start dispatcher threads. */
int pcori_net_start(void);
/* Send what peers wait for (acks, queued control messages). */
void pcori_net_quiesce(void);
/*
 * Process pid left (failed: declared lost): each port hands up what it
 * wrote there and lets go of it (peer_gone), before the protocol fails
 * the peer.  The membership subscriber's first step.
 */
void pcori_net_peer_gone(int pid, bool failed);
void pcori_net_fini(void);

/* PCOR_AFFINITY: pin the calling thread (affinity.c). */
void pcori_affinity_apply(const char *spec);

/* Poll every port once (and run timers).  Returns events handled. */
int pcori_progress(void);
/* Waiting in finalize: this thread polls every port (see drive ops). */
void pcori_drive_begin(pcori_req_t *r);
void pcori_drive_end(uint64_t now);

#endif /* PCOR_DISPATCH_H */
