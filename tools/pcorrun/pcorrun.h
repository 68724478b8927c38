/*
 * pcorrun.h -- private to the launcher: the job, its processes and the
 * bootstrap server every process reports to.
 *
 *   main.c    options, help, the event loop and the job's fate
 *   launch.c  starting a process (fork, or a remote-shell command) and
 *             forwarding its output
 *   seed.c    the bootstrap server: authenticated connections from the
 *             processes, the table of agents, spawn requests
 */
#ifndef PCORRUN_H
#define PCORRUN_H

#include "naming/naming_priv.h"

#include <sys/types.h>

#define PR_MAX_HOSTS 4096

typedef enum pr_state {
	PR_STARTING = 1, /* launched, not yet reported to the seed */
	PR_JOINED,       /* reported: it has an agent */
	PR_DONE,         /* reaped */
} pr_state_t;

/* Output of one stream of one process, split into lines when tagging. */
typedef struct pr_stream {
	int fd;          /* read end, -1 once closed */
	int out;         /* 1 or 2: where it goes */
	char *part;      /* incomplete line (tagging only) */
	size_t partlen;
} pr_stream_t;

/* One process of the job. */
typedef struct pr_proc {
	int pid;           /* pcor pid */
	pid_t os_pid;      /* the child: the program or the remote shell */
	char host[256];    /* "" for this machine */
	int state;         /* pr_state_t */
	int status;        /* wait status once PR_DONE */
	bool killed;       /* we ended it */
	pr_stream_t out, err;
	pcori_conn_t *conn; /* its bootstrap connection */
	char agent[PCORI_AGENT_ADDR_MAX];
	/* a process started by pcor_spawn: who to answer */
	pcori_conn_t *spawner;
	uint32_t spawn_reqid;
} pr_proc_t;

/* The job. */
typedef struct pr_job {
	/* options */
	int n;
	char **hosts;   /* round-robin over these; NULL: all local */
	int nhosts;
	const char *rsh;
	bool tag;
	bool keep_going;
	int timeout_s;
	const char *agent_if;
	char **xvars;   /* -x NAME[=VALUE] */
	int nxvars;
	char **argv;    /* program and arguments */
	char prog[4096];
	/* state */
	uint8_t key[PCORI_KEY_BYTES];
	char keyhex[2 * PCORI_KEY_BYTES + 1];
	char seed_addrs[256];
	int listen_fd;
	pr_proc_t **procs;
	int nprocs, cap;
	int joined_initial;
	bool table_sent;
	pcori_list_t conns;  /* seed connections not yet tied to a process */
	int exit_code;       /* first non-zero status, as a shell would say */
	bool aborting;
	uint64_t kill_at_ns; /* SIGKILL stragglers after this */
	uint64_t start_ns;
	uint64_t n_rejected;
} pr_job_t;

extern pr_job_t pr_job;

/* launch.c */
bool pr_host_is_local(const char *host);
int pr_launch(pr_proc_t *p, char *const *argv, const char *prog);
int pr_stream_read(pr_proc_t *p, pr_stream_t *s);
void pr_stream_close(pr_proc_t *p, pr_stream_t *s);
int pr_resolve_prog(const char *name, char *out, size_t len);
/* Remove what libfabric's shm provider left of a killed local process. */
int pr_shm_leftovers(pid_t os_pid);
pr_proc_t *pr_proc_new(const char *host);

/* seed.c */
int pr_seed_listen(bool local);
void pr_seed_accept(void);
/* An event on a seed connection; false if it was closed. */
void pr_seed_event(pcori_conn_t *c, short revents);
void pr_seed_proc_done(pr_proc_t *p);
/* One more initial process reported (or ended without using pcor). */
void pr_seed_count_initial(void);
void pr_seed_close_all(void);

/* main.c */
void pr_abort(const char *fmt, ...) PCORI_PRINTF(1, 2);

#endif /* PCORRUN_H */
