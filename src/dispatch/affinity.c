/*
 * affinity.c -- optional processor affinity (PCOR_AFFINITY), as Chai et
 * al. bind each MPI process to a processor: on a host with few cores,
 * processes that stay on one core keep their cache and do not chase each
 * other from core to core.
 *
 * Design notes: the calling thread is pinned while pcor_init brings the
 * ports up, so the dispatcher threads started afterwards, and every
 * thread the application starts from it, inherit the mask; threads that
 * existed before (the directory agent) keep theirs.
 */
#include "dispatch.h"

#include <errno.h>
#include <sched.h>

void pcori_affinity_apply(const char *spec)
{
	if (!spec[0] || !strcmp(spec, "off"))
		return;
	static int cpus[CPU_SETSIZE];
	int n = 0;
	if (!strcmp(spec, "auto")) {
		cpu_set_t allowed;
		if (sched_getaffinity(0, sizeof(allowed), &allowed))
			return;
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &allowed))
				cpus[n++] = i;
	} else {
		for (const char *s = spec; *s && n < CPU_SETSIZE;) {
			char *end;
			long c = strtol(s, &end, 10);
			if (end == s || c < 0 || c >= CPU_SETSIZE ||
			    (*end && *end != ',')) {
				PCORI_WARN(PCORI_SUB_DISPATCH,
					   "PCOR_AFFINITY=\"%s\": use off, auto "
					   "or a list of CPUs; ignored",
					   spec);
				return;
			}
			cpus[n++] = (int)c;
			s = *end ? end + 1 : end;
		}
	}
	if (!n)
		return;
	/* The pid is the local rank on a one-host job, a spread otherwise. */
	int cpu = cpus[pcori_rt.pid % n];
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "PCOR_AFFINITY: cannot pin to CPU %d: %s", cpu,
			   strerror(errno));
	else
		PCORI_INFO(PCORI_SUB_DISPATCH, "process %d pinned to CPU %d",
			   pcori_rt.pid, cpu);
}
