/*
 * starve_app -- a process whose directory agent cannot run while the rest
 * of it does is starved, not lost; one that stopped using CPU is.  Run by
 * pcorrun, 2 processes over pcor-shm, with a short PCOR_PEER_TIMEOUT_MS.
 * In both cases a child process of pid 1 stops pid 1's agent thread
 * alone (ptrace), after one round trip (so that the route to pid 0 needs
 * no agent).
 *
 *   starve_app starved   the agent is stopped for three peer timeouts,
 *                        while pid 1's main thread ping-pongs with pid 0,
 *                        every answer checked; pid 0 must not declare it
 *                        lost (the kernel says it runs and uses CPU), and
 *                        both finish together once the agent runs again
 *   starve_app hung      pid 1's main thread waits for a message that
 *                        never comes, so the process uses no CPU: pid 0
 *                        declares it lost (its own such receive ends with
 *                        PEER_LOST) and says so through a FIFO; then the
 *                        agent runs again, hears it was fenced out, and
 *                        pid 1's receive ends with PEER_LOST too
 *
 * Each process prints "<case>: ok" when every check held.  run.sh also
 * checks what pid 0's agent said: that it waited for a starved peer, or
 * that it fenced a hung one.  The last argument (run.sh's marker) names
 * the FIFO.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAG_PING      1
#define TAG_DONE      2
#define ROUNDS_MAX    200000000u /* bounds the ping-pong, whatever happens */
#define HOLD_TIMEOUTS 3 /* starved: the agent is stopped this many timeouts */

static void send_u32(int pid, int tag, uint32_t v)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(pid, 0, tag, &v, sizeof(v), &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static uint32_t recv_u32(int pid, int *tag_p)
{
	uint32_t v = 0;
	pcor_msginfo_t info = {0};
	pcor_handle_t h;
	CHECK_OK(
	    pcor_recv_copy(pid, 0, PCOR_ANY_TAG, &v, sizeof(v), &info, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.size == sizeof(v) && info.pid == pid);
	*tag_p = info.tag;
	return v;
}

/* The thread id (kernel's) of this process's thread named name, or -1. */
static pid_t task_named(const char *name)
{
	DIR *dir = opendir("/proc/self/task");
	CHECK(dir);
	pid_t found = -1;
	struct dirent *e;
	while ((e = readdir(dir))) {
		char path[288], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		if (!strcmp(comm, name))
			found = (pid_t)atoi(e->d_name);
	}
	closedir(dir);
	return found;
}

/*
 * The child: stop thread tid of its parent (ptrace), tell the parent
 * through fd, hold it for hold_ns or, with a fifo, until a byte comes
 * through it, and let it go.  Only system calls: the child of a threaded
 * process.  Exits 0, or 1 when a call failed.
 */
static void hold_thread(pid_t tid, int fd, uint64_t hold_ns, const char *fifo)
{
	int st;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0 ||
	    ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 ||
	    waitpid(tid, &st, __WALL) != tid || !WIFSTOPPED(st))
		_exit(1);
	char one = 1;
	if (write(fd, &one, 1) != 1)
		_exit(1);
	if (fifo) {
		int f = open(fifo, O_RDONLY); /* until pid 0 opens it too */
		if (f < 0 || read(f, &one, 1) != 1)
			_exit(1);
		close(f);
	} else {
		struct timespec t = {(time_t)(hold_ns / 1000000000u),
				     (long)(hold_ns % 1000000000u)};
		while (nanosleep(&t, &t) != 0 && errno == EINTR)
			;
	}
	_exit(ptrace(PTRACE_DETACH, tid, NULL, NULL) == 0 ? 0 : 1);
}

/* pid 1: one round trip, then a child stops the agent; its pid. */
static pid_t stop_agent(uint64_t hold_ns, const char *fifo)
{
	pid_t agent = task_named("pcor-agent");
	CHECK(agent > 0);
	int tag;
	send_u32(0, TAG_PING, 0);
	CHECK(recv_u32(0, &tag) == ~0u && tag == TAG_PING);
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0)
		hold_thread(agent, fds[1], hold_ns, fifo);
	close(fds[1]);
	char one;
	/* The agent is stopped once the child says so (or it failed). */
	CHECK(read(fds[0], &one, 1) == 1);
	close(fds[0]);
	return child;
}

static void child_done(pid_t child)
{
	int st;
	CHECK(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* pid 0: the round trip before the agent is stopped. */
static void partner_first(void)
{
	int tag;
	uint32_t v = recv_u32(1, &tag);
	CHECK(tag == TAG_PING && v == 0);
	send_u32(1, TAG_PING, ~v);
}

static void starved(int me, uint64_t timeout_ns)
{
	if (me == 0) {
		partner_first();
		/* Every ping answered until pid 1 says it is done. */
		for (uint32_t n = 1;; n++) {
			int tag;
			uint32_t v = recv_u32(1, &tag);
			if (tag == TAG_DONE) {
				CHECK(v == n);
				return;
			}
			CHECK(tag == TAG_PING && v == n && n < ROUNDS_MAX);
			send_u32(1, TAG_PING, ~v);
		}
	}
	/*
	 * From before the child exists: its hold starts before stop_agent
	 * returns, so a clock read after that may see less than the hold.
	 */
	uint64_t t0 = th_now_ns();
	pid_t child = stop_agent(HOLD_TIMEOUTS * timeout_ns, NULL);
	uint32_t i = 1;
	for (; i < ROUNDS_MAX; i++) {
		int st, tag;
		pid_t w = waitpid(child, &st, WNOHANG);
		CHECK(w == 0 || w == child);
		if (w == child) {
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
			break;
		}
		send_u32(0, TAG_PING, i);
		CHECK(recv_u32(0, &tag) == ~i && tag == TAG_PING);
	}
	uint64_t held = th_now_ns() - t0;
	printf("starved: agent stopped %.0f ms, %u round trips meanwhile\n",
	       (double)held / 1e6, i);
	CHECK(held >= HOLD_TIMEOUTS * timeout_ns);
	send_u32(0, TAG_DONE, i);
}

/* A receive from pid that nothing will match: it must end PEER_LOST. */
static void receive_lost(int pid)
{
	uint32_t v;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(pid, 0, TAG_DONE, &v, sizeof(v), NULL, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	printf("hung: the receive from %d ended with PEER_LOST\n", pid);
}

static void hung(int me, const char *fifo)
{
	if (me == 0) {
		partner_first();
		receive_lost(1);
		/* Let pid 1's agent go (its child reads the other end). */
		int f = open(fifo, O_WRONLY);
		CHECK(f >= 0);
		char one = 1;
		CHECK(write(f, &one, 1) == 1);
		close(f);
		return;
	}
	CHECK(mkfifo(fifo, 0600) == 0);
	pid_t child = stop_agent(0, fifo);
	receive_lost(0);
	child_done(child);
	unlink(fifo);
}

int main(int argc, char **argv)
{
	if (argc < 3 ||
	    (strcmp(argv[1], "starved") && strcmp(argv[1], "hung"))) {
		fprintf(stderr, "usage: starve_app starved|hung MARKER\n");
		return 2;
	}
	CHECK_OK(pcor_init(&argc, &argv));
	int me = pcor_self_pid();
	CHECK(pcor_nprocs() == 2);
	const char *t = getenv("PCOR_PEER_TIMEOUT_MS");
	CHECK(t && atol(t) > 0);
	if (!strcmp(argv[1], "hung")) {
		char fifo[512];
		const char *dir = getenv("TMPDIR");
		snprintf(fifo, sizeof(fifo), "%s/%s.fifo", dir ? dir : "/tmp",
			 argv[argc - 1]);
		hung(me, fifo);
	} else {
		starved(me, (uint64_t)atol(t) * 1000000u);
	}
	CHECK_OK(pcor_finalize());
	printf("%s: ok\n", argv[1]);
	return 0;
}
