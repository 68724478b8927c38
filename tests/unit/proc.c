/*
 * proc -- the kernel's word on a process of this host (core/proc.c):
 * a process's own name, a child seen running, stopped, resumed, a zombie
 * and gone; its CPU time growing while it works; a name that differs in
 * any part (start time, boot, pid or network namespace, process id)
 * refused; a process in a pid namespace of its own, whose /proc is not
 * its own, names itself unknown; one in a network namespace of its own
 * is another host's.
 */
#include "core/core.h"

#include "../common.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Bound on every wait for the kernel to show a change. */
#define WAIT_NS (10ull * 1000000000u)

/* As this process sees p. */
static bool running(const pcori_os_proc_t *p)
{
	pcori_os_proc_t me;
	uint64_t cpu;
	pcori_os_proc_self(&me);
	return pcori_os_proc_running(p, &me, &cpu);
}

/* Burn CPU until our CPU time has grown (bounded). */
static void cpu_grows(void)
{
	pcori_os_proc_t me;
	pcori_os_proc_self(&me);
	uint64_t before, now;
	CHECK(pcori_os_proc_running(&me, &me, &before));
	uint64_t end = th_now_ns() + WAIT_NS;
	volatile uint64_t x = 0;
	do {
		for (int i = 0; i < 1000000; i++)
			x += (uint64_t)i;
		CHECK(pcori_os_proc_running(&me, &me, &now));
	} while (now == before && th_now_ns() < end);
	CHECK(now > before);
}

static void self_named(void)
{
	pcori_os_proc_t me;
	pcori_os_proc_self(&me);
	static const uint8_t zero[16];
	CHECK(me.ospid == (int32_t)getpid());
	CHECK(memcmp(me.boot, zero, sizeof(zero)) != 0);
	CHECK(me.pidns != 0 && me.netns != 0 && me.start != 0);
	CHECK(running(&me));

	/* Any part different: another process, or one we cannot see. */
	pcori_os_proc_t o = me;
	o.start++;
	CHECK(!running(&o));
	o = me;
	o.boot[3] ^= 1;
	CHECK(!running(&o));
	o = me;
	o.pidns++;
	CHECK(!running(&o));
	o = me;
	o.netns++;
	CHECK(!running(&o));
	o = me;
	o.ospid = 0;
	CHECK(!running(&o));
	o.ospid = -5;
	CHECK(!running(&o));
	memset(&o, 0, sizeof(o));
	CHECK(!running(&o));
}

/* Wait (bounded) until waitpid reports what flags ask for. */
static void wait_for(pid_t pid, int flags, bool (*what)(int status))
{
	int st;
	uint64_t end = th_now_ns() + WAIT_NS;
	for (;;) {
		pid_t r = waitpid(pid, &st, flags);
		CHECK(r == pid);
		if (what(st))
			return;
		CHECK(th_now_ns() < end);
	}
}

static bool stopped(int st)
{
	return WIFSTOPPED(st);
}

static bool continued(int st)
{
	return WIFCONTINUED(st);
}

/* A child that names itself and lives until its parent lets it go. */
typedef struct child {
	pid_t pid;
	pcori_os_proc_t name; /* all 0: it could not enter its namespace */
	int up, down;         /* our ends: its name, its lifeline */
} child_t;

/* flags: the namespaces the child enters first (unshare), or 0. */
static child_t child_start(int flags)
{
	int up[2], down[2];
	CHECK(pipe(up) == 0 && pipe(down) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]); /* its read ends when the parent closes */
		pcori_os_proc_t me;
		memset(&me, 0, sizeof(me));
		if (!flags || unshare(flags) == 0)
			pcori_os_proc_self(&me);
		if (write(up[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
			_exit(2);
		char c;
		while (read(down[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	child_t k = {.pid = pid, .up = up[0], .down = down[1]};
	CHECK(read(k.up, &k.name, sizeof(k.name)) == (ssize_t)sizeof(k.name));
	return k;
}

/* Let it go and reap it: it must have ended as it should. */
static void child_end(child_t *k)
{
	close(k->down);
	int st;
	CHECK(waitpid(k->pid, &st, 0) == k->pid && WIFEXITED(st) &&
	      WEXITSTATUS(st) == 0);
	close(k->up);
}

static void child_seen(void)
{
	child_t k = child_start(0);
	CHECK(k.name.ospid == k.pid);
	CHECK(running(&k.name));

	CHECK(kill(k.pid, SIGSTOP) == 0);
	wait_for(k.pid, WUNTRACED, stopped);
	CHECK(!running(&k.name));
	CHECK(kill(k.pid, SIGCONT) == 0);
	wait_for(k.pid, WCONTINUED, continued);
	CHECK(running(&k.name));

	/* Ended but not reaped (a zombie), then gone. */
	CHECK(kill(k.pid, SIGKILL) == 0);
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)k.pid, &si, WEXITED | WNOWAIT) == 0);
	CHECK(!running(&k.name));
	int st;
	CHECK(waitpid(k.pid, &st, 0) == k.pid && WIFSIGNALED(st));
	CHECK(!running(&k.name));
	close(k.up);
	close(k.down);
}

/*
 * A process of a network namespace of its own is another host's: the
 * kernel's word is not taken for it, though the same name with our
 * namespace would be.
 */
static void other_network(void)
{
	child_t k = child_start(CLONE_NEWNET);
	pcori_os_proc_t me;
	pcori_os_proc_self(&me);
	if (k.name.ospid == 0) {
		printf("other_network: unshare(CLONE_NEWNET) refused, not run\n");
	} else {
		CHECK(k.name.ospid == k.pid && k.name.netns != me.netns);
		CHECK(!running(&k.name));
		k.name.netns = me.netns;
		CHECK(running(&k.name));
	}
	child_end(&k);
}

/*
 * A process that is pid 1 of a namespace of its own sees a /proc that
 * numbers it otherwise: it names itself unknown, and so is never mistaken
 * for this namespace's pid 1.  Run from a child: once a process has left
 * its pid namespace for its children, it cannot start any after the
 * first has ended (a sanitizer's own helper included).
 */
static void in_new_namespace(void)
{
	if (unshare(CLONE_NEWPID) != 0) {
		printf("own_namespace: unshare(CLONE_NEWPID): %s, not run\n",
		       strerror(errno));
		fflush(stdout);
		_exit(0);
	}
	child_t k = child_start(0);
	/* It is in the new namespace, as the kernel tells us... */
	struct stat ours, its;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)k.pid);
	CHECK(stat("/proc/self/ns/pid", &ours) == 0 && stat(path, &its) == 0);
	CHECK(ours.st_ino != its.st_ino);
	/* ...and could not name itself there. */
	static const uint8_t zero[16];
	CHECK(k.name.ospid == 0 && !memcmp(k.name.boot, zero, sizeof(zero)));
	CHECK(!running(&k.name));
	child_end(&k);
	fflush(stdout);
	_exit(0);
}

static void own_namespace(void)
{
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		in_new_namespace();
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	      WEXITSTATUS(st) == 0);
}

int main(void)
{
	self_named();
	cpu_grows();
	child_seen();
	other_network();
	own_namespace();
	printf("proc: ok\n");
	return 0;
}
