/*
 * boot.c -- how a process learns who it is and where the others are.
 *
 * Three ways, tried in order:
 *  1. pcorrun: PCOR_JOB_SIZE/PID/KEY and PCOR_AGENT_ADDR (the launcher's
 *     address list).  We connect to the launcher, authenticate, give it
 *     our agent's address and get back the table of agents once every
 *     initial process has done the same (a fence).
 *  2. PMIx (Slurm srun --mpi=pmix, Open MPI mpirun): rank, size; rank 0
 *     makes the key; keys and agent addresses go through Put/Fence/Get.
 *  3. Alone: one process, a fresh key.
 * The agent's listener is created here, before anyone is told its address.
 */
#include "naming_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef PCOR_HAVE_PMIX
#include <pmix.h>
static pmix_proc_t pmix_me;
#endif

void pcori_host_identity(char host[PCORI_HOST_MAX])
{
	char name[64] = "localhost";
	gethostname(name, sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	/*
	 * The network namespace is part of the identity: two namespaces on
	 * one machine are two hosts as far as the fabric can tell.
	 */
	struct stat st;
	unsigned long ns = 0;
	if (stat("/proc/self/ns/net", &st) == 0)
		ns = (unsigned long)st.st_ino;
	snprintf(host, PCORI_HOST_MAX, "%s/net:%lu", name, ns);
}

static bool is_loopback(const struct sockaddr_in *sin)
{
	return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
}

/* First IPv4 address of an interface that is up and not loopback. */
static int first_ipv4(char *out, size_t len)
{
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs) < 0)
		return -1;
	int rc = -1;
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		const struct sockaddr_in *sin = (void *)i->ifa_addr;
		if (is_loopback(sin))
			continue;
		inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)len);
		rc = 0;
		break;
	}
	freeifaddrs(ifs);
	return rc;
}

/*
 * Listen on bind_ip; the address others use is advertise_ip (the same
 * unless we bound the wildcard).
 */
static int make_listener(const pcori_config_t *cfg, const char *bind_ip,
			 const char *advertise_ip, pcori_boot_out_t *out)
{
	char addr[PCORI_AGENT_ADDR_MAX];
	int fd = pcori_sock_listen(bind_ip, cfg->agent_ports, addr,
				   sizeof(addr));
	if (fd < 0) {
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "agent: cannot listen on %s ports %s: %s", bind_ip,
			    cfg->agent_ports, pcor_strerror(fd));
		return fd;
	}
	out->listen_fd = fd;
	const char *port = strrchr(addr, ':') + 1;
	snprintf(out->agent, sizeof(out->agent), "%s:%s", advertise_ip, port);
	return PCOR_OK;
}

/* ----------------------------------------------------------- pcorrun */

struct table_ctx {
	pcori_boot_out_t *out;
	bool got;
};

static int on_seed_frame(pcori_conn_t *c, int type, pcori_rbuf_t *r,
			 void *ctx)
{
	(void)c;
	struct table_ctx *t = ctx;
	if (type != PCORI_CTL_BOOT_TABLE || t->got)
		return PCOR_ERR_PROTO;
	uint32_t n = pcori_r_u32(r);
	if (r->err || n > (1u << 20) || n > (r->len - r->off) / 7)
		return PCOR_ERR_PROTO;
	pcori_boot_entry_t *tab = calloc(n ? n : 1, sizeof(*tab));
	if (!tab)
		return PCOR_ERR_NOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t pid = pcori_r_u32(r);
		tab[i].pid = pid > INT_MAX ? -1 : (int)pid;
		tab[i].state = pcori_r_u8(r);
		pcori_r_str(r, tab[i].agent, sizeof(tab[i].agent));
		if (tab[i].pid < 0 || tab[i].state > PCORI_MEMBER_FAILED)
			r->err = true;
	}
	if (!pcori_r_done(r)) {
		free(tab);
		return PCOR_ERR_PROTO;
	}
	t->out->table = tab;
	t->out->ntable = (int)n;
	t->got = true;
	return PCOR_OK;
}

/*
 * Connect and authenticate to the first launcher address that answers.
 * On failure *why_p says why: PCOR_ERR_AUTH when a launcher answered but
 * the keys differ (a wrong or stale PCOR_JOB_KEY), PCOR_ERR_UNREACHABLE
 * when nobody answered.
 */
static pcori_conn_t *seed_connect(const pcori_config_t *cfg,
				  const uint8_t *key, uint64_t deadline,
				  int *why_p)
{
	*why_p = PCOR_ERR_UNREACHABLE;
	char list[sizeof(cfg->agent_addr)];
	snprintf(list, sizeof(list), "%s", cfg->agent_addr);
	for (char *save = NULL, *a = strtok_r(list, ",", &save); a;
	     a = strtok_r(NULL, ",", &save)) {
		struct sockaddr_in sin;
		if (pcori_sock_parse(a, &sin)) {
			PCORI_WARN(PCORI_SUB_NAMING,
				   "boot: bad launcher address \"%s\"", a);
			continue;
		}
		int fd = pcori_sock_connect(&sin);
		if (fd < 0)
			continue;
		pcori_conn_t *c = pcori_conn_new(fd, false, true, key, 0);
		if (!c) {
			close(fd);
			continue;
		}
		/* An address that does not answer quickly is the wrong one. */
		uint64_t d = PCORI_MIN(deadline, pcori_now_ns() + 3000000000ull);
		int rc = pcori_conn_open_sync(c, d);
		if (rc == PCOR_OK)
			return c;
		if (rc == PCOR_ERR_AUTH) {
			*why_p = PCOR_ERR_AUTH;
			if (c->refused)
				PCORI_ERROR(PCORI_SUB_NAMING,
					    "boot: launcher at %s refused our "
					    "job key (key id %08x; the "
					    "launcher's is %08x): wrong or "
					    "stale PCOR_JOB_KEY",
					    a, pcori_key_check(key),
					    c->refused_key_id);
			else
				PCORI_ERROR(PCORI_SUB_NAMING,
					    "boot: launcher at %s failed to "
					    "prove our job key (key id %08x)",
					    a, pcori_key_check(key));
		} else {
			PCORI_INFO(PCORI_SUB_NAMING, "boot: launcher %s: %s",
				   a, pcor_strerror(rc));
		}
		pcori_conn_free(c);
	}
	return NULL;
}

static int boot_pcorrun(const pcori_config_t *cfg, pcori_boot_t *boot,
			pcori_boot_out_t *out)
{
	if (pcori_key_from_hex(cfg->job_key, boot->key)) {
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "boot: PCOR_JOB_KEY is not %d hex digits",
			    2 * PCORI_KEY_BYTES);
		return PCOR_ERR_INVAL;
	}
	if (cfg->job_pid < 0 || !cfg->agent_addr[0]) {
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "boot: PCOR_JOB_SIZE is set but PCOR_JOB_PID or "
			    "PCOR_AGENT_ADDR is not");
		return PCOR_ERR_INVAL;
	}
	boot->pid = (int)cfg->job_pid;
	boot->nprocs = (int)cfg->job_size;
	boot->spawned = boot->pid >= boot->nprocs;
	uint64_t deadline = pcori_now_ns() +
			    (uint64_t)cfg->join_timeout_ms * 1000000ull;
	int why;
	pcori_conn_t *seed = seed_connect(cfg, boot->key, deadline, &why);
	if (!seed) {
		if (why != PCOR_ERR_AUTH)
			PCORI_ERROR(PCORI_SUB_NAMING,
				    "boot: no launcher answered at %s",
				    cfg->agent_addr);
		return why;
	}
	/* Listen where the launcher reached us, unless told otherwise. */
	struct sockaddr_in local;
	socklen_t sl = sizeof(local);
	getsockname(seed->fd, (struct sockaddr *)&local, &sl);
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &local.sin_addr, ip, sizeof(ip));
	int rc;
	boot->one_host = is_loopback(&local);
	if (cfg->agent_if[0])
		rc = make_listener(cfg, cfg->agent_if, cfg->agent_if, out);
	else if (is_loopback(&local))
		rc = make_listener(cfg, "127.0.0.1", "127.0.0.1", out);
	else
		rc = make_listener(cfg, "0.0.0.0", ip, out);
	if (rc)
		goto err_seed;

	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_BOOT_HELLO);
	pcori_w_u32(&w, (uint32_t)boot->pid);
	pcori_w_str(&w, out->agent);
	pcori_w_str(&w, boot->host);
	rc = pcori_frame_end(&w) ? pcori_conn_send(seed, &w) : PCOR_ERR_NOMEM;
	pcori_wbuf_free(&w);
	if (!rc)
		rc = pcori_conn_flush_sync(seed, deadline);
	struct table_ctx t = {.out = out};
	while (!rc && !t.got) {
		uint64_t now = pcori_now_ns();
		if (now >= deadline) {
			rc = PCOR_ERR_TIMEDOUT;
			break;
		}
		struct pollfd p = {.fd = seed->fd, .events = POLLIN};
		int ms = (int)PCORI_MIN((deadline - now) / 1000000 + 1, 1000);
		if (poll(&p, 1, ms) < 0 && errno != EINTR) {
			rc = PCOR_ERR_SYSTEM;
			break;
		}
		if (!p.revents)
			continue;
		bool opened;
		rc = pcori_conn_input(seed, on_seed_frame, &t, &opened);
	}
	if (rc) {
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "boot: waiting for the other processes: %s",
			    pcor_strerror(rc));
		goto err_listen;
	}
	out->seed = seed;
	out->mode = PCORI_BOOT_PCORRUN;
	return PCOR_OK;

err_listen:
	close(out->listen_fd);
	out->listen_fd = -1;
	free(out->table);
	out->table = NULL;
err_seed:
	pcori_conn_free(seed);
	return rc;
}

/* -------------------------------------------------------------- PMIx */

#ifdef PCOR_HAVE_PMIX
static int pmix_get_u32(const pmix_proc_t *p, const char *key, uint32_t *v)
{
	pmix_value_t *val = NULL;
	if (PMIx_Get(p, key, NULL, 0, &val) != PMIX_SUCCESS || !val)
		return -1;
	int rc = 0;
	if (val->type == PMIX_UINT32)
		*v = val->data.uint32;
	else if (val->type == PMIX_UINT16)
		*v = val->data.uint16;
	else if (val->type == PMIX_INT)
		*v = (uint32_t)val->data.integer;
	else
		rc = -1;
	PMIX_VALUE_RELEASE(val);
	return rc;
}

static int pmix_get_str(const pmix_proc_t *p, const char *key, char *out,
			size_t cap)
{
	pmix_value_t *val = NULL;
	if (PMIx_Get(p, key, NULL, 0, &val) != PMIX_SUCCESS || !val)
		return -1;
	int rc = -1;
	if (val->type == PMIX_STRING && val->data.string &&
	    strlen(val->data.string) < cap) {
		strcpy(out, val->data.string);
		rc = 0;
	}
	PMIX_VALUE_RELEASE(val);
	return rc;
}

static int pmix_put_str(const char *key, const char *s)
{
	pmix_value_t v;
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_STRING;
	v.data.string = (char *)s;
	/* PMIx_Put copies the value; ours stays on the stack. */
	return PMIx_Put(PMIX_GLOBAL, key, &v) == PMIX_SUCCESS ? 0 : -1;
}

static int boot_pmix(const pcori_config_t *cfg, pcori_boot_t *boot,
		     pcori_boot_out_t *out, bool forced)
{
	pmix_status_t prc = PMIx_Init(&pmix_me, NULL, 0);
	if (prc != PMIX_SUCCESS) {
		if (forced)
			PCORI_ERROR(PCORI_SUB_NAMING, "boot: PMIx_Init: %s",
				    PMIx_Error_string(prc));
		return PCOR_ERR_UNREACHABLE;
	}
	pmix_proc_t wild;
	PMIX_LOAD_PROCID(&wild, pmix_me.nspace, PMIX_RANK_WILDCARD);
	uint32_t size = 0, lsize = 0;
	if (pmix_get_u32(&wild, PMIX_JOB_SIZE, &size) || size == 0 ||
	    size > INT_MAX || pmix_me.rank >= size) {
		PCORI_ERROR(PCORI_SUB_NAMING, "boot: PMIx gave no job size");
		goto err;
	}
	if (pmix_get_u32(&wild, PMIX_LOCAL_SIZE, &lsize))
		lsize = 0;
	boot->pid = (int)pmix_me.rank;
	boot->nprocs = (int)size;
	boot->spawned = false;

	char ip[INET_ADDRSTRLEN] = "127.0.0.1";
	int rc;
	boot->one_host = lsize == size;
	if (cfg->agent_if[0])
		rc = make_listener(cfg, cfg->agent_if, cfg->agent_if, out);
	else if (lsize == size || first_ipv4(ip, sizeof(ip)))
		rc = make_listener(cfg, "127.0.0.1", "127.0.0.1", out);
	else
		rc = make_listener(cfg, "0.0.0.0", ip, out);
	if (rc)
		goto err;

	char hex[2 * PCORI_KEY_BYTES + 1];
	if (boot->pid == 0) {
		pcori_key_random(boot->key);
		pcori_key_to_hex(boot->key, hex);
		if (pmix_put_str("pcor.key", hex))
			goto err_listen;
	}
	if (pmix_put_str("pcor.agent", out->agent) ||
	    PMIx_Commit() != PMIX_SUCCESS)
		goto err_listen;
	pmix_info_t info;
	bool yes = true;
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	prc = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (prc != PMIX_SUCCESS) {
		PCORI_ERROR(PCORI_SUB_NAMING, "boot: PMIx_Fence: %s",
			    PMIx_Error_string(prc));
		goto err_listen;
	}
	pmix_proc_t p;
	PMIX_LOAD_PROCID(&p, pmix_me.nspace, 0);
	if (pmix_get_str(&p, "pcor.key", hex, sizeof(hex)) ||
	    pcori_key_from_hex(hex, boot->key)) {
		PCORI_ERROR(PCORI_SUB_NAMING, "boot: no job key from rank 0");
		goto err_listen;
	}
	out->table = calloc(size, sizeof(*out->table));
	if (!out->table)
		goto err_listen;
	out->ntable = (int)size;
	for (uint32_t r = 0; r < size; r++) {
		PMIX_LOAD_PROCID(&p, pmix_me.nspace, r);
		out->table[r].pid = (int)r;
		if (pmix_get_str(&p, "pcor.agent", out->table[r].agent,
				 sizeof(out->table[r].agent))) {
			PCORI_ERROR(PCORI_SUB_NAMING,
				    "boot: no agent address for rank %u", r);
			goto err_table;
		}
	}
	out->mode = PCORI_BOOT_PMIX;
	return PCOR_OK;

err_table:
	free(out->table);
	out->table = NULL;
err_listen:
	close(out->listen_fd);
	out->listen_fd = -1;
err:
	PMIx_Finalize(NULL, 0);
	return PCOR_ERR_UNREACHABLE;
}
#endif

/* ------------------------------------------------------------- alone */

static int boot_alone(const pcori_config_t *cfg, pcori_boot_t *boot,
		      pcori_boot_out_t *out)
{
	boot->pid = 0;
	boot->nprocs = 1;
	boot->spawned = false;
	boot->one_host = true;
	pcori_key_random(boot->key);
	const char *ip = cfg->agent_if[0] ? cfg->agent_if : "127.0.0.1";
	int rc = make_listener(cfg, ip, ip, out);
	if (rc)
		return rc;
	out->table = calloc(1, sizeof(*out->table));
	if (!out->table) {
		close(out->listen_fd);
		return PCOR_ERR_NOMEM;
	}
	out->ntable = 1;
	out->table[0].pid = 0;
	snprintf(out->table[0].agent, sizeof(out->table[0].agent), "%s",
		 out->agent);
	out->mode = PCORI_BOOT_ALONE;
	return PCOR_OK;
}

int pcori_boot_run(const pcori_config_t *cfg, pcori_boot_t *boot,
		   pcori_boot_out_t *out)
{
	memset(out, 0, sizeof(*out));
	out->listen_fd = -1;
	int rc = pcori_crypto_init();
	if (rc)
		return rc;
	pcori_host_identity(boot->host);

	if (cfg->job_size > 0)
		rc = boot_pcorrun(cfg, boot, out);
	else {
		rc = PCOR_ERR_NOSUPPORT;
		bool forced = !strcmp(cfg->pmix, "on");
		bool off = !strcmp(cfg->pmix, "off");
		if (!off && !forced && strcmp(cfg->pmix, "auto")) {
			PCORI_ERROR(PCORI_SUB_NAMING,
				    "boot: PCOR_PMIX=\"%s\": use auto, on or off",
				    cfg->pmix);
			return PCOR_ERR_INVAL;
		}
#ifdef PCOR_HAVE_PMIX
		/* A PMIx server tells its clients where it is this way. */
		bool served = getenv("PMIX_NAMESPACE") || getenv("PMIX_RANK");
		if (forced || (!off && served)) {
			rc = boot_pmix(cfg, boot, out, true);
			/* Under a PMIx server, "alone" would be a lie. */
			forced = true;
		}
#endif
		if (rc && forced) {
			PCORI_ERROR(PCORI_SUB_NAMING,
				    "boot: PCOR_PMIX=on but PMIx %s",
				    rc == PCOR_ERR_NOSUPPORT
					    ? "is not in this build"
					    : "did not start");
			return rc;
		}
		if (rc)
			rc = boot_alone(cfg, boot, out);
	}
	if (rc)
		return rc;
	boot->key_check = pcori_key_check(boot->key);
	return PCOR_OK;
}

void pcori_boot_fini(int mode)
{
#ifdef PCOR_HAVE_PMIX
	if (mode == PCORI_BOOT_PMIX)
		PMIx_Finalize(NULL, 0);
#else
	(void)mode;
#endif
}
