/*
 * init.c -- pcor_init / pcor_finalize and the process queries.
 *
 * Modules come up in dependency order (log, DMA memory, handles, message
 * layer, thread registry) and go down in reverse; a failure unwinds what
 * was set up and leaves the process as before the call.
 */
#include "api.h"
#include "../naming/naming.h"

pcori_rt_t pcori_rt;

/*
 * The one membership hook, so that a process's leaving is handled in one
 * order: the ports hand up its last words, routes are rebuilt, then the
 * protocol settles what was in flight with it.
 */
static void on_member(int pid, pcori_member_event_t ev, void *ctx)
{
	(void)ctx;
	if (ev == PCORI_EV_FAILURE || ev == PCORI_EV_EXIT)
		pcori_net_peer_gone(pid, ev == PCORI_EV_FAILURE);
	/* Paths may go through (or newly through) that process. */
	pcori_routes_stale();
	pcori_timers_kick();
	if (ev == PCORI_EV_FAILURE)
		pcori_peer_lost(pid);
	else if (ev == PCORI_EV_EXIT)
		pcori_peer_leaving(pid);
}

PCOR_API int pcor_init(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	int expect = PCORI_RT_NONE;
	if (!atomic_compare_exchange_strong(&pcori_rt.state, &expect,
					    PCORI_RT_INITIALIZING))
		return expect == PCORI_RT_FINALIZED ? PCOR_ERR_FINALIZED
						    : PCOR_ERR_BUSY;
	int rc = pcori_config_load(&pcori_rt.cfg);
	if (rc)
		goto err_state;
	rc = pcori_log_init(&pcori_rt.cfg);
	if (rc)
		goto err_state;
	/* Before any thread of ours: waiters that never spin sleep on most
	 * waits, and pay less with real fences than with membarrier. */
	pcori_fence_choose(pcori_rt.cfg.spin_ns > 0 &&
			   strcmp(pcori_rt.cfg.dispatch, "block") != 0);
	pcori_rt.max_threads = (int)pcori_rt.cfg.max_threads;
	/* Who we are and where the others are: pcorrun, PMIx, or alone. */
	pcori_boot_t boot;
	rc = pcori_naming_init(&pcori_rt.cfg, &boot);
	if (rc)
		goto err_log;
	pcori_rt.pid = boot.pid; /* nprocs is kept by the directory */
	snprintf(pcori_rt.host, sizeof(pcori_rt.host), "%s", boot.host);

	rc = pcori_dma_init((size_t)pcori_rt.cfg.dma_reserve);
	if (rc)
		goto err_naming;
	rc = pcori_htable_init((uint32_t)pcori_rt.cfg.max_handles,
			       (uint32_t)pcori_rt.max_threads);
	if (rc)
		goto err_dma;
	rc = pcori_msg_init(&pcori_rt.cfg, pcori_rt.max_threads);
	if (rc)
		goto err_htable;
	rc = pcori_threads_init(pcori_rt.max_threads, pcori_msg_thread_gone);
	if (rc)
		goto err_msg;
	int thid;
	rc = pcori_thread_register_self(&thid);
	if (rc)
		goto err_threads;
	PCORI_ASSERT(thid == 0);

	/* Ports only for a job of several processes (or one joining one). */
	pcori_member_t *self = calloc(1, sizeof(*self));
	if (!self) {
		rc = PCOR_ERR_NOMEM;
		goto err_self;
	}
	self->pid = pcori_rt.pid;
	self->state = PCORI_MEMBER_ALIVE;
	snprintf(self->host, sizeof(self->host), "%s", boot.host);
	if (boot.nprocs > 1 || boot.spawned) {
		rc = pcori_net_init(&pcori_rt.cfg, &boot, self);
		if (!rc)
			rc = pcori_dir_hook_add(on_member, NULL);
		if (!rc)
			rc = pcori_net_start();
		if (rc) {
			free(self);
			goto err_net;
		}
	}
	/*
	 * Join the directory: returns once every initial process has
	 * registered, so every pid resolves when pcor_init returns.
	 */
	rc = pcori_naming_join(self);
	free(self);
	if (rc)
		goto err_net;
	atomic_store(&pcori_rt.state, PCORI_RT_READY);
	PCORI_INFO(PCORI_SUB_CORE, "init: pid %d of %d, %d thread ids",
		   pcori_rt.pid, atomic_load(&pcori_rt.nprocs),
		   pcori_rt.max_threads);
	return PCOR_OK;

err_net:
	pcori_net_fini();
err_self:
	pcori_tls.thid_plus1 = 0;
err_threads:
	pcori_threads_fini();
err_msg:
	pcori_msg_fini();
err_htable:
	pcori_htable_fini();
err_dma:
	pcori_dma_fini();
err_naming:
	pcori_naming_fini();
err_log:
	pcori_log_fini();
err_state:
	atomic_store(&pcori_rt.state, PCORI_RT_NONE);
	return rc;
}

PCOR_API int pcor_finalize(void)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	PCORI_HOP_REPORT();
	/* Threads peers started here have no joiner: give them the linger
	 * time to end. */
	pcori_threads_wait_spawned((uint64_t)pcori_rt.cfg.linger_ms *
				   1000000u);
	if (pcori_threads_others() > 0)
		return PCOR_ERR_BUSY;
	int expect = PCORI_RT_READY;
	if (!atomic_compare_exchange_strong(&pcori_rt.state, &expect,
					    PCORI_RT_INITIALIZING))
		return PCOR_ERR_FINALIZED;
	/* Acks and data peers wait for go out before we leave. */
	pcori_net_quiesce();
	/*
	 * Then say goodbye: the others see an exit, not a failure, and no
	 * membership hook runs into a layer that is being taken down.
	 */
	pcori_naming_fini();
	pcori_net_fini();
	if (pcori_self_thid() >= 0) {
		pcori_msg_thread_gone(pcori_self_thid());
		pcori_htable_flush_tls();
		pcori_tls.thid_plus1 = 0;
	}
	pcori_threads_fini();
	pcori_msg_fini();
	pcori_htable_fini();
	pcori_dma_fini();
	pcori_log_fini();
	atomic_store(&pcori_rt.state, PCORI_RT_FINALIZED);
	return PCOR_OK;
}

PCOR_API int pcor_self_pid(void)
{
	int rc = pcori_rt_check();
	return rc ? rc : pcori_rt.pid;
}

PCOR_API int pcor_self_thid(void)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	int t = pcori_self_thid();
	return t >= 0 ? t : PCOR_ERR_NOTATTACHED;
}

PCOR_API int pcor_nprocs(void)
{
	int rc = pcori_rt_check();
	return rc ? rc : pcori_rt.nprocs;
}

PCOR_API int pcor_max_threads(void)
{
	int rc = pcori_rt_check();
	return rc ? rc : pcori_rt.max_threads;
}
