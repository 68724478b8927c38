/*
 * launch.c -- starting one process of the job and forwarding its output.
 *
 * On this machine the child is forked and execs the program.  On another
 * host it execs the remote-shell template ("ssh %h", "ip netns exec %h")
 * followed by `env PCOR_...=... program args`.  ssh and rsh join their
 * arguments into a remote shell command line, so for them every word is
 * shell-quoted; other templates get the words as they are.
 *
 * Each child gets its own process group (so a terminal's ^C reaches only
 * pcorrun, which forwards it) and dies with pcorrun (PR_SET_PDEATHSIG).
 */
#include "pcorrun.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

bool pr_host_is_local(const char *host)
{
	if (!host || !host[0] || !strcmp(host, "localhost") ||
	    !strcmp(host, "127.0.0.1"))
		return true;
	char me[256] = "";
	gethostname(me, sizeof(me) - 1);
	return !strcmp(host, me);
}

/*
 * libfabric's shm provider names its region after the process ("<pid>:N:M"
 * under /dev/shm) and removes it at close; a process killed outright
 * leaves it behind, 16 MiB each.  Called for a local child that died by a
 * signal: nobody else can own a name made of its (now reaped) pid.
 */
int pr_shm_leftovers(pid_t os_pid)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return 0;
	char prefix[32];
	int plen = snprintf(prefix, sizeof(prefix), "%d:", (int)os_pid);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *s = de->d_name;
		if (strncmp(s, prefix, (size_t)plen))
			continue;
		/* The rest must be digits ':' digits. */
		const char *t = s + plen;
		size_t a = strspn(t, "0123456789");
		if (!a || t[a] != ':')
			continue;
		size_t b = strspn(t + a + 1, "0123456789");
		if (!b || t[a + 1 + b] != '\0')
			continue;
		if (unlinkat(dirfd(d), s, 0) == 0)
			n++;
	}
	closedir(d);
	return n;
}

pr_proc_t *pr_proc_new(const char *host)
{
	pr_job_t *J = &pr_job;
	if (J->nprocs == J->cap) {
		int cap = J->cap ? J->cap * 2 : 16;
		pr_proc_t **p = realloc(J->procs, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		J->procs = p;
		J->cap = cap;
	}
	pr_proc_t *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = J->nprocs;
	p->out.fd = p->err.fd = -1;
	p->out.out = 1;
	p->err.out = 2;
	if (host && !pr_host_is_local(host))
		snprintf(p->host, sizeof(p->host), "%s", host);
	J->procs[J->nprocs++] = p;
	return p;
}

/* Find name on PATH (or take it as a path); 0 or -errno. */
int pr_resolve_prog(const char *name, char *out, size_t len)
{
	if (strchr(name, '/')) {
		if (access(name, X_OK))
			return -errno;
		struct stat st;
		if (stat(name, &st) == 0 && S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!realpath(name, out))
			snprintf(out, len, "%s", name);
		return 0;
	}
	const char *path = getenv("PATH");
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(buf, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		char cand[4096];
		snprintf(cand, sizeof(cand), "%s/%s", *d ? d : ".", name);
		struct stat st;
		if (access(cand, X_OK) == 0 && stat(cand, &st) == 0 &&
		    !S_ISDIR(st.st_mode)) {
			snprintf(out, len, "%s", cand);
			return 0;
		}
	}
	return -ENOENT;
}

/* Single-quote s for a POSIX shell. */
static char *shell_quote(const char *s)
{
	size_t n = 3;
	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	char *q = malloc(n), *o = q;
	if (!q)
		return NULL;
	*o++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *c;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return q;
}

/* The variables a process gets; NULL-terminated, malloc'ed strings. */
static char **job_env(const pr_proc_t *p, bool remote, int *n_p)
{
	pr_job_t *J = &pr_job;
	int cap = 8 + J->nxvars;
	if (remote)
		for (char **e = environ; *e; e++)
			cap++;
	char **v = calloc((size_t)cap + 1, sizeof(*v));
	if (!v)
		return NULL;
	int n = 0;
	char buf[512];
	snprintf(buf, sizeof(buf), "PCOR_JOB_SIZE=%d", J->n);
	v[n++] = strdup(buf);
	snprintf(buf, sizeof(buf), "PCOR_JOB_PID=%d", p->pid);
	v[n++] = strdup(buf);
	snprintf(buf, sizeof(buf), "PCOR_JOB_KEY=%s", J->keyhex);
	v[n++] = strdup(buf);
	snprintf(buf, sizeof(buf), "PCOR_AGENT_ADDR=%s", J->seed_addrs);
	v[n++] = strdup(buf);
	if (remote) {
		/* A remote shell starts afresh: carry our PCOR_ knobs over. */
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "PCOR_", 5) ||
			    !strncmp(*e, "PCOR_JOB_", 9) ||
			    !strncmp(*e, "PCOR_AGENT_ADDR=", 16))
				continue;
			v[n++] = strdup(*e);
		}
	}
	for (int i = 0; i < J->nxvars; i++) {
		const char *x = J->xvars[i];
		if (strchr(x, '=')) {
			v[n++] = strdup(x);
		} else if (getenv(x)) {
			snprintf(buf, sizeof(buf), "%s=%s", x, getenv(x));
			v[n++] = strdup(buf);
		}
	}
	*n_p = n;
	return v;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **s = v; *s; s++)
		free(*s);
	free(v);
}

/* argv of the remote-shell command for p. */
static char **remote_argv(const pr_proc_t *p, char **env, int nenv,
			  char *const *argv, const char *prog)
{
	pr_job_t *J = &pr_job;
	char tmpl[1024];
	snprintf(tmpl, sizeof(tmpl), "%s", J->rsh);
	int argc = 0;
	while (argv[argc])
		argc++;
	size_t cap = 64 + (size_t)nenv + (size_t)argc;
	char **v = calloc(cap, sizeof(*v));
	if (!v)
		return NULL;
	size_t n = 0;
	for (char *save = NULL, *w = strtok_r(tmpl, " \t", &save);
	     w && n < 60; w = strtok_r(NULL, " \t", &save)) {
		char word[1024], *o = word;
		for (const char *c = w; *c && o < word + sizeof(word) - 300;
		     c++) {
			if (c[0] == '%' && c[1] == 'h') {
				o += snprintf(o, 260, "%s", p->host);
				c++;
			} else {
				*o++ = *c;
			}
		}
		*o = '\0';
		v[n++] = strdup(word);
	}
	const char *base = strrchr(v[0], '/') ? strrchr(v[0], '/') + 1 : v[0];
	bool quote = !strcmp(base, "ssh") || !strcmp(base, "rsh");
	v[n++] = strdup("env");
	for (int i = 0; i < nenv; i++)
		v[n++] = quote ? shell_quote(env[i]) : strdup(env[i]);
	v[n++] = quote ? shell_quote(prog) : strdup(prog);
	for (int i = 1; i < argc; i++)
		v[n++] = quote ? shell_quote(argv[i]) : strdup(argv[i]);
	return v;
}

int pr_launch(pr_proc_t *p, char *const *argv, const char *prog)
{
	bool remote = p->host[0] != '\0';
	int nenv = 0;
	char **env = job_env(p, remote, &nenv);
	char **rargv = env && remote ? remote_argv(p, env, nenv, argv, prog)
				     : NULL;
	int out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
	int rc = -ENOMEM;
	if (!env || (remote && !rargv))
		goto out;
	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) ||
	    pipe2(ex, O_CLOEXEC)) {
		rc = -errno;
		goto out;
	}
	pid_t parent = getpid();
	pid_t c = fork();
	if (c < 0) {
		rc = -errno;
		goto out;
	}
	if (c == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (remote) {
			execvp(rargv[0], rargv);
		} else {
			for (int i = 0; i < nenv; i++)
				putenv(env[i]);
			execv(prog, argv);
		}
		int e = errno;
		if (write(ex[1], &e, sizeof(e)) < 0)
			_exit(126);
		_exit(127);
	}
	setpgid(c, c); /* both sides: whichever runs first */
	close(out[1]);
	close(err[1]);
	close(ex[1]);
	out[1] = err[1] = ex[1] = -1;
	/* exec succeeded when the CLOEXEC pipe closes without a word. */
	int e = 0;
	ssize_t n;
	do
		n = read(ex[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	p->os_pid = c;
	p->state = PR_STARTING;
	p->out.fd = out[0];
	p->err.fd = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	out[0] = err[0] = -1;
	rc = n == (ssize_t)sizeof(e) ? -e : 0;
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	free_strv(env);
	free_strv(rargv);
	return rc;
}

static void write_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* our own output is gone: nothing to do */
		b += w;
		n -= (size_t)w;
	}
}

static void emit_line(const pr_proc_t *p, int out, const char *b, size_t n)
{
	char tag[32];
	int tl = snprintf(tag, sizeof(tag), "[%d] ", p->pid);
	char *line = malloc((size_t)tl + n + 1);
	if (!line) {
		write_all(out, b, n);
		return;
	}
	memcpy(line, tag, (size_t)tl);
	memcpy(line + tl, b, n);
	write_all(out, line, (size_t)tl + n);
	free(line);
}

void pr_stream_close(pr_proc_t *p, pr_stream_t *s)
{
	if (s->fd < 0)
		return;
	if (s->partlen) {
		s->part[s->partlen++] = '\n';
		emit_line(p, s->out, s->part, s->partlen);
	}
	free(s->part);
	s->part = NULL;
	s->partlen = 0;
	close(s->fd);
	s->fd = -1;
}

/* Forward what the stream has; 0, or -1 at end of file. */
int pr_stream_read(pr_proc_t *p, pr_stream_t *s)
{
	char buf[65536];
	ssize_t n = read(s->fd, buf, sizeof(buf));
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1;
	if (!pr_job.tag) {
		write_all(s->out, buf, (size_t)n);
		return 0;
	}
	size_t start = 0;
	for (size_t i = 0; i < (size_t)n; i++) {
		if (buf[i] != '\n')
			continue;
		if (s->partlen) {
			char *l = realloc(s->part, s->partlen + i - start + 2);
			if (l) {
				s->part = l;
				memcpy(l + s->partlen, buf + start,
				       i - start + 1);
				emit_line(p, s->out, l,
					  s->partlen + i - start + 1);
			}
			s->partlen = 0;
		} else {
			emit_line(p, s->out, buf + start, i - start + 1);
		}
		start = i + 1;
	}
	if (start < (size_t)n) {
		size_t rest = (size_t)n - start;
		char *l = realloc(s->part, s->partlen + rest + 2);
		if (l) {
			s->part = l;
			memcpy(l + s->partlen, buf + start, rest);
			s->partlen += rest;
		}
	}
	return 0;
}
