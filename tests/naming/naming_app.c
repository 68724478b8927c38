/*
 * naming_app -- the program the directory tests launch (through pcorrun,
 * mpirun or alone).  argv[1] picks the scenario; every process prints
 * "<scenario>: ok" when all its checks held, and exits non-zero otherwise.
 *
 *   basic N [hosts H]  N processes: each resolves every pid, publishes a
 *                      name and finds everybody's; error cases; with
 *                      "hosts H", also expects H distinct host identities
 *   spawn N M          N initial processes; pid 0 adds M with pcor_spawn;
 *                      everyone must see N+M members
 *   spawned N M        (what the spawned processes run)
 *   kill N             pid N-1 kills itself with SIGKILL; the others must
 *                      get its failure event within 2 s, and lookups fail
 *                      with PCOR_ERR_PEER_LOST
 *   rogue N            pid 0 attacks pid 1's agent and the launcher with a
 *                      wrong key, garbage and an oversized frame; pid 1
 *                      checks they were rejected and counted; then basic
 *   badkey N           every process first calls pcor_init with a wrong
 *                      job key and must get PCOR_ERR_AUTH (not
 *                      UNREACHABLE), stay uninitialised, then join with
 *                      the right key; then basic
 *   siege N M          pid 0 floods pid 1's agent with at least 5,000
 *                      keyless connections (idle, slow headers, garbage,
 *                      wrong key) while it adds M processes with
 *                      pcor_spawn and everyone looks up pids and names:
 *                      all must succeed, nobody is reported lost, and
 *                      pid 1 must have refused the strangers
 *   stop N             pid 0 stops pid N-1 with SIGSTOP: every survivor
 *                      must get its failure event within the peer
 *                      timeout (2 s; PCOR_TEST_SLOW=1: 10 s), measured
 *                      from the signal; then it is resumed and must find
 *                      itself fenced out (everyone else lost to it).
 *                      With FAULT_CMD set, pid 0 runs that command as
 *                      the fault instead (e.g. taking pid N-1's network
 *                      link down); pid N-1 then finds itself cut off.
 *                      With FAULT_XFER=BYTES, pid N-1 is sending that
 *                      much to pid 0 when the fault comes: pid 0's
 *                      receive must end with PEER_LOST within the bound
 *   exit N K CODE      pid K exits with CODE right after pcor_init
 *   alone              one process without a launcher
 *   bench-lookup N     cost of uncached and cached pid lookups (pid 0)
 *
 * Waiting is done on events or on name lookups with timeouts, never with
 * sleeps; every loop is bounded.
 */
#define _GNU_SOURCE /* setenv */
#include "harness.h"

#include "naming/naming_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define SEC 1000000000LL

static int me, np;

/* ------------------------------------------------------------ events */

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;
static int ev_count[4];
static int ev_last_pid[4];
static int64_t ev_fail_ns[1024];

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static void on_member(int pid, pcor_member_event_t ev, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ev_mu);
	if (ev >= 1 && ev <= 3) {
		ev_count[ev]++;
		ev_last_pid[ev] = pid;
	}
	if (ev == PCOR_MEMBER_FAILURE && pid >= 0 && pid < 1024)
		ev_fail_ns[pid] = now_ns();
	pthread_cond_broadcast(&ev_cv);
	pthread_mutex_unlock(&ev_mu);
}

/* Wait until ev_count[ev] >= n, up to timeout; true if reached. */
static bool wait_events(int ev, int n, int64_t timeout_ns)
{
	int64_t end = now_ns() + timeout_ns;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t rt = (int64_t)ts.tv_sec * SEC + ts.tv_nsec + timeout_ns;
	ts.tv_sec = rt / SEC;
	ts.tv_nsec = rt % SEC;
	pthread_mutex_lock(&ev_mu);
	while (ev_count[ev] < n && now_ns() < end)
		pthread_cond_timedwait(&ev_cv, &ev_mu, &ts);
	bool ok = ev_count[ev] >= n;
	pthread_mutex_unlock(&ev_mu);
	return ok;
}

/* ---------------------------------------------------------- barriers */

/*
 * Everyone in [0, n) reaches the barrier: each publishes "<tag>/<pid>"
 * and waits for the others' names.  A process that already left normally
 * passed the barrier too (its names went with it).
 */
static void barrier(const char *tag, int n)
{
	char name[64];
	snprintf(name, sizeof(name), "%s/%d", tag, me);
	CHECK_OK(pcor_name_publish(name, me, 0));
	for (int q = 0; q < n; q++) {
		snprintf(name, sizeof(name), "%s/%d", tag, q);
		int pid, thid, rc = PCOR_ERR_TIMEDOUT, irc = PCOR_OK;
		pcor_proc_info_t pi = {0};
		for (int tries = 0; tries < 300; tries++) {
			rc = pcor_name_lookup(name, SEC / 10, &pid, &thid);
			if (rc == PCOR_OK)
				break;
			/* Left normally: it passed the barrier. */
			irc = pcor_proc_info(q, &pi);
			if (irc == PCOR_ERR_PEER_LOST &&
			    pi.state == PCOR_PROC_EXITED) {
				rc = PCOR_OK;
				break;
			}
		}
		if (rc != PCOR_OK)
			fprintf(stderr, "[%d] barrier: no \"%s\"; process %d: "
				"%s, state %d\n", me, name, q,
				pcor_strerror(irc), (int)pi.state);
		CHECK_RC(rc, PCOR_OK);
	}
}

/* ------------------------------------------------------------- basic */

/*
 * Print what this process sees of pids [0, total): each one's agent and
 * host, and who won the contended name (if asked).  The test script
 * checks that every process printed the same line.
 */
static void print_view(const char *what, int total, bool contended)
{
	size_t cap = (size_t)total * (PCOR_HOST_MAX + 96) + 64, len = 0;
	char *v = malloc(cap);
	CHECK(v);
	v[0] = '\0';
	for (int q = 0; q < total; q++) {
		pcor_proc_info_t pi;
		CHECK_OK(pcor_proc_info(q, &pi));
		len += (size_t)snprintf(v + len, cap - len, "%s%d@%s@%s",
					q ? "," : "", q, pi.agent, pi.host);
		CHECK(len < cap);
	}
	if (contended) {
		int pid = -1, thid = -1;
		CHECK_OK(pcor_name_lookup("contended", 0, &pid, &thid));
		snprintf(v + len, cap - len, " contended=%d.%d", pid, thid);
	}
	printf("%s: view %s\n", what, v);
	free(v);
}

static void check_resolve_all(int n, int want_hosts)
{
	char hosts[64][PCOR_HOST_MAX];
	int nh = 0;
	CHECK(pcor_nprocs() >= n);
	for (int q = 0; q < n; q++) {
		pcor_proc_info_t pi;
		memset(&pi, 0x5a, sizeof(pi));
		CHECK_OK(pcor_proc_info(q, &pi));
		CHECK(pi.pid == q);
		CHECK(pi.state == PCOR_PROC_ALIVE);
		CHECK(pi.host[0] != '\0' && strstr(pi.host, "/net:"));
		CHECK(strchr(pi.agent, ':') != NULL);
		int k;
		for (k = 0; k < nh; k++)
			if (!strcmp(hosts[k], pi.host))
				break;
		if (k == nh && nh < 64)
			snprintf(hosts[nh++], PCOR_HOST_MAX, "%s", pi.host);
	}
	if (want_hosts > 0 && nh != want_hosts) {
		fprintf(stderr, "expected %d hosts, saw %d\n", want_hosts, nh);
		CHECK(nh == want_hosts);
	}
	/* Bad input: answers at once, never a hang. */
	pcor_proc_info_t pi;
	CHECK_RC(pcor_proc_info(n + 1000, &pi), PCOR_ERR_NOPEER);
	CHECK_RC(pcor_proc_info(-5, &pi), PCOR_ERR_NOPEER);
	CHECK_RC(pcor_proc_info(0, NULL), PCOR_ERR_INVAL);
}

static void check_names(int n)
{
	char name[64];
	snprintf(name, sizeof(name), "proc/%d", me);
	CHECK_OK(pcor_name_publish(name, me, 0));
	CHECK_RC(pcor_name_publish(name, me, 0), PCOR_ERR_EXISTS);
	CHECK_RC(pcor_name_publish("", me, 0), PCOR_ERR_INVAL);
	CHECK_RC(pcor_name_publish(NULL, me, 0), PCOR_ERR_INVAL);
	CHECK_RC(pcor_name_publish("x", n + 1000, 0), PCOR_ERR_NOPEER);
	CHECK_RC(pcor_name_publish("x", me, -1), PCOR_ERR_BADTHID);
	char big[PCOR_NAME_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_RC(pcor_name_publish(big, me, 0), PCOR_ERR_INVAL);
	/* One name everybody races for: exactly one wins (checked below). */
	int rc = pcor_name_publish("contended", me, 7);
	CHECK(rc == PCOR_OK || rc == PCOR_ERR_EXISTS);

	for (int q = 0; q < n; q++) {
		int pid = -1, thid = -1;
		snprintf(name, sizeof(name), "proc/%d", q);
		CHECK_OK(pcor_name_lookup(name, 30 * SEC, &pid, &thid));
		CHECK(pid == q && thid == 0);
	}
	int pid = -1, thid = -1;
	CHECK_OK(pcor_name_lookup("contended", 0, &pid, &thid));
	CHECK(pid >= 0 && pid < n && thid == 7);
	CHECK_RC(pcor_name_lookup("never/published", 0, &pid, &thid),
		 PCOR_ERR_NOTFOUND);
	CHECK_RC(pcor_name_lookup("never/published", SEC / 20, &pid, &thid),
		 PCOR_ERR_TIMEDOUT);
	CHECK_RC(pcor_name_lookup("x", 0, NULL, NULL), PCOR_ERR_INVAL);

	snprintf(name, sizeof(name), "tmp/%d", me);
	CHECK_OK(pcor_name_publish(name, me, 1));
	CHECK_OK(pcor_name_unpublish(name));
	CHECK_RC(pcor_name_unpublish(name), PCOR_ERR_NOTFOUND);
	CHECK_RC(pcor_name_lookup(name, 0, &pid, &thid), PCOR_ERR_NOTFOUND);
	/* Someone else's name is not ours to withdraw. */
	snprintf(name, sizeof(name), "proc/%d", (me + 1) % n);
	if (n > 1)
		CHECK_RC(pcor_name_unpublish(name), PCOR_ERR_NOTFOUND);
}

static int run_basic(int n, int want_hosts)
{
	CHECK(np == n);
	CHECK_OK(pcor_member_callback(on_member, NULL));
	check_resolve_all(n, want_hosts);
	check_names(n);
	print_view("basic", n, true);
	barrier("done", n);
	/* pid 0 stays until the others left: each an exit, none a failure. */
	if (me == 0 && n > 1) {
		CHECK(wait_events(PCOR_MEMBER_EXIT, n - 1, 60 * SEC));
		pthread_mutex_lock(&ev_mu);
		int failures = ev_count[PCOR_MEMBER_FAILURE];
		pthread_mutex_unlock(&ev_mu);
		CHECK(failures == 0);
		for (int q = 1; q < n; q++) {
			pcor_proc_info_t pi;
			CHECK_RC(pcor_proc_info(q, &pi), PCOR_ERR_PEER_LOST);
			CHECK(pi.state == PCOR_PROC_EXITED);
		}
	}
	return 0;
}

/* ------------------------------------------------------------- spawn */

/* Block on events until pids [0, total) all resolve (bounded). */
static void wait_members(int total)
{
	for (int round = 0; round < 300; round++) {
		int ok = 0;
		for (int q = 0; q < total; q++) {
			pcor_proc_info_t pi;
			ok += pcor_proc_info(q, &pi) == PCOR_OK;
		}
		if (ok == total)
			return;
		pthread_mutex_lock(&ev_mu);
		int seen = ev_count[PCOR_MEMBER_STARTUP];
		pthread_mutex_unlock(&ev_mu);
		wait_events(PCOR_MEMBER_STARTUP, seen + 1, SEC / 10);
	}
	CHECK(!"not every member became visible");
}

static int run_spawn(int n, int m, const char *self_path)
{
	CHECK_OK(pcor_member_callback(on_member, NULL));
	barrier("cb", n); /* everyone listens before anyone spawns */
	if (me == 0) {
		char nbuf[16], mbuf[16];
		snprintf(nbuf, sizeof(nbuf), "%d", n);
		snprintf(mbuf, sizeof(mbuf), "%d", m);
		char *args[] = {(char *)self_path, "spawned", nbuf, mbuf, NULL};
		int seen[64] = {0};
		for (int i = 0; i < m; i++) {
			int pid = -1;
			CHECK_OK(pcor_spawn(NULL, args, &pid));
			CHECK(pid >= n && pid < n + m && !seen[pid]);
			seen[pid] = 1;
			/* joined: resolvable at once */
			pcor_proc_info_t pi;
			CHECK_OK(pcor_proc_info(pid, &pi));
		}
		char *bad[] = {"/nonexistent/pcor-program", NULL};
		int pid;
		CHECK_RC(pcor_spawn(NULL, bad, &pid), PCOR_ERR_NOTFOUND);
		CHECK_RC(pcor_spawn(NULL, NULL, &pid), PCOR_ERR_INVAL);
	}
	/* Every initial process sees m start-up events. */
	CHECK(wait_events(PCOR_MEMBER_STARTUP, m, 60 * SEC));
	wait_members(n + m);
	CHECK(pcor_nprocs() == n + m);
	print_view("spawn", n + m, false);
	barrier("all", n + m);
	pthread_mutex_lock(&ev_mu);
	int failures = ev_count[PCOR_MEMBER_FAILURE];
	pthread_mutex_unlock(&ev_mu);
	CHECK(failures == 0);
	return 0;
}

static int run_spawned(int n, int m)
{
	CHECK(me >= n && me < n + m);
	CHECK_OK(pcor_member_callback(on_member, NULL));
	wait_members(n + m);
	CHECK(pcor_nprocs() == n + m);
	print_view("spawn", n + m, false);
	barrier("all", n + m);
	return 0;
}

/* -------------------------------------------------------------- kill */

static int run_kill(int n)
{
	int victim = n - 1;
	CHECK_OK(pcor_member_callback(on_member, NULL));
	if (me == victim) {
		/* Die only once every survivor listens for it. */
		char name[32];
		for (int q = 0; q < victim; q++) {
			int pid, thid;
			snprintf(name, sizeof(name), "armed/%d", q);
			CHECK_OK(pcor_name_lookup(name, 30 * SEC, &pid, &thid));
		}
		CHECK_OK(pcor_name_publish("victim", me, 0));
		/* ...and once each has seen it is about to. */
		for (int q = 0; q < victim; q++) {
			int pid, thid;
			snprintf(name, sizeof(name), "seen/%d", q);
			CHECK_OK(pcor_name_lookup(name, 30 * SEC, &pid, &thid));
		}
		raise(SIGKILL);
	}
	char name[32];
	snprintf(name, sizeof(name), "armed/%d", me);
	CHECK_OK(pcor_name_publish(name, me, 0));
	int pid, thid;
	CHECK_OK(pcor_name_lookup("victim", 30 * SEC, &pid, &thid));
	/* It dies after we say we saw it: t0 is no later than its death. */
	int64_t t0 = now_ns();
	snprintf(name, sizeof(name), "seen/%d", me);
	CHECK_OK(pcor_name_publish(name, me, 0));
	CHECK(wait_events(PCOR_MEMBER_FAILURE, 1, 2 * SEC));
	pthread_mutex_lock(&ev_mu);
	int64_t lag = ev_fail_ns[victim] - t0;
	int who = ev_last_pid[PCOR_MEMBER_FAILURE];
	pthread_mutex_unlock(&ev_mu);
	CHECK(who == victim);
	CHECK(lag < 2 * SEC);
	printf("kill: failure seen %.1f ms after the victim's last word\n",
	       (double)lag / 1e6);
	pcor_proc_info_t pi;
	CHECK_RC(pcor_proc_info(victim, &pi), PCOR_ERR_PEER_LOST);
	CHECK(pi.state == PCOR_PROC_FAILED);
	/* Its names went with it; the survivors carry on. */
	int rc = pcor_name_lookup("victim", 0, &pid, &thid);
	CHECK(rc == PCOR_ERR_NOTFOUND || rc == PCOR_ERR_PEER_LOST);
	check_names(n - 1);
	barrier("done", n - 1);
	return 0;
}

/* ------------------------------------------------------------- rogue */

static int dial(const char *addr)
{
	struct sockaddr_in sin;
	CHECK(pcori_sock_parse(addr, &sin) == 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	return fd;
}

/* The peer must close on us within 5 s. */
static void expect_closed(int fd)
{
	char buf[256];
	for (int i = 0; i < 100; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		CHECK(poll(&p, 1, 50) >= 0);
		if (!p.revents)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			close(fd);
			return;
		}
	}
	CHECK(!"the agent kept a rogue connection open");
}

static void read_challenge(int fd)
{
	uint8_t ch[PCORI_CTL_HDR + PCORI_NONCE_BYTES];
	size_t got = 0;
	while (got < sizeof(ch)) {
		ssize_t n = recv(fd, ch + got, sizeof(ch) - got, 0);
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK(ch[4] == PCORI_CTL_VERSION && ch[5] == PCORI_CTL_CHALLENGE);
}

static void attack(const char *addr)
{
	/* 1. a client that does not hold the key */
	int fd = dial(addr);
	read_challenge(fd);
	uint8_t wrongkey[PCORI_KEY_BYTES] = {1, 2, 3};
	uint8_t nonce[PCORI_NONCE_BYTES] = {9}, mac[PCORI_MAC_BYTES];
	pcori_mac(wrongkey, 'C', nonce, nonce, mac);
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_AUTH);
	pcori_w_bytes(&w, nonce, sizeof(nonce));
	pcori_w_bytes(&w, mac, sizeof(mac));
	CHECK(pcori_frame_end(&w));
	CHECK(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
	pcori_wbuf_free(&w);
	expect_closed(fd);
	/* 2. garbage */
	fd = dial(addr);
	const char junk[] = "GET / HTTP/1.0\r\n\r\n";
	CHECK(send(fd, junk, sizeof(junk) - 1, 0) > 0);
	expect_closed(fd);
	/* 3. an oversized request before authenticating */
	fd = dial(addr);
	uint8_t hdr[PCORI_CTL_HDR] = {0x40, 0, 0, 0, PCORI_CTL_VERSION,
				      PCORI_CTL_AUTH, 0, 0};
	CHECK(send(fd, hdr, sizeof(hdr), 0) == sizeof(hdr));
	expect_closed(fd);
	/* 4. a request that skips authentication */
	fd = dial(addr);
	pcori_frame_begin(&w, PCORI_CTL_PUB);
	pcori_w_u32(&w, 1);
	pcori_w_u8(&w, 0);
	pcori_w_u32(&w, 0);
	pcori_w_u32(&w, 0);
	pcori_w_str(&w, "stolen");
	CHECK(pcori_frame_end(&w));
	CHECK(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
	pcori_wbuf_free(&w);
	expect_closed(fd);
}

static int run_rogue(int n)
{
	CHECK(n >= 2);
	if (me == 0) {
		pcor_proc_info_t pi;
		CHECK_OK(pcor_proc_info(1, &pi));
		attack(pi.agent);
		/* the launcher's bootstrap server too */
		const char *seed = getenv("PCOR_AGENT_ADDR");
		if (seed) {
			char first[64];
			snprintf(first, sizeof(first), "%s", seed);
			char *comma = strchr(first, ',');
			if (comma)
				*comma = '\0';
			attack(first);
		}
		CHECK_OK(pcor_name_publish("attacked", me, 0));
	}
	if (me == 1) {
		int pid, thid;
		CHECK_OK(pcor_name_lookup("attacked", 30 * SEC, &pid, &thid));
		uint64_t auth, proto, acc;
		pcori_naming_stats(&auth, &proto, &acc);
		printf("rogue: agent rejected %llu bad-key and %llu "
		       "malformed clients\n",
		       (unsigned long long)auth, (unsigned long long)proto);
		CHECK(auth >= 1);
		CHECK(proto >= 3);
	}
	/* Nothing the attacker sent was stored. */
	int pid, thid;
	CHECK_RC(pcor_name_lookup("stolen", 0, &pid, &thid), PCOR_ERR_NOTFOUND);
	return run_basic(n, 0);
}

/* ------------------------------------------------------------- siege */

#define SIEGE_TOTAL 5000 /* keyless connections at least */
#define SIEGE_CAP 50000  /* and at most */

static struct siege {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sockaddr_in to;
	int ring;        /* connections held open at once */
	int made;        /* connections opened */
	bool stop;
} sg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* One stranger: i % 4 picks idle, slow header, garbage or a wrong key. */
static int siege_one(int i)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sg.to, sizeof(sg.to)) < 0) {
		close(fd);
		return -1;
	}
	uint8_t b[PCORI_CTL_HDR + PCORI_NONCE_BYTES + PCORI_MAC_BYTES];
	size_t len = 0;
	switch (i % 4) {
	case 1: /* the start of a header, never finished */
		b[0] = 0;
		b[1] = 0;
		b[2] = 0;
		len = 3;
		break;
	case 2: /* garbage */
		for (size_t k = 0; k < 64; k++)
			b[k] = (uint8_t)(i * 31 + k * 7);
		len = 64;
		break;
	case 3: { /* a well-formed answer with a made-up proof */
		memset(b, 0x5a, sizeof(b));
		uint32_t body = PCORI_NONCE_BYTES + PCORI_MAC_BYTES;
		b[0] = 0;
		b[1] = 0;
		b[2] = 0;
		b[3] = (uint8_t)body;
		b[4] = PCORI_CTL_VERSION;
		b[5] = PCORI_CTL_AUTH;
		b[6] = b[7] = 0;
		len = sizeof(b);
		break;
	}
	}
	if (len)
		(void)!send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	return fd;
}

static void *siege_main(void *arg)
{
	(void)arg;
	int *fds = malloc((size_t)sg.ring * sizeof(int));
	CHECK(fds);
	for (int k = 0; k < sg.ring; k++)
		fds[k] = -1;
	int i = 0;
	for (;;) {
		pthread_mutex_lock(&sg.mu);
		bool done = (sg.stop && sg.made >= SIEGE_TOTAL) ||
			    sg.made >= SIEGE_CAP;
		pthread_mutex_unlock(&sg.mu);
		if (done)
			break;
		int slot = i % sg.ring;
		if (fds[slot] >= 0)
			close(fds[slot]); /* the oldest of ours */
		fds[slot] = siege_one(i);
		i++;
		pthread_mutex_lock(&sg.mu);
		sg.made += fds[slot] >= 0;
		pthread_cond_broadcast(&sg.cv);
		pthread_mutex_unlock(&sg.mu);
	}
	for (int k = 0; k < sg.ring; k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(fds);
	return NULL;
}

static int run_siege(int n, int m, const char *self_path)
{
	CHECK(n >= 2);
	CHECK_OK(pcor_member_callback(on_member, NULL));
	pthread_t att;
	if (me == 0) {
		/*
		 * Hold many connections at once: raise this process's own
		 * descriptor limit as far as it goes (the agent under siege
		 * keeps its default).
		 */
		struct rlimit rl;
		CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		sg.ring = (int)PCORI_MIN((rlim_t)2000, rl.rlim_cur / 2);
		pcor_proc_info_t pi;
		CHECK_OK(pcor_proc_info(1, &pi));
		CHECK(pcori_sock_parse(pi.agent, &sg.to) == 0);
		CHECK(pthread_create(&att, NULL, siege_main, NULL) == 0);
		/* The flood is on before anyone joins. */
		pthread_mutex_lock(&sg.mu);
		while (sg.made < sg.ring / 2)
			pthread_cond_wait(&sg.cv, &sg.mu);
		pthread_mutex_unlock(&sg.mu);
	}
	barrier("flood", n);
	if (me == 0) {
		char nbuf[16], mbuf[16];
		snprintf(nbuf, sizeof(nbuf), "%d", n);
		snprintf(mbuf, sizeof(mbuf), "%d", m);
		char *args[] = {(char *)self_path, "spawned", nbuf, mbuf, NULL};
		for (int i = 0; i < m; i++) {
			int pid = -1;
			CHECK_OK(pcor_spawn(NULL, args, &pid));
			CHECK(pid >= n && pid < n + m);
		}
	}
	/* Lookups go on throughout, uncached. */
	for (int round = 0; round < 20; round++) {
		pcori_dir_cache_flush();
		for (int q = 0; q < n; q++) {
			pcor_proc_info_t pi;
			char name[32];
			int pid, thid;
			CHECK_OK(pcor_proc_info(q, &pi));
			snprintf(name, sizeof(name), "flood/%d", q);
			CHECK_OK(pcor_name_lookup(name, SEC, &pid, &thid));
			CHECK(pid == q);
		}
	}
	CHECK(wait_events(PCOR_MEMBER_STARTUP, m, 60 * SEC));
	wait_members(n + m);
	barrier("all", n + m);
	if (me == 0) {
		pthread_mutex_lock(&sg.mu);
		sg.stop = true;
		pthread_mutex_unlock(&sg.mu);
		CHECK(pthread_join(att, NULL) == 0);
		printf("siege: %d keyless connections made, %d held at once\n",
		       sg.made, sg.ring);
		CHECK(sg.made >= SIEGE_TOTAL);
	}
	barrier("over", n); /* the flood has ended */
	if (me == 1) {
		uint64_t ref[PCORI_REFUSE_NREASONS_], total = 0;
		pcori_admit_stats(ref);
		for (int i = 0; i < PCORI_REFUSE_NREASONS_; i++)
			total += ref[i];
		printf("siege: refused %llu (key %llu, malformed %llu, slow "
		       "%llu, shed %llu, no fd %llu)\n",
		       (unsigned long long)total,
		       (unsigned long long)ref[PCORI_REFUSE_AUTH],
		       (unsigned long long)ref[PCORI_REFUSE_PROTO],
		       (unsigned long long)ref[PCORI_REFUSE_TIMEOUT],
		       (unsigned long long)ref[PCORI_REFUSE_SHED],
		       (unsigned long long)ref[PCORI_REFUSE_NOFD]);
		/* Most strangers were refused by the agent, not left alone. */
		CHECK(total >= SIEGE_TOTAL / 2);
		CHECK(ref[PCORI_REFUSE_AUTH] > 0 && ref[PCORI_REFUSE_PROTO] > 0);
	}
	barrier("checked", n); /* nobody leaves before pid 1 looked */
	pthread_mutex_lock(&ev_mu);
	int failures = ev_count[PCOR_MEMBER_FAILURE];
	pthread_mutex_unlock(&ev_mu);
	CHECK(failures == 0);
	return 0;
}

/* -------------------------------------------------------------- stop */

/* The OS pid of job process `pid` on this host, from /proc (or -1). */
static pid_t find_ospid(int pid)
{
	const char *key = getenv("PCOR_JOB_KEY");
	CHECK(key);
	char want_pid[64], want_key[128];
	snprintf(want_pid, sizeof(want_pid), "PCOR_JOB_PID=%d", pid);
	snprintf(want_key, sizeof(want_key), "PCOR_JOB_KEY=%s", key);
	DIR *d = opendir("/proc");
	CHECK(d);
	pid_t found = -1;
	struct dirent *de;
	static char env[1 << 16];
	while (found < 0 && (de = readdir(d))) {
		char path[300];
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(env, 1, sizeof(env) - 1, f);
		fclose(f);
		env[n] = '\0';
		bool p = false, k = false;
		for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
			p = p || !strcmp(env + i, want_pid);
			k = k || !strcmp(env + i, want_key);
		}
		if (p && k)
			found = (pid_t)atoi(de->d_name);
	}
	closedir(d);
	return found;
}

static int run_stop(int n)
{
	CHECK(n >= 2);
	int victim = n - 1;
	int64_t bound = (getenv("PCOR_TEST_SLOW") ? 10 : 2) * SEC;
	CHECK_OK(pcor_member_callback(on_member, NULL));
	size_t xfer = getenv("FAULT_XFER") ? (size_t)atoll(getenv("FAULT_XFER"))
					   : 0;
	uint8_t *xbuf = xfer ? malloc(xfer) : NULL;
	pcor_handle_t hx = 0;
	CHECK(!xfer || xbuf);
	if (xfer && me == 0)
		CHECK_OK(pcor_recv_copy(victim, 0, 77, xbuf, xfer, NULL, &hx));
	barrier("cb", n);
	if (me == victim) {
		if (xfer) {
			memset(xbuf, 0x3c, xfer);
			CHECK_OK(pcor_send_copy(0, 0, 77, xbuf, xfer, &hx));
		}
		/* Stopped in here; afterwards everyone else is lost to us. */
		CHECK_OK(pcor_name_publish("stop/ready", me, 0));
		CHECK(wait_events(PCOR_MEMBER_FAILURE, n - 1, 60 * SEC));
		for (int q = 0; q < victim; q++) {
			pcor_proc_info_t pi;
			CHECK_RC(pcor_proc_info(q, &pi), PCOR_ERR_PEER_LOST);
			pcor_handle_t h;
			int rc = pcor_send_copy(q, 0, 1, "x", 1, &h);
			CHECK(rc == PCOR_ERR_PEER_LOST ||
			      (rc == PCOR_OK && pcor_handle_test(h, PCOR_BLOCK) ==
						       PCOR_ERR_PEER_LOST));
		}
		if (xfer) {
			/* Copied out (OK) or cut off, never left pending. */
			int rc = pcor_handle_test(hx, PCOR_BLOCK);
			CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
			free(xbuf);
		}
		printf("stop: %s\n", getenv("FAULT_CMD")
					      ? "cut off from everyone"
					      : "fenced out after resuming");
		return 0;
	}
	/*
	 * Every survivor is past the first barrier too: the victim's names
	 * vanish with it.
	 */
	barrier("armed", n - 1);
	int64_t t0 = 0;
	pid_t os = -1;
	if (me == 0) {
		/* The victim is past the barrier: stopping it breaks nothing. */
		int pid, thid;
		CHECK_OK(pcor_name_lookup("stop/ready", 30 * SEC, &pid, &thid));
		const char *cmd = getenv("FAULT_CMD");
		if (!cmd) {
			os = find_ospid(victim);
			CHECK(os > 0);
		}
		/* The transfer is under way when the fault comes. */
		if (xfer)
			CHECK_RC(pcor_handle_test(hx, PCOR_NONBLOCK),
				 PCOR_INPROGRESS);
		t0 = now_ns();
		if (cmd)
			CHECK(system(cmd) == 0);
		else
			CHECK(kill(os, SIGSTOP) == 0);
		if (xfer) {
			CHECK_RC(pcor_handle_test(hx, PCOR_BLOCK),
				 PCOR_ERR_PEER_LOST);
			int64_t t = now_ns() - t0;
			printf("stop: the %zu-byte receive ended with PEER_LOST "
			       "%.1f ms after the fault\n",
			       xfer, (double)t / 1e6);
			CHECK(t < bound);
		}
	}
	free(xbuf);
	CHECK(wait_events(PCOR_MEMBER_FAILURE, 1, 30 * SEC));
	pthread_mutex_lock(&ev_mu);
	int failures = ev_count[PCOR_MEMBER_FAILURE];
	int who = ev_last_pid[PCOR_MEMBER_FAILURE];
	int64_t t_lost = ev_fail_ns[victim];
	pthread_mutex_unlock(&ev_mu);
	CHECK(failures == 1 && who == victim);
	pcor_proc_info_t pi;
	CHECK_RC(pcor_proc_info(victim, &pi), PCOR_ERR_PEER_LOST);
	CHECK(pi.state == PCOR_PROC_FAILED);
	if (me == 0) {
		printf("stop: PEER_LOST %.1f ms after %s\n",
		       (double)(t_lost - t0) / 1e6, os > 0 ? "SIGSTOP" : "the fault");
		CHECK(t_lost - t0 < bound);
		if (os > 0)
			CHECK(kill(os, SIGCONT) == 0);
	}
	barrier("after", n - 1);
	/* Nobody else was taken for lost meanwhile. */
	pthread_mutex_lock(&ev_mu);
	failures = ev_count[PCOR_MEMBER_FAILURE];
	pthread_mutex_unlock(&ev_mu);
	CHECK(failures == 1);
	return 0;
}

/* ------------------------------------------------------------- bench */

/*
 * Run with PCOR_FAULT_CONNECT_TO=0: no agent can connect to process 0's.
 * pid 0 leaves at once (UNREACH_STAY: stays, until the job is ended);
 * the others suspect it, ask the launcher or, without one (PMIx), a
 * witness, and report what they decided.
 */
static int run_unreach(void)
{
	CHECK_OK(pcor_member_callback(on_member, NULL));
	if (me == 0) {
		if (getenv("UNREACH_STAY")) {
			int pid, thid;
			/* never published: the test ends the job first */
			pcor_name_lookup("never", 120 * SEC, &pid, &thid);
			return 3;
		}
		return 0;
	}
	/*
	 * A failure event when it had joined; under PMIx it cannot even
	 * join, and its directory entry says so.
	 */
	int64_t end = now_ns() + 60 * SEC;
	pcor_proc_info_t pi;
	while (pcor_proc_info(0, &pi) != PCOR_ERR_PEER_LOST &&
	       !wait_events(PCOR_MEMBER_FAILURE, 1, SEC / 10))
		CHECK(now_ns() < end);
	printf("unreach: process 0 declared lost\n");
	return 0;
}

static int run_bench_lookup(int n)
{
	if (me == 0 && n > 1) {
		enum { REPS = 2000 };
		pcori_member_t m;
		int64_t t_unc = 0, t_c = 0;
		for (int i = 0; i < REPS; i++) {
			int q = 1 + i % (n - 1);
			pcori_dir_cache_flush();
			int64_t t = now_ns();
			CHECK_OK(pcori_dir_lookup(q, &m));
			t_unc += now_ns() - t;
			t = now_ns();
			CHECK_OK(pcori_dir_lookup(q, &m));
			t_c += now_ns() - t;
		}
		printf("bench-lookup: uncached %.2f us, cached %.3f us "
		       "(%d lookups)\n",
		       (double)t_unc / REPS / 1e3, (double)t_c / REPS / 1e3,
		       REPS);
		int64_t t = now_ns();
		int pid, thid;
		char name[32];
		for (int i = 0; i < REPS; i++) {
			snprintf(name, sizeof(name), "proc/%d", i % n);
			CHECK_OK(pcor_name_lookup(name, 10 * SEC, &pid, &thid));
		}
		printf("bench-lookup: name lookup %.2f us\n",
		       (double)(now_ns() - t) / REPS / 1e3);
	}
	char name[32];
	snprintf(name, sizeof(name), "proc/%d", me);
	CHECK_OK(pcor_name_publish(name, me, 0));
	barrier("done", n);
	return 0;
}

/* pcor_init with the launcher's key altered by one digit: refused. */
static void try_bad_key(void)
{
	const char *k = getenv("PCOR_JOB_KEY");
	CHECK(k && strlen(k) == 2 * PCORI_KEY_BYTES);
	char good[2 * PCORI_KEY_BYTES + 1], bad[sizeof(good)];
	snprintf(good, sizeof(good), "%s", k);
	snprintf(bad, sizeof(bad), "%s", k);
	bad[0] = bad[0] == '0' ? '1' : '0';
	CHECK(setenv("PCOR_JOB_KEY", bad, 1) == 0);
	int rc = pcor_init(NULL, NULL);
	CHECK(setenv("PCOR_JOB_KEY", good, 1) == 0);
	if (rc != PCOR_ERR_AUTH)
		fprintf(stderr, "wrong key: %s\n", pcor_strerror(rc));
	CHECK_RC(rc, PCOR_ERR_AUTH);
	CHECK_RC(pcor_self_pid(), PCOR_ERR_NOTINIT);
	printf("badkey: refused\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: naming_app scenario [args]\n");
		return 2;
	}
	const char *what = argv[1];
	int a = argc > 2 ? atoi(argv[2]) : 1;
	int b = argc > 3 ? atoi(argv[3]) : 0;
	int c = argc > 4 ? atoi(argv[4]) : 0;
	if (!strcmp(what, "has-pmix")) {
#ifdef PCOR_HAVE_PMIX
		return 0;
#else
		return 1;
#endif
	}
	if (!strcmp(what, "badkey"))
		try_bad_key();
	int irc = pcor_init(&argc, &argv);
	if (!strcmp(what, "unreach") && irc == PCOR_ERR_TIMEDOUT) {
		/* Process 0, which nobody can reach, under PMIx. */
		printf("unreach: could not join: ok\n");
		return 0;
	}
	CHECK_OK(irc);
	me = pcor_self_pid();
	np = pcor_nprocs();
	int rc = 2;
	if (!strcmp(what, "basic"))
		rc = run_basic(a, argc > 4 && !strcmp(argv[3], "hosts") ? c : 0);
	else if (!strcmp(what, "badkey"))
		rc = run_basic(a, 0);
	else if (!strcmp(what, "spawn"))
		rc = run_spawn(a, b, argv[0]);
	else if (!strcmp(what, "spawned"))
		rc = run_spawned(a, b);
	else if (!strcmp(what, "kill"))
		rc = run_kill(a);
	else if (!strcmp(what, "rogue"))
		rc = run_rogue(a);
	else if (!strcmp(what, "stop"))
		rc = run_stop(a);
	else if (!strcmp(what, "siege"))
		rc = run_siege(a, b, argv[0]);
	else if (!strcmp(what, "unreach"))
		rc = run_unreach();
	else if (!strcmp(what, "exit")) {
		if (me == b)
			_exit(c);
		int pid, thid;
		/* never published: pcorrun ends us first */
		pcor_name_lookup("never", 60 * SEC, &pid, &thid);
		rc = 3;
	} else if (!strcmp(what, "alone")) {
		CHECK(me == 0 && np == 1);
		rc = run_basic(1, 1);
		int pid;
		char *args[] = {"true", NULL};
		CHECK_RC(pcor_spawn(NULL, args, &pid), PCOR_ERR_NOSUPPORT);
	} else if (!strcmp(what, "bench-lookup"))
		rc = run_bench_lookup(a);
	if (rc)
		return rc;
	CHECK_OK(pcor_finalize());
	printf("%s: ok\n", what);
	return 0;
}
