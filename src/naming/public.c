/*
 * public.c -- the public face of the directory: published names,
 * process information, dynamic spawn and membership callbacks.  Each
 * entry validates its arguments, then hands the work to the agent.
 */
#include "naming_priv.h"

#define NM pcori_nm

_Static_assert((int)PCOR_MEMBER_STARTUP == (int)PCORI_EV_STARTUP &&
		       (int)PCOR_MEMBER_EXIT == (int)PCORI_EV_EXIT &&
		       (int)PCOR_MEMBER_FAILURE == (int)PCORI_EV_FAILURE,
	       "public and internal membership events must agree");
_Static_assert((int)PCOR_PROC_ALIVE == (int)PCORI_MEMBER_ALIVE &&
		       (int)PCOR_PROC_EXITED == (int)PCORI_MEMBER_EXITED &&
		       (int)PCOR_PROC_FAILED == (int)PCORI_MEMBER_FAILED,
	       "public and internal process states must agree");
_Static_assert(PCOR_HOST_MAX == PCORI_HOST_MAX, "host identity size");
_Static_assert(PCOR_AGENT_MAX == PCORI_AGENT_ADDR_MAX, "agent address size");

static int check_name(const char *name)
{
	if (!name)
		return PCOR_ERR_INVAL;
	size_t n = strnlen(name, PCOR_NAME_MAX + 1);
	return n == 0 || n > PCOR_NAME_MAX ? PCOR_ERR_INVAL : PCOR_OK;
}

/* PCOR_OK if pid is a living member (or this process). */
static int check_member(int pid)
{
	if (pid == NM.boot.pid)
		return PCOR_OK;
	if (pid < 0)
		return PCOR_ERR_NOPEER;
	int state;
	char agent[PCORI_AGENT_ADDR_MAX];
	if (pcori_dir_view(pid, &state, agent, sizeof(agent)))
		return PCOR_ERR_NOPEER;
	if (state == PCORI_MEMBER_EXITED || state == PCORI_MEMBER_FAILED)
		return PCOR_ERR_PEER_LOST;
	return state == PCORI_MEMBER_ALIVE ? PCOR_OK : PCOR_ERR_NOPEER;
}

PCOR_API int pcor_name_publish(const char *name, int pid, int thid)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if ((rc = check_name(name)))
		return rc;
	if ((rc = check_member(pid)))
		return rc;
	if (thid < 0 || thid >= pcori_rt.max_threads)
		return PCOR_ERR_BADTHID;
	pcori_dreq_t r = {.op = PCORI_OP_PUB, .pid = pid, .thid = thid};
	snprintf(r.name, sizeof(r.name), "%s", name);
	return pcori_agent_call(&r);
}

PCOR_API int pcor_name_lookup(const char *name, int64_t timeout_ns,
			      int *pid_p, int *thid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if ((rc = check_name(name)))
		return rc;
	if (!pid_p)
		return PCOR_ERR_INVAL;
	pcori_dreq_t r = {.op = PCORI_OP_NLOOKUP};
	snprintf(r.name, sizeof(r.name), "%s", name);
	if (timeout_ns < 0)
		r.wait_ms = -1;
	else /* round up: a 1 ns wait still waits */
		r.wait_ms = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0);
	rc = pcori_agent_call(&r);
	if (rc)
		return rc;
	/* A name of a process that is gone is no use to the caller. */
	int state;
	char agent[PCORI_AGENT_ADDR_MAX];
	if (pcori_dir_view(r.out_pid, &state, agent, sizeof(agent)) == 0 &&
	    (state == PCORI_MEMBER_EXITED || state == PCORI_MEMBER_FAILED))
		return PCOR_ERR_PEER_LOST;
	*pid_p = r.out_pid;
	if (thid_p)
		*thid_p = r.out_thid;
	return PCOR_OK;
}

PCOR_API int pcor_name_unpublish(const char *name)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if ((rc = check_name(name)))
		return rc;
	pcori_dreq_t r = {.op = PCORI_OP_UNPUB};
	snprintf(r.name, sizeof(r.name), "%s", name);
	return pcori_agent_call(&r);
}

PCOR_API int pcor_proc_info(int pid, pcor_proc_info_t *info_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!info_p)
		return PCOR_ERR_INVAL;
	pcori_member_t m;
	rc = pcori_dir_lookup(pid, &m);
	if (rc != PCOR_OK && rc != PCOR_ERR_PEER_LOST)
		return rc;
	pcor_proc_info_t info;
	memset(&info, 0, sizeof(info));
	info.pid = pid;
	info.state = m.state;
	info.nports = m.nports;
	snprintf(info.host, sizeof(info.host), "%s", m.host);
	int state;
	pcori_dir_view(pid, &state, info.agent, sizeof(info.agent));
	*info_p = info;
	return rc;
}

PCOR_API int pcor_spawn(const char *host, char *const argv[], int *pid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!argv || !argv[0] || !argv[0][0] || !pid_p)
		return PCOR_ERR_INVAL;
	if (host && (!host[0] || strlen(host) > 255))
		return PCOR_ERR_INVAL;
	int argc = 0;
	while (argv[argc]) {
		if (++argc > PCORI_SPAWN_ARGS_MAX ||
		    strlen(argv[argc - 1]) > 4096)
			return PCOR_ERR_INVAL;
	}
	pcori_dreq_t r = {.op = PCORI_OP_SPAWN, .host = host, .argv = argv};
	rc = pcori_agent_call(&r);
	if (rc == PCOR_OK)
		*pid_p = r.out_pid;
	return rc;
}

PCOR_API int pcor_member_callback(pcor_member_fn fn, void *arg)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	return pcori_dir_callback_set(fn, arg);
}
