/*
 * seed.c -- the launcher's bootstrap server.
 *
 * Every process connects here first, proves it holds the job key (the
 * same challenge-response as between agents), and reports its agent's
 * address (BOOT_HELLO).  Once all initial processes have reported, each
 * gets the table of agents (a fence); a process added later by pcor_spawn
 * gets the table at once.  The connection stays open: spawn requests
 * come over it.
 */
#include "pcorrun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_LOOSE 4096 /* connections not yet tied to a process */

static int nloose;

int pr_seed_listen(bool local)
{
	pr_job_t *J = &pr_job;
	const char *ip = J->agent_if ? J->agent_if
				     : local ? "127.0.0.1" : "0.0.0.0";
	char addr[PCORI_AGENT_ADDR_MAX];
	int fd = pcori_sock_listen(ip, "0", addr, sizeof(addr));
	if (fd < 0)
		return fd;
	J->listen_fd = fd;
	if (J->agent_if || local) {
		snprintf(J->seed_addrs, sizeof(J->seed_addrs), "%s", addr);
		return PCOR_OK;
	}
	/* Every address of ours: each host uses the first it can reach. */
	const char *port = strrchr(addr, ':') + 1;
	struct ifaddrs *ifs;
	size_t len = 0;
	J->seed_addrs[0] = '\0';
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			const struct sockaddr_in *sin = (void *)i->ifa_addr;
			if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127)
				continue;
			char ipb[INET_ADDRSTRLEN], one[PCORI_AGENT_ADDR_MAX];
			inet_ntop(AF_INET, &sin->sin_addr, ipb, sizeof(ipb));
			int n = snprintf(one, sizeof(one), "%s%s:%s",
					 len ? "," : "", ipb, port);
			if (len + (size_t)n >= sizeof(J->seed_addrs))
				break;
			memcpy(J->seed_addrs + len, one, (size_t)n + 1);
			len += (size_t)n;
		}
		freeifaddrs(ifs);
	}
	if (!len)
		snprintf(J->seed_addrs, sizeof(J->seed_addrs), "127.0.0.1:%s",
			 port);
	return PCOR_OK;
}

void pr_seed_accept(void)
{
	pr_job_t *J = &pr_job;
	for (;;) {
		int fd = accept4(J->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (nloose >= MAX_LOOSE) {
			close(fd);
			J->n_rejected++;
			continue;
		}
		pcori_sock_tune(fd);
		pcori_conn_t *c = pcori_conn_new(fd, true, false, J->key,
						 10000000000ull);
		if (!c) {
			close(fd);
			continue;
		}
		nloose++;
		pcori_list_push_back(&J->conns, &c->link);
	}
}

static void push(pcori_conn_t *c, pcori_wbuf_t *w)
{
	if (!pcori_frame_end(w) || pcori_conn_send(c, w) ||
	    pcori_conn_flush(c))
		c->dead = PCOR_ERR_PEER_LOST;
}

static void reply(pcori_conn_t *c, uint32_t reqid, int status, int pid)
{
	if (!c)
		return;
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_REPLY);
	pcori_w_u32(&w, reqid);
	pcori_w_u32(&w, (uint32_t)status);
	if (status == PCOR_OK)
		pcori_w_u32(&w, (uint32_t)pid);
	push(c, &w);
	pcori_wbuf_free(&w);
}

static void send_table(pcori_conn_t *c)
{
	pr_job_t *J = &pr_job;
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_BOOT_TABLE);
	uint32_t n = 0;
	for (int i = 0; i < J->nprocs; i++)
		n += J->procs[i]->agent[0] != '\0';
	pcori_w_u32(&w, n);
	for (int i = 0; i < J->nprocs; i++) {
		pr_proc_t *p = J->procs[i];
		if (!p->agent[0])
			continue;
		int st = 0;
		if (p->state == PR_DONE)
			st = p->status == 0 ? PCORI_MEMBER_EXITED
					    : PCORI_MEMBER_FAILED;
		pcori_w_u32(&w, (uint32_t)p->pid);
		pcori_w_u8(&w, (uint8_t)st);
		pcori_w_str(&w, p->agent);
	}
	push(c, &w);
	pcori_wbuf_free(&w);
}

static int on_boot_hello(pcori_conn_t *c, pcori_rbuf_t *r)
{
	pr_job_t *J = &pr_job;
	uint32_t pid = pcori_r_u32(r);
	char agent[PCORI_AGENT_ADDR_MAX], host[PCORI_HOST_MAX];
	pcori_r_str(r, agent, sizeof(agent));
	pcori_r_str(r, host, sizeof(host));
	if (!pcori_r_done(r) || pid >= (uint32_t)J->nprocs || !agent[0])
		return PCOR_ERR_PROTO;
	pr_proc_t *p = J->procs[pid];
	if (p->state != PR_STARTING || p->conn)
		return PCOR_ERR_PROTO; /* a pid reports once */
	p->conn = c;
	p->state = PR_JOINED;
	snprintf(p->agent, sizeof(p->agent), "%s", agent);
	c->owner_data = p;
	c->pid = (int)pid;
	nloose--;
	if ((int)pid >= J->n) {
		send_table(c);
		reply(p->spawner, p->spawn_reqid, PCOR_OK, p->pid);
		p->spawner = NULL;
		return PCOR_OK;
	}
	pr_seed_count_initial();
	return PCOR_OK;
}

void pr_seed_count_initial(void)
{
	pr_job_t *J = &pr_job;
	if (++J->joined_initial < J->n)
		return;
	/* The fence: everyone has reported (or ended without pcor). */
	J->table_sent = true;
	for (int i = 0; i < J->n; i++)
		if (J->procs[i]->conn)
			send_table(J->procs[i]->conn);
}

static int on_spawn(pcori_conn_t *c, pcori_rbuf_t *r)
{
	pr_job_t *J = &pr_job;
	uint32_t reqid = pcori_r_u32(r);
	char host[256];
	pcori_r_str(r, host, sizeof(host));
	uint16_t argc = pcori_r_u16(r);
	if (r->err || argc == 0 || argc > PCORI_SPAWN_ARGS_MAX)
		return PCOR_ERR_PROTO;
	char **argv = calloc((size_t)argc + 1, sizeof(*argv));
	if (!argv)
		return PCOR_ERR_NOMEM;
	for (int i = 0; i < argc && !r->err; i++) {
		char a[4097];
		pcori_r_str(r, a, sizeof(a));
		argv[i] = strdup(a);
		if (!argv[i])
			r->err = true;
	}
	int rc = pcori_r_done(r) ? PCOR_OK : PCOR_ERR_PROTO;
	if (rc)
		goto out;
	/* No host: round-robin over the job's hosts, like the first ones. */
	const char *h = host[0] ? host
		      : J->nhosts ? J->hosts[J->nprocs % J->nhosts]
				  : NULL;
	char prog[4096];
	int e = 0;
	if (pr_host_is_local(h))
		e = pr_resolve_prog(argv[0], prog, sizeof(prog));
	else
		snprintf(prog, sizeof(prog), "%s", argv[0]);
	if (e) {
		fprintf(stderr, "pcorrun: pcor_spawn: cannot run '%s': %s\n",
			argv[0], strerror(-e));
		reply(c, reqid, PCOR_ERR_NOTFOUND, 0);
		goto out;
	}
	pr_proc_t *p = pr_proc_new(h);
	if (!p) {
		reply(c, reqid, PCOR_ERR_NOMEM, 0);
		goto out;
	}
	e = pr_launch(p, argv, prog);
	if (e) {
		fprintf(stderr, "pcorrun: pcor_spawn: cannot start '%s'%s%s: "
				"%s\n",
			argv[0], p->host[0] ? " on " : "", p->host,
			strerror(-e));
		p->state = PR_DONE;
		p->status = 127;
		reply(c, reqid,
		      e == -ENOENT ? PCOR_ERR_NOTFOUND : PCOR_ERR_SYSTEM, 0);
		goto out;
	}
	p->spawner = c;
	p->spawn_reqid = reqid;
out:
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(argv);
	return rc;
}

/*
 * A process cannot reach another and asks whether it still runs: we are
 * the witness that knows (we reaped it, or not).
 */
static int on_probe(pcori_conn_t *c, pcori_rbuf_t *r)
{
	pr_job_t *J = &pr_job;
	uint32_t reqid = pcori_r_u32(r);
	uint32_t pid = pcori_r_u32(r);
	if (!pcori_r_done(r))
		return PCOR_ERR_PROTO;
	int st = PCOR_ERR_NOPEER;
	for (int i = 0; i < J->nprocs; i++)
		if (J->procs[i]->pid >= 0 && (uint32_t)J->procs[i]->pid == pid)
			st = J->procs[i]->state == PR_DONE ? PCOR_ERR_PEER_LOST
							   : PCOR_OK;
	reply(c, reqid, st, 0);
	return PCOR_OK;
}

static int on_frame(pcori_conn_t *c, int type, pcori_rbuf_t *r, void *ctx)
{
	(void)ctx;
	if (!c->owner_data)
		return type == PCORI_CTL_BOOT_HELLO ? on_boot_hello(c, r)
						    : PCOR_ERR_PROTO;
	if (type == PCORI_CTL_SPAWN)
		return on_spawn(c, r);
	if (type == PCORI_CTL_PROBE)
		return on_probe(c, r);
	return PCOR_ERR_PROTO;
}

static void seed_close(pcori_conn_t *c, int rc)
{
	pr_job_t *J = &pr_job;
	pr_proc_t *p = c->owner_data;
	if (p) {
		p->conn = NULL;
	} else {
		nloose--;
		if (rc == PCOR_ERR_AUTH || rc == PCOR_ERR_PROTO ||
		    rc == PCOR_ERR_TIMEDOUT) {
			J->n_rejected++;
			char from[PCORI_AGENT_ADDR_MAX];
			pcori_sock_peer(c->fd, from, sizeof(from));
			if (rc == PCOR_ERR_AUTH)
				fprintf(stderr,
					"pcorrun: refused the job key of %s "
					"(ours has key id %08x)\n",
					from, pcori_key_check(J->key));
			else
				fprintf(stderr,
					"pcorrun: rejected a connection to "
					"the launcher from %s: %s\n",
					from, pcor_strerror(rc));
		}
	}
	for (int i = 0; i < J->nprocs; i++)
		if (J->procs[i]->spawner == c)
			J->procs[i]->spawner = NULL;
	pcori_list_remove(&c->link);
	pcori_conn_free(c);
}

void pr_seed_event(pcori_conn_t *c, short revents)
{
	int rc = c->dead;
	if (!rc && (revents & (POLLIN | POLLERR | POLLHUP))) {
		bool opened;
		rc = pcori_conn_input(c, on_frame, NULL, &opened);
	}
	if (!rc && !c->dead)
		rc = pcori_conn_flush(c);
	if (!rc && !c->owner_data && pcori_now_ns() > c->auth_deadline_ns)
		rc = PCOR_ERR_TIMEDOUT;
	if (!rc)
		rc = c->dead;
	if (rc)
		seed_close(c, rc);
}

void pr_seed_proc_done(pr_proc_t *p)
{
	/* A spawned process that died before joining: tell the spawner. */
	if (p->spawner) {
		/* The shell's conventions: 127 no such program, 255 ssh. */
		int st = p->status == 127   ? PCOR_ERR_NOTFOUND
			 : p->status == 255 ? PCOR_ERR_UNREACHABLE
					    : PCOR_ERR_PEER_LOST;
		reply(p->spawner, p->spawn_reqid, st, 0);
		p->spawner = NULL;
	}
}

void pr_seed_close_all(void)
{
	pr_job_t *J = &pr_job;
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &J->conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		pcori_list_remove(&c->link);
		pcori_conn_free(c);
	}
	for (int i = 0; i < J->nprocs; i++)
		J->procs[i]->conn = NULL;
	if (J->listen_fd >= 0)
		close(J->listen_fd);
	J->listen_fd = -1;
}
