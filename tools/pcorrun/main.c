/*
 * pcorrun -- start a pcor application: N processes on this machine or
 * on several hosts, with a fresh job key, their output forwarded, and the
 * job ended as a whole when one of its processes dies.
 */
#include "pcorrun.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

pr_job_t pr_job;

static void usage(FILE *f)
{
	fprintf(f,
"usage: pcorrun -n N [options] program [args...]\n"
"\n"
"Start N processes of a pcor application.  Each gets its process id\n"
"(0..N-1), the job size, a job key made fresh for this run and the\n"
"launcher's address in its environment (PCOR_JOB_PID, PCOR_JOB_SIZE,\n"
"PCOR_JOB_KEY, PCOR_AGENT_ADDR); pcor_init does the rest.\n"
"\n"
"options:\n"
"  -n, -np N             number of processes (required)\n"
"  -H, --host h1,h2,...  hosts, used round-robin (default: this machine);\n"
"                        \"localhost\" or this machine's name: a local fork\n"
"  --hostfile FILE       hosts, one per line: \"name [slots=K]\" (a host\n"
"                        with K slots takes K consecutive processes)\n"
"  --rsh 'COMMAND %%h'    how to run a command on host %%h (default\n"
"                        'ssh %%h'); e.g. 'ip netns exec %%h'\n"
"  --agent-if ADDR       IPv4 address the launcher listens on and hands\n"
"                        out (default: loopback for a one-host job, all\n"
"                        this machine's addresses otherwise)\n"
"  -x NAME[=VALUE]       export a variable to remote processes (PCOR_*\n"
"                        variables are always exported)\n"
"  --tag-output          prefix every output line with \"[pid] \"\n"
"  --keep-going          do not end the job when a process dies\n"
"  --timeout SEC         how long the processes have to start (60)\n"
"  -h, --help            this text\n"
"\n"
"The job ends when every process has ended.  pcorrun exits with the\n"
"first non-zero status of a process (128+N for a signal N), or 0.  When\n"
"a process dies abnormally (non-zero exit, signal) pcorrun says which\n"
"and why and ends the others, unless --keep-going.  SIGINT and SIGTERM\n"
"are forwarded to every process; a second one kills them.\n"
"\n"
"One host:\n"
"  pcorrun -n 8 ./app                 # 8 local processes, loopback only\n"
"Several hosts (the program must exist at the same path on each):\n"
"  pcorrun -n 16 -H node1,node2 ./app\n"
"  pcorrun -n 16 --hostfile hosts --rsh 'ssh -o BatchMode=yes %%h' ./app\n"
"  pcorrun -n 3 -H ns1,ns2,ns3 --rsh 'ip netns exec %%h' ./app\n"
"Under a resource manager, no pcorrun is needed: pcor_init bootstraps\n"
"through PMIx:\n"
"  srun --mpi=pmix -n 64 ./app\n"
"  mpirun -n 8 ./app                  # Open MPI 4 or later\n"
"but pcor_spawn needs pcorrun.\n");
}

static int die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "pcorrun: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(pcorrun --help for usage)\n");
	return 2;
}

static int add_host(pr_job_t *J, const char *h, int slots)
{
	for (int s = 0; s < slots; s++) {
		if (J->nhosts >= PR_MAX_HOSTS)
			return -1;
		char **v = realloc(J->hosts,
				   (size_t)(J->nhosts + 1) * sizeof(*v));
		if (!v)
			return -1;
		J->hosts = v;
		J->hosts[J->nhosts] = strdup(h);
		if (!J->hosts[J->nhosts])
			return -1;
		J->nhosts++;
	}
	return 0;
}

static int read_hostfile(pr_job_t *J, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[512];
	int rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL, *name = strtok_r(line, " \t\r\n", &save);
		if (!name)
			continue;
		int slots = 1;
		char *opt = strtok_r(NULL, " \t\r\n", &save);
		if (opt && !strncmp(opt, "slots=", 6))
			slots = atoi(opt + 6);
		if (slots < 1 || slots > PR_MAX_HOSTS)
			slots = 1;
		rc = add_host(J, name, slots);
	}
	fclose(f);
	return rc;
}

static int parse_args(pr_job_t *J, int argc, char **argv)
{
	J->rsh = "ssh %h";
	J->timeout_s = 60;
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-')
			break;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--tag-output")) {
			J->tag = true;
			continue;
		}
		if (!strcmp(a, "--keep-going")) {
			J->keep_going = true;
			continue;
		}
		bool known = !strcmp(a, "-n") || !strcmp(a, "-np") ||
			     !strcmp(a, "-H") || !strcmp(a, "--host") ||
			     !strcmp(a, "--hostfile") || !strcmp(a, "--rsh") ||
			     !strcmp(a, "--agent-if") || !strcmp(a, "-x") ||
			     !strcmp(a, "--timeout");
		if (!known)
			return die_usage("unknown option %s", a);
		if (!v)
			return die_usage("%s needs a value", a);
		i++;
		char *end;
		if (!strcmp(a, "-n") || !strcmp(a, "-np")) {
			long n = strtol(v, &end, 10);
			if (*end || n < 1 || n > 65536)
				return die_usage("-n %s: not a process count "
						 "(1..65536)",
						 v);
			J->n = (int)n;
		} else if (!strcmp(a, "-H") || !strcmp(a, "--host")) {
			char buf[4096];
			snprintf(buf, sizeof(buf), "%s", v);
			for (char *s = NULL, *h = strtok_r(buf, ",", &s); h;
			     h = strtok_r(NULL, ",", &s))
				if (add_host(J, h, 1))
					return die_usage("too many hosts%s", "");
		} else if (!strcmp(a, "--hostfile")) {
			if (read_hostfile(J, v))
				return die_usage("cannot read hostfile %s", v);
		} else if (!strcmp(a, "--rsh")) {
			if (!strstr(v, "%h"))
				return die_usage("--rsh '%s' has no %%h", v);
			J->rsh = v;
		} else if (!strcmp(a, "--agent-if")) {
			J->agent_if = v;
		} else if (!strcmp(a, "-x")) {
			char **x = realloc(J->xvars, (size_t)(J->nxvars + 1) *
							     sizeof(*x));
			if (!x)
				return 1;
			J->xvars = x;
			J->xvars[J->nxvars++] = argv[i];
		} else {
			long t = strtol(v, &end, 10);
			if (*end || t < 1 || t > 86400)
				return die_usage("--timeout %s: seconds, "
						 "1..86400",
						 v);
			J->timeout_s = (int)t;
		}
	}
	if (!J->n)
		return die_usage("how many processes? (-n N)%s", "");
	if (i >= argc)
		return die_usage("no program given%s", "");
	J->argv = argv + i;
	return 0;
}

static const char *where(const pr_proc_t *p)
{
	static char buf[300];
	snprintf(buf, sizeof(buf), "on %s", p->host[0] ? p->host : "localhost");
	return buf;
}

static void signal_all(int sig)
{
	pr_job_t *J = &pr_job;
	for (int i = 0; i < J->nprocs; i++) {
		pr_proc_t *p = J->procs[i];
		if (p->state != PR_DONE && p->os_pid > 0) {
			kill(-p->os_pid, sig); /* its process group */
			kill(p->os_pid, sig);
		}
	}
}

void pr_abort(const char *fmt, ...)
{
	pr_job_t *J = &pr_job;
	if (J->aborting)
		return;
	J->aborting = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "pcorrun: %s; ending the job\n", msg);
	for (int i = 0; i < J->nprocs; i++)
		if (J->procs[i]->state != PR_DONE)
			J->procs[i]->killed = true;
	signal_all(SIGTERM);
	J->kill_at_ns = pcori_now_ns() + 3000000000ull;
	if (!J->exit_code)
		J->exit_code = 1;
}

static void describe(const pr_proc_t *p, char *buf, size_t len)
{
	if (WIFSIGNALED(p->status))
		snprintf(buf, len, "was killed by signal %d (%s)",
			 WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
	else
		snprintf(buf, len, "exited with status %d",
			 WEXITSTATUS(p->status));
}

static void on_exit_of(pr_proc_t *p, int wstatus)
{
	pr_job_t *J = &pr_job;
	int was = p->state;
	p->state = PR_DONE;
	p->status = wstatus;
	int code = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus)
					: WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus) && !p->host[0] && p->os_pid > 0) {
		int n = pr_shm_leftovers(p->os_pid);
		if (n)
			fprintf(stderr,
				"pcorrun: removed %d shared-memory file%s "
				"/dev/shm/%d:* left by process %d\n",
				n, n > 1 ? "s" : "", (int)p->os_pid, p->pid);
	}
	char why[128];
	describe(p, why, sizeof(why));
	/* From here on the table says exited (0) or failed (not 0). */
	p->status = code;
	if (was == PR_STARTING && p->pid >= J->n) {
		/* A failed pcor_spawn is the spawner's error, not the job's. */
		fprintf(stderr,
			"pcorrun: spawned process %d %s %s before joining the "
			"job\n",
			p->pid, where(p), why);
		pr_seed_proc_done(p);
		return;
	}
	if (code && !J->exit_code && !p->killed)
		J->exit_code = code;
	if (was == PR_STARTING && !code) {
		/* A program that never used pcor (pcorrun -n 4 hostname). */
		pr_seed_count_initial();
		return;
	}
	if (was == PR_STARTING) {
		if (!J->aborting)
			pr_abort("process %d %s %s before joining the job "
				 "(%s)",
				 p->pid, where(p), why,
				 p->host[0] ? "is the host reachable, and the "
					      "program there?"
					    : "see its messages above");
		return;
	}
	if (!code || p->killed || J->aborting)
		return;
	if (J->keep_going)
		fprintf(stderr, "pcorrun: process %d (pid %d %s) %s\n", p->pid,
			(int)p->os_pid, where(p), why);
	else
		pr_abort("process %d (pid %d %s) %s", p->pid, (int)p->os_pid,
			 where(p), why);
}

static void reap(void)
{
	pr_job_t *J = &pr_job;
	for (;;) {
		int st;
		pid_t c = waitpid(-1, &st, WNOHANG);
		if (c <= 0)
			return;
		for (int i = 0; i < J->nprocs; i++) {
			pr_proc_t *p = J->procs[i];
			if (p->os_pid == c && p->state != PR_DONE) {
				on_exit_of(p, st);
				break;
			}
		}
	}
}

static bool all_done(uint64_t now, uint64_t *done_since)
{
	pr_job_t *J = &pr_job;
	bool open = false;
	for (int i = 0; i < J->nprocs; i++) {
		pr_proc_t *p = J->procs[i];
		if (p->state != PR_DONE)
			return false;
		open |= p->out.fd >= 0 || p->err.fd >= 0;
	}
	if (!open)
		return true;
	/* Something the process left behind holds its output open. */
	if (!*done_since)
		*done_since = now;
	if (now - *done_since < 2000000000ull)
		return false;
	for (int i = 0; i < J->nprocs; i++) {
		pr_stream_close(J->procs[i], &J->procs[i]->out);
		pr_stream_close(J->procs[i], &J->procs[i]->err);
	}
	return true;
}

/* poll entries point back to what they watch */
enum { W_SIG, W_LISTEN, W_CONN, W_OUT, W_ERR };
typedef struct watch {
	int what;
	void *obj;
} watch_t;

static int run(int sfd)
{
	pr_job_t *J = &pr_job;
	struct pollfd *pfd = NULL;
	watch_t *w = NULL;
	size_t cap = 0;
	uint64_t done_since = 0;
	uint64_t start_deadline = J->start_ns +
				  (uint64_t)J->timeout_s * 1000000000ull;
	int nsig = 0;
	while (!all_done(pcori_now_ns(), &done_since)) {
		size_t need = 2 + (size_t)J->nprocs * 2 + 4096;
		pcori_list_t *pos, *tmp;
		pcori_list_foreach(pos, &J->conns) need++;
		if (need > cap) {
			free(pfd);
			free(w);
			cap = need * 2;
			pfd = calloc(cap, sizeof(*pfd));
			w = calloc(cap, sizeof(*w));
			if (!pfd || !w) {
				pr_abort("out of memory");
				signal_all(SIGKILL);
				return 1;
			}
		}
		size_t n = 0;
		pfd[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
		w[n++] = (watch_t){W_SIG, NULL};
		if (J->listen_fd >= 0) {
			pfd[n] = (struct pollfd){.fd = J->listen_fd,
						 .events = POLLIN};
			w[n++] = (watch_t){W_LISTEN, NULL};
		}
		pcori_list_foreach(pos, &J->conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			pfd[n] = (struct pollfd){
				.fd = c->fd,
				.events = POLLIN |
					  (pcori_conn_wants_write(c) ? POLLOUT
								      : 0)};
			w[n++] = (watch_t){W_CONN, c};
		}
		for (int i = 0; i < J->nprocs; i++) {
			pr_proc_t *p = J->procs[i];
			if (p->out.fd >= 0) {
				pfd[n] = (struct pollfd){.fd = p->out.fd,
							 .events = POLLIN};
				w[n++] = (watch_t){W_OUT, p};
			}
			if (p->err.fd >= 0) {
				pfd[n] = (struct pollfd){.fd = p->err.fd,
							 .events = POLLIN};
				w[n++] = (watch_t){W_ERR, p};
			}
		}
		int rc = poll(pfd, (nfds_t)n, 200);
		if (rc < 0 && errno != EINTR)
			break;
		for (size_t i = 0; rc > 0 && i < n; i++) {
			if (!pfd[i].revents)
				continue;
			switch (w[i].what) {
			case W_SIG: {
				struct signalfd_siginfo si;
				while (read(sfd, &si, sizeof(si)) ==
				       (ssize_t)sizeof(si)) {
					if (si.ssi_signo == SIGCHLD)
						continue;
					/* Forward; a second one kills. */
					if (++nsig == 1) {
						fprintf(stderr,
							"pcorrun: got %s, "
							"passing it on\n",
							strsignal((int)si.ssi_signo));
						for (int k = 0; k < J->nprocs;
						     k++)
							J->procs[k]->killed =
								true;
						signal_all((int)si.ssi_signo);
						J->aborting = true;
						J->kill_at_ns =
							pcori_now_ns() +
							10000000000ull;
					} else {
						signal_all(SIGKILL);
					}
					if (!J->exit_code)
						J->exit_code =
							128 + (int)si.ssi_signo;
				}
				reap();
				break;
			}
			case W_LISTEN:
				pr_seed_accept();
				break;
			case W_CONN:
				pr_seed_event(w[i].obj, pfd[i].revents);
				break;
			case W_OUT:
			case W_ERR: {
				pr_proc_t *p = w[i].obj;
				pr_stream_t *s =
					w[i].what == W_OUT ? &p->out : &p->err;
				if (s->fd >= 0 && pr_stream_read(p, s) < 0)
					pr_stream_close(p, s);
				break;
			}
			}
		}
		/* Connections past their handshake deadline. */
		pcori_list_foreach_safe(pos, tmp, &J->conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			if (!c->owner_data || c->dead)
				pr_seed_event(c, 0);
		}
		reap();
		uint64_t now = pcori_now_ns();
		if (!J->table_sent && !J->aborting && now > start_deadline)
			pr_abort("only %d of %d processes joined within %d s",
				 J->joined_initial, J->n, J->timeout_s);
		if (J->aborting && J->kill_at_ns && now > J->kill_at_ns) {
			signal_all(SIGKILL);
			J->kill_at_ns = 0;
		}
	}
	free(pfd);
	free(w);
	return J->exit_code;
}

int main(int argc, char **argv)
{
	pr_job_t *J = &pr_job;
	J->listen_fd = -1;
	pcori_list_init(&J->conns);
	int rc = parse_args(J, argc, argv);
	if (rc)
		return rc;
	if (pcori_crypto_init()) {
		fprintf(stderr, "pcorrun: cannot initialise libsodium\n");
		return 1;
	}
	pcori_key_random(J->key);
	pcori_key_to_hex(J->key, J->keyhex);

	bool all_local = true, any_local = !J->nhosts;
	for (int i = 0; i < J->nhosts; i++) {
		bool l = pr_host_is_local(J->hosts[i]);
		all_local &= l;
		any_local |= l && i < J->n;
	}
	/* Check the program here, before anything starts. */
	const char *prog = J->argv[0];
	int e = pr_resolve_prog(prog, J->prog, sizeof(J->prog));
	if (e && any_local) {
		fprintf(stderr, "pcorrun: cannot run '%s': %s\n", prog,
			strerror(-e));
		return 127;
	}
	if (e)
		snprintf(J->prog, sizeof(J->prog), "%s", prog);

	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "pcorrun: signalfd: %s\n", strerror(errno));
		return 1;
	}
	rc = pr_seed_listen(all_local);
	if (rc) {
		fprintf(stderr, "pcorrun: cannot listen on %s: %s\n",
			J->agent_if ? J->agent_if : "any address",
			pcor_strerror(rc));
		return 1;
	}
	J->start_ns = pcori_now_ns();
	for (int i = 0; i < J->n && !J->aborting; i++) {
		pr_proc_t *p = pr_proc_new(J->nhosts ? J->hosts[i % J->nhosts]
						     : NULL);
		if (!p) {
			pr_abort("out of memory");
			break;
		}
		e = pr_launch(p, J->argv, J->prog);
		if (e) {
			p->state = PR_DONE;
			p->status = 127;
			pr_abort("cannot start process %d %s: %s", i, where(p),
				 strerror(-e));
			J->exit_code = 127;
		}
	}
	rc = run(sfd);
	pr_seed_close_all();
	close(sfd);
	for (int i = 0; i < J->nprocs; i++)
		free(J->procs[i]);
	free(J->procs);
	for (int i = 0; i < J->nhosts; i++)
		free(J->hosts[i]);
	free(J->hosts);
	free(J->xvars);
	return rc;
}
