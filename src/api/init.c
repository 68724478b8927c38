/*
 * init.c -- pcor_init / pcor_finalize and the process queries.
 *
 * Modules come up in dependency order (log, DMA memory, handles, message
 * layer, thread registry) and go down in reverse; a failure unwinds what
 * was set up and leaves the process as before the call.
 */
#include "api.h"

pcori_rt_t pcori_rt;

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
	pcori_rt.pid = 0;
	pcori_rt.nprocs = 1;
	pcori_rt.max_threads = (int)pcori_rt.cfg.max_threads;

	rc = pcori_dma_init((size_t)pcori_rt.cfg.dma_reserve);
	if (rc)
		goto err_log;
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
	atomic_store(&pcori_rt.state, PCORI_RT_READY);
	PCORI_INFO(PCORI_SUB_CORE, "init: pid %d of %d, %d thread ids",
		   pcori_rt.pid, pcori_rt.nprocs, pcori_rt.max_threads);
	return PCOR_OK;

err_threads:
	pcori_threads_fini();
err_msg:
	pcori_msg_fini();
err_htable:
	pcori_htable_fini();
err_dma:
	pcori_dma_fini();
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
	if (pcori_threads_others() > 0)
		return PCOR_ERR_BUSY;
	int expect = PCORI_RT_READY;
	if (!atomic_compare_exchange_strong(&pcori_rt.state, &expect,
					    PCORI_RT_INITIALIZING))
		return PCOR_ERR_FINALIZED;
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
