/*
 * admit.c -- admission of control connections that have not yet proved
 * the job key ("strangers").
 *
 * Design notes.  Anyone who can reach an agent's port can open
 * connections, and until the handshake completes a member cannot be told
 * from an attacker.  So strangers share a small pool: at most
 * PCOR_UNAUTH_MAX in total and PCOR_UNAUTH_PER_ADDR from one IPv4
 * address, each with the short PCOR_AUTH_TIMEOUT_MS deadline.  A newcomer
 * is always let in: when a budget is full, the oldest stranger (of that
 * address, else overall) is closed to make room.  A member proves itself
 * in one round trip, so it is rarely the oldest; a stranger that trickles
 * bytes or never speaks ages out first.  A member whose attempt was shed
 * anyway retries (dial.c), so a flood can delay a join but not fail it.
 * Authenticated connections leave the pool and are never shed.
 *
 * Every refusal is counted by reason; the log gets the first one of each
 * second in full and a summary of the rest, so a flood cannot flood the
 * log too.  All of this runs on the agent thread.
 */
#include "naming_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define NM pcori_nm

/* Strangers from one address, oldest first. */
typedef struct admit_addr {
	uint32_t ip;
	int n;
	pcori_list_t conns; /* pcori_conn_t.alink */
	UT_hash_handle hh;
} admit_addr_t;

static struct {
	admit_addr_t *addrs;
	pcori_list_t all; /* every stranger, oldest first (glink) */
	int n;
	int spare_fd;     /* given up to accept and drop when out of fds */
	/* rate-limited logging */
	uint64_t window_ns;
	uint64_t quiet[PCORI_REFUSE_NREASONS_];
} A = {.spare_fd = -1};

static _Atomic uint64_t n_refused[PCORI_REFUSE_NREASONS_];

static const char *const reason_name[PCORI_REFUSE_NREASONS_] = {
	[PCORI_REFUSE_AUTH] = "wrong job key",
	[PCORI_REFUSE_PROTO] = "malformed",
	[PCORI_REFUSE_TIMEOUT] = "too slow to authenticate",
	[PCORI_REFUSE_SHED] = "shed: stranger budget full",
	[PCORI_REFUSE_NOFD] = "out of file descriptors",
};

void pcori_admit_init(void)
{
	A.addrs = NULL;
	pcori_list_init(&A.all);
	A.n = 0;
	A.window_ns = 0;
	memset(A.quiet, 0, sizeof(A.quiet));
	for (int i = 0; i < PCORI_REFUSE_NREASONS_; i++)
		atomic_store(&n_refused[i], 0);
	A.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void pcori_admit_fini(void)
{
	admit_addr_t *a, *t;
	HASH_ITER(hh, A.addrs, a, t)
	{
		HASH_DEL(A.addrs, a);
		free(a);
	}
	if (A.spare_fd >= 0)
		close(A.spare_fd);
	A.spare_fd = -1;
	A.n = 0;
}

void pcori_admit_refused(int why, const char *from)
{
	atomic_fetch_add(&n_refused[why], 1);
	uint64_t now = pcori_now_ns();
	if (now - A.window_ns >= 1000000000ull) {
		/* A new second: say what was held back, then this one. */
		pcori_admit_tick(now);
		A.window_ns = now;
		PCORI_WARN(PCORI_SUB_NAMING,
			   "agent: refused a connection from %s: %s", from,
			   reason_name[why]);
		return;
	}
	A.quiet[why]++;
}

uint64_t pcori_admit_tick(uint64_t now)
{
	uint64_t total = 0;
	for (int i = 0; i < PCORI_REFUSE_NREASONS_; i++)
		total += A.quiet[i];
	if (!total)
		return UINT64_MAX;
	if (now - A.window_ns < 1000000000ull)
		return A.window_ns + 1000000000ull;
	PCORI_WARN(PCORI_SUB_NAMING,
		   "agent: refused %llu more connections in the last second "
		   "(%llu wrong key, %llu malformed, %llu too slow, %llu shed, "
		   "%llu out of fds); %d strangers open",
		   (unsigned long long)total,
		   (unsigned long long)A.quiet[PCORI_REFUSE_AUTH],
		   (unsigned long long)A.quiet[PCORI_REFUSE_PROTO],
		   (unsigned long long)A.quiet[PCORI_REFUSE_TIMEOUT],
		   (unsigned long long)A.quiet[PCORI_REFUSE_SHED],
		   (unsigned long long)A.quiet[PCORI_REFUSE_NOFD], A.n);
	memset(A.quiet, 0, sizeof(A.quiet));
	A.window_ns = now;
	return UINT64_MAX;
}

static void shed(pcori_conn_t *v)
{
	char from[PCORI_AGENT_ADDR_MAX];
	pcori_sock_peer(v->fd, from, sizeof(from));
	pcori_admit_leave(v);
	v->dead = PCOR_ERR_AGAIN;
	pcori_admit_refused(PCORI_REFUSE_SHED, from);
}

int pcori_admit_add(pcori_conn_t *c)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	uint32_t ip = 0;
	if (getpeername(c->fd, (struct sockaddr *)&sin, &sl) == 0 &&
	    sin.sin_family == AF_INET)
		ip = sin.sin_addr.s_addr;
	admit_addr_t *a;
	HASH_FIND(hh, A.addrs, &ip, sizeof(ip), a);
	if (a && a->n >= NM.unauth_per_addr)
		shed(PCORI_CONTAINER_OF(a->conns.next, pcori_conn_t, alink));
	if (A.n >= NM.unauth_max)
		shed(PCORI_CONTAINER_OF(A.all.next, pcori_conn_t, glink));
	/* Shedding may have freed the address's entry: look again. */
	HASH_FIND(hh, A.addrs, &ip, sizeof(ip), a);
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return PCOR_ERR_NOMEM;
		a->ip = ip;
		pcori_list_init(&a->conns);
		HASH_ADD(hh, A.addrs, ip, sizeof(a->ip), a);
	}
	c->src_ip = ip;
	c->pooled = true;
	pcori_list_push_back(&a->conns, &c->alink);
	pcori_list_push_back(&A.all, &c->glink);
	a->n++;
	A.n++;
	return PCOR_OK;
}

void pcori_admit_leave(pcori_conn_t *c)
{
	if (!c->pooled)
		return;
	c->pooled = false;
	pcori_list_remove(&c->alink);
	pcori_list_remove(&c->glink);
	A.n--;
	admit_addr_t *a;
	HASH_FIND(hh, A.addrs, &c->src_ip, sizeof(c->src_ip), a);
	if (a && --a->n == 0) {
		HASH_DEL(A.addrs, a);
		free(a);
	}
}

void pcori_admit_accept_failed(int listen_fd, int err)
{
	if (err != EMFILE && err != ENFILE)
		return;
	/*
	 * Out of descriptors: the pending connection would keep the listener
	 * readable and the agent spinning.  Give up the spare descriptor,
	 * accept and drop the connection, and take the spare back.
	 */
	if (A.spare_fd >= 0) {
		close(A.spare_fd);
		A.spare_fd = -1;
	}
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	char from[PCORI_AGENT_ADDR_MAX] = "?";
	if (fd >= 0) {
		pcori_sock_peer(fd, from, sizeof(from));
		close(fd);
	}
	A.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pcori_admit_refused(PCORI_REFUSE_NOFD, from);
}

int pcori_admit_count(void)
{
	return A.n;
}

void pcori_admit_stats(uint64_t refused[PCORI_REFUSE_NREASONS_])
{
	for (int i = 0; i < PCORI_REFUSE_NREASONS_; i++)
		refused[i] = atomic_load(&n_refused[i]);
}
