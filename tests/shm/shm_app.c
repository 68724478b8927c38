/*
 * shm_app -- the program the pcor-shm integration tests launch through
 * pcorrun (shm_test.sh).  argv[1] picks the case; every process prints
 * "<case>: ok" when all its checks held and exits non-zero otherwise.
 * Each process also prints "ospid <n>" so the script can look for
 * anything left behind.
 *
 *   sizes MAX [nocma]  2 processes: every size from 0 bytes to MAX, both
 *                      ways, copy and DMA sends and receives, byte-exact;
 *                      checks the messages went through pcor-shm, with
 *                      single-copy reads (or, with nocma, without any)
 *   alltoall T         N processes x T threads: every thread sends to
 *                      every thread of the other processes (small, cell
 *                      and rendezvous sizes) and receives from all
 *   flood N            2 processes: pid 0 sends N messages to a thread of
 *                      pid 1 that does not receive until all are posted
 *                      and pid 1 has refused some (its MCB pool is full);
 *                      then it receives all, in order, none lost
 *   kill               3 processes: pid 1 kills itself (SIGKILL) while
 *                      pid 0 is sending to it; pid 0 gets PCOR_ERR_PEER_LOST,
 *                      releases pid 1's segment and keeps talking to pid 2
 *   spawn              2 processes; pid 0 spawns a third ("spawned"),
 *                      which talks to both over pcor-shm
 *   rogue              3 processes: pid 2 writes garbage into its ring in
 *                      pid 0's segment and forges a slot; pid 0 survives,
 *                      counts it, fails its receive naming pid 2 (lost)
 *                      and keeps talking to pid 1
 *   lastwords          3 processes: pid 1 stops pid 0, sends it small and
 *                      medium messages, and dies by SIGKILL; pid 2 resumes
 *                      pid 0 once the death is known; pid 0 then receives
 *                      every message, intact and in order, and a receive
 *                      naming pid 1 after them fails (lost)
 *   idle               2 processes: pid 0 has posted a receive and
 *                      makes no call into pcor (its last wait has just
 *                      ended) when pid 1 sends it a small message: the
 *                      receive completes all the same
 *
 * Waiting is on handles (and, where a background event is awaited, on a
 * bounded poll of its outcome); no sleeps stand in for events.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* syscall() for the futex wake */
#endif
#include "harness.h"

#include "dispatch/dispatch.h"
#include "member_wait.h"
#include "port/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SEC 1000000000LL

static int me, np;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	CHECK(p);
	return p;
}

static void *dma(size_t n)
{
	void *p;
	CHECK_OK(pcor_dma_alloc(n, &p));
	return p;
}

/* Zero-byte messages from every process to every other on tag. */
static void barrier(int tag)
{
	pcor_handle_t *h = xmalloc(sizeof(*h) * 2 * (size_t)np);
	int k = 0;
	for (int q = 0; q < np; q++) {
		if (q == me)
			continue;
		CHECK_OK(pcor_recv_copy(q, 0, tag, NULL, 0, NULL, &h[k++]));
		CHECK_OK(pcor_send_copy(q, 0, tag, NULL, 0, &h[k++]));
	}
	for (int i = 0; i < k; i++)
		CHECK_OK(pcor_handle_test(h[i], PCOR_BLOCK));
	free(h);
}

/* The port that carries messages to pid. */
static pcori_port_t *route_of(int pid)
{
	pcori_peer_t *peer = pcori_peer_get(pid);
	CHECK(peer);
	CHECK_OK(pcori_peer_ready(peer));
	pcori_route_t *r = pcori_peer_route(peer);
	CHECK(r);
	return r->port;
}

/* This process's pcor-shm port. */
static pcori_port_t *shm_port(void)
{
	for (int i = 0; i < pcori_net.nports; i++)
		if (!strcmp(pcori_net.ports[i]->info.provider, "pcor-shm"))
			return pcori_net.ports[i];
	CHECK(!"a pcor-shm port");
	return NULL;
}

static bool through_shm(int pid)
{
	return !strcmp(route_of(pid)->info.provider, "pcor-shm");
}

/* ------------------------------------------------------------- sizes */

static const size_t sizes_list[] = {
	0, 1, 2, 7, 8, 63, 64, 65, 255, 256, 1000, 4095, 4096, 8000,
	8120, 8121, 8192, 9000, 16384, 65535, 65536, 65537, 100000,
	(1 << 20) + 3, 4 << 20, (16 << 20) + 1, 64 << 20, 256 << 20,
};

static uint64_t seed_of(size_t size, int from)
{
	return size * 2 + (uint64_t)from + 1;
}

/* One message of n bytes from `from` to `to`, checked at the receiver. */
static void transfer(int from, int to, size_t n, int variant, uint8_t *src,
		     uint8_t *dsrc, uint8_t *dst)
{
	int tag = 100 + variant;
	uint64_t seed = seed_of(n, from);
	if (me == from) {
		pcor_handle_t h;
		/* Alternate copy sends (any memory) and DMA sends. */
		if (variant & 1) {
			th_fill(dsrc, n, seed);
			CHECK_OK(pcor_send_dma(to, 0, tag, dsrc, n, 0, &h));
		} else {
			th_fill(src, n, seed);
			CHECK_OK(pcor_send_copy(to, 0, tag, src, n, &h));
			/* Copy semantics: the buffer is ours again at once. */
			memset(src, 0x5a, n);
		}
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	} else if (me == to) {
		pcor_handle_t h;
		pcor_msginfo_t info;
		if (variant & 2) {
			void *got = NULL;
			CHECK_OK(pcor_recv_dma(from, 0, tag, &got, &info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == n && info.pid == from);
			CHECK(n == 0 || got);
			CHECK_PATTERN(got, n, seed);
			if (got)
				CHECK_OK(pcor_dma_free(got));
		} else {
			/* A guard byte past the capacity must stay. */
			dst[n] = 0xa5;
			CHECK_OK(pcor_recv_copy(from, 0, tag, dst, n, &info,
						&h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == n && info.pid == from &&
			      info.thid == 0 && info.tag == tag);
			CHECK_PATTERN(dst, n, seed);
			CHECK(dst[n] == 0xa5);
		}
	}
}

static int run_sizes(size_t max, bool nocma)
{
	CHECK(np == 2);
	int peer = 1 - me;
	CHECK(through_shm(peer));
	pcori_port_t *port = route_of(peer);
	CHECK(port->can_read == !nocma);
	uint8_t *src = xmalloc(max), *dst = xmalloc(max + 1);
	uint8_t *dsrc = dma(max);
	int v = 0;
	for (size_t i = 0; i < PCORI_ARRAY_LEN(sizes_list); i++) {
		size_t n = sizes_list[i];
		if (n > max)
			break;
		transfer(0, 1, n, v++, src, dsrc, dst);
		transfer(1, 0, n, v++, src, dsrc, dst);
	}
	/* Truncation: what fits arrives, with the full size reported. */
	size_t big = PCORI_MIN(max, (size_t)200000), cap = big / 2;
	if (me == 0) {
		pcor_handle_t h;
		th_fill(src, big, 77);
		CHECK_OK(pcor_send_copy(1, 0, 99, src, big, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	} else {
		pcor_handle_t h;
		pcor_msginfo_t info;
		/* Guard bytes past the capacity must stay untouched. */
		size_t guard = PCORI_MIN((size_t)4096, max + 1 - cap);
		memset(dst + cap, 0xa5, guard);
		CHECK_OK(pcor_recv_copy(0, 0, 99, dst, cap, &info, &h));
		CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
		CHECK(info.size == big);
		CHECK_PATTERN(dst, cap, 77);
		for (size_t i = 0; i < guard; i++)
			CHECK(dst[cap + i] == 0xa5);
	}
	barrier(98);
	/*
	 * Every message above its rendezvous threshold took the single
	 * copy, at least one read each; or (nocma) none did.  pid 1 receives
	 * the copy sends (transfer's even variants), which keep to cells up
	 * to PCOR_EAGER_MAX; pid 0 the DMA ones, read above
	 * PCOR_SHM_EAGER_MAX (set low here in sizes-block).
	 */
	uint64_t reads = atomic_load(&port->st.rma_reads), read_msgs = 0;
	size_t thr = me == 1 ? pcori_net.eager_max
			     : PCORI_MIN(pcori_net.eager_max, port->read_above);
	for (size_t i = 0; i < PCORI_ARRAY_LEN(sizes_list); i++)
		if (sizes_list[i] <= max && sizes_list[i] > thr)
			read_msgs++;
	if (nocma)
		CHECK(reads == 0);
	else
		CHECK(reads >= read_msgs);
	CHECK(atomic_load(&port->st.bad_hdr) == 0);
	free(src);
	free(dst);
	pcor_dma_free(dsrc);
	return 0;
}

/* ---------------------------------------------------------- alltoall */

static int a2a_t;

static size_t a2a_size(int from_pid, int from_t, int to_pid, int to_t)
{
	unsigned k = (unsigned)(from_pid * 7919 + from_t * 104729 +
				to_pid * 31 + to_t * 131);
	if (k % 101 == 0)
		return 70000 + k % 100; /* rendezvous */
	if (k % 13 == 0)
		return 4000 + k % 500;  /* cells */
	return 16 + k % 200;            /* inline in the ring */
}

static uint64_t a2a_seed(int from_pid, int from_t, int to_pid, int to_t)
{
	return ((uint64_t)from_pid << 48) ^ ((uint64_t)from_t << 32) ^
	       ((uint64_t)to_pid << 16) ^ (uint64_t)to_t;
}

static void *a2a_thread(void *arg)
{
	int t = (int)(intptr_t)arg; /* 1..a2a_t */
	CHECK(pcor_self_thid() == t);
	int peers = (np - 1) * a2a_t;
	pcor_handle_t *hs = xmalloc(sizeof(*hs) * (size_t)peers);
	uint8_t *buf = xmalloc(80000);
	int k = 0;
	for (int q = 0; q < np; q++) {
		if (q == me)
			continue;
		for (int u = 1; u <= a2a_t; u++) {
			size_t n = a2a_size(me, t, q, u);
			th_fill(buf, n, a2a_seed(me, t, q, u));
			CHECK_OK(pcor_send_copy(q, u, 7, buf, n, &hs[k++]));
		}
	}
	/* Receive from everybody, in whatever order they come. */
	uint8_t *seen = calloc((size_t)np * (size_t)(a2a_t + 1), 1);
	CHECK(seen);
	for (int i = 0; i < peers; i++) {
		pcor_handle_t h;
		pcor_msginfo_t info;
		CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, 7, buf,
					80000, &info, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK(info.pid >= 0 && info.pid < np && info.pid != me);
		CHECK(info.thid >= 1 && info.thid <= a2a_t);
		size_t slot = (size_t)info.pid * (size_t)(a2a_t + 1) +
			      (size_t)info.thid;
		CHECK(!seen[slot]);
		seen[slot] = 1;
		CHECK(info.size == a2a_size(info.pid, info.thid, me, t));
		CHECK_PATTERN(buf, info.size,
			      a2a_seed(info.pid, info.thid, me, t));
	}
	for (int i = 0; i < k; i++)
		CHECK_OK(pcor_handle_test(hs[i], PCOR_BLOCK));
	free(seen);
	free(buf);
	free(hs);
	return NULL;
}

static int run_alltoall(int t)
{
	a2a_t = t;
	for (int q = 0; q < np; q++)
		if (q != me)
			CHECK(through_shm(q));
	int *thids = xmalloc(sizeof(int) * (size_t)t);
	for (int i = 0; i < t; i++) {
		CHECK_OK(pcor_thread_create(a2a_thread, (void *)(intptr_t)(i + 1),
					    &thids[i]));
		/* Ids are handed out in order: the peers rely on it. */
		CHECK(thids[i] == i + 1);
	}
	for (int i = 0; i < t; i++)
		CHECK_OK(pcor_thread_join(thids[i], NULL));
	free(thids);
	barrier(97);
	return 0;
}

/* ------------------------------------------------------------- flood */

static int flood_n;
static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_cv = PTHREAD_COND_INITIALIZER;
static bool fl_posted, fl_go;

static size_t flood_size(int i)
{
	/*
	 * Now and then a message past an eighth of the ring: inline while it
	 * finds room there, else through cells (the ring fills first here);
	 * below PCOR_SHM_EAGER_MAX (a rendezvous would hold its sender's
	 * budget until this receiver, which waits on purpose, takes it).
	 * The receiver checks them all, in order.
	 */
	return i % 50 == 49 ? 6000 : 16;
}

/* pid 0: posts every send, says so, then waits for them all. */
static void *flood_sender(void *arg)
{
	(void)arg;
	pcor_handle_t *h = xmalloc(sizeof(*h) * (size_t)flood_n);
	uint8_t buf[6000];
	for (int i = 0; i < flood_n; i++) {
		size_t n = flood_size(i);
		th_fill(buf, n, (uint64_t)i);
		CHECK_OK(pcor_send_copy(1, 0, 5, buf, n, &h[i]));
	}
	pthread_mutex_lock(&fl_mu);
	fl_posted = true;
	pthread_cond_broadcast(&fl_cv);
	pthread_mutex_unlock(&fl_mu);
	for (int i = 0; i < flood_n; i++)
		CHECK_OK(pcor_handle_test(h[i], PCOR_BLOCK));
	free(h);
	return NULL;
}

/* pid 1: waits for pid 0's word that every send is posted. */
static void *flood_listener(void *arg)
{
	(void)arg;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, PCOR_ANY_THID, 6, NULL, 0, NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	pthread_mutex_lock(&fl_mu);
	fl_go = true;
	pthread_cond_broadcast(&fl_cv);
	pthread_mutex_unlock(&fl_mu);
	return NULL;
}

static void wait_flag(bool *flag)
{
	pthread_mutex_lock(&fl_mu);
	while (!*flag)
		pthread_cond_wait(&fl_cv, &fl_mu);
	pthread_mutex_unlock(&fl_mu);
}

static int run_flood(int n)
{
	CHECK(np == 2);
	flood_n = n;
	CHECK(through_shm(1 - me));
	pcori_port_t *port = route_of(1 - me);
	int th;
	if (me == 0) {
		CHECK_OK(pcor_thread_create(flood_sender, NULL, &th));
		wait_flag(&fl_posted);
		/* From another thread: its stream is not behind the flood. */
		pcor_handle_t h;
		CHECK_OK(pcor_send_copy(1, 1, 6, NULL, 0, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK_OK(pcor_thread_join(th, NULL));
		/*
		 * The receiver held the ring full: some of the big ones went
		 * through the cells (and still arrived in their place).
		 */
		uint64_t spilled = atomic_load(&port->st.spilled);
		printf("flood: %llu messages through the cells\n",
		       (unsigned long long)spilled);
		CHECK(spilled > 0);
	} else {
		CHECK_OK(pcor_thread_create(flood_listener, NULL, &th));
		CHECK(th == 1);
		wait_flag(&fl_go);
		/*
		 * Not receiving: the pool fills and then newcomers are held
		 * back -- refused; fast messages, which cannot be sent again,
		 * are taken outside the pool (or, without memory, left in the
		 * ring) and their acks held back.  The word on tag 6 came
		 * through the same ring: nothing stalled it.
		 */
		uint32_t cap = (uint32_t)pcori_rt.cfg.mcb_pool;
		int64_t end = now_ns() + 60 * SEC;
		while (atomic_load(&port->st.nack_sent) +
				       atomic_load(&port->st.parked) ==
			       0 &&
		       now_ns() < end)
			sched_yield();
		CHECK(atomic_load(&port->st.nack_sent) +
			      atomic_load(&port->st.parked) >
		      0);
		/* Held back by the pool and the budget, not piled up. */
		CHECK(pcori_mcb_pool_avail(&pcori_msg.pool) <= cap);
		CHECK(atomic_load(&pcori_msg.unexp_bytes) <=
		      pcori_msg.unexp_max);
		/* Outside the pool: at most a fast window (256) per stream. */
		int64_t over = atomic_load(&pcori_msg.overflow);
		CHECK(over >= 0 && over <= 2 * 256);
		uint8_t buf[9000];
		for (int i = 0; i < n; i++) {
			pcor_handle_t h;
			pcor_msginfo_t info;
			CHECK_OK(pcor_recv_copy(0, PCOR_ANY_THID, 5, buf,
						sizeof(buf), &info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == flood_size(i));
			CHECK_PATTERN(buf, info.size, (uint64_t)i);
		}
		CHECK_OK(pcor_thread_join(th, NULL));
		printf("flood: %d messages, %llu refusals, %lld outside the "
		       "pool\n",
		       n, (unsigned long long)atomic_load(&port->st.nack_sent),
		       (long long)over);
		/* Every one was received: none is left outside the pool. */
		CHECK(atomic_load(&pcori_msg.overflow) == 0);
	}
	barrier(96);
	return 0;
}

/* -------------------------------------------------------------- kill */

/* Does this process still map the segment of job pid `pid`? */
static bool maps_segment_of(int pid)
{
	char want[64];
	snprintf(want, sizeof(want), "pcor-shm-%08x-%d ",
		 (unsigned)pcori_net.lim.key_check, pid);
	FILE *f = fopen("/proc/self/maps", "re");
	CHECK(f);
	char line[512];
	bool found = false;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, want))
			found = true;
	fclose(f);
	return found;
}

/* Round trips of a few sizes between pid 0 and pid 2. */
static void talk_0_2(int tag)
{
	static const size_t n[] = {8, 5000, 60000, 3 << 20};
	int peer = me == 0 ? 2 : 0;
	uint8_t *buf = xmalloc(3 << 20);
	for (size_t i = 0; i < PCORI_ARRAY_LEN(n); i++) {
		pcor_handle_t s, r;
		pcor_msginfo_t info;
		CHECK_OK(pcor_recv_copy(peer, 0, tag, buf, n[i], &info, &r));
		uint8_t *out = xmalloc(n[i]);
		th_fill(out, n[i], n[i] + (uint64_t)me);
		CHECK_OK(pcor_send_copy(peer, 0, tag, out, n[i], &s));
		CHECK_OK(pcor_handle_test(s, PCOR_BLOCK));
		CHECK_OK(pcor_handle_test(r, PCOR_BLOCK));
		CHECK(info.size == n[i]);
		CHECK_PATTERN(buf, n[i], n[i] + (uint64_t)peer);
		free(out);
	}
	free(buf);
}

static int run_kill(void)
{
	CHECK(np == 3);
	for (int q = 0; q < np; q++)
		if (q != me)
			CHECK(through_shm(q));
	barrier(95);
	if (me == 1) {
		/* Take the first message, then die with the rest under way. */
		uint8_t b[64];
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(0, 0, 10, b, sizeof(b), NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		kill(getpid(), SIGKILL);
		CHECK(!"still alive after SIGKILL");
	}
	if (me == 0) {
		/* Many messages of every kind, and a receive that never ends. */
		enum { M = 300 };
		pcor_handle_t hs[M], hr;
		uint8_t *big = dma(32 << 20), *mid = xmalloc(20000);
		memset(big, 1, 32 << 20);
		memset(mid, 2, 20000);
		CHECK_OK(pcor_recv_copy(1, 0, 11, mid, 20000, NULL, &hr));
		int lost = 0, posted = 0;
		for (int i = 0; i < M; i++) {
			int rc;
			if (i % 3 == 1)
				rc = pcor_send_dma(1, 0, 10, big, 32 << 20, 0,
						   &hs[posted]);
			else
				rc = pcor_send_copy(1, 0, 10, mid,
						    i % 3 ? 20000 : 8,
						    &hs[posted]);
			/* Once its death is known, sends fail at once. */
			CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
			if (rc == PCOR_OK)
				posted++;
			else
				lost++;
		}
		CHECK_RC(pcor_handle_test(hr, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
		for (int i = 0; i < posted; i++) {
			int rc = pcor_handle_test(hs[i], PCOR_BLOCK);
			CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
			lost += rc == PCOR_ERR_PEER_LOST;
		}
		/* It took one message; most were still under way. */
		CHECK(lost > 0);
		/* New sends to it fail at once. */
		pcor_handle_t h;
		CHECK_RC(pcor_send_copy(1, 0, 10, mid, 8, &h),
			 PCOR_ERR_PEER_LOST);
		pcor_dma_free(big);
		free(mid);
	}
	if (me == 2) {
		/* Learns of the death like everyone. */
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(1, 0, 12, NULL, 0, NULL, &h));
		CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	}
	/* Its segment is let go of (by the dispatcher, soon after). */
	int64_t end = now_ns() + 30 * SEC;
	while (maps_segment_of(1) && now_ns() < end)
		sched_yield();
	CHECK(!maps_segment_of(1));
	/* And the port serves the living as before. */
	talk_0_2(13);
	talk_0_2(14);
	return 0;
}

/* ------------------------------------------------------------- spawn */

static void talk(int peer, int tag)
{
	static const size_t n[] = {1, 9000, 70000, 2 << 20};
	uint8_t *buf = xmalloc(2 << 20), *out = xmalloc(2 << 20);
	for (size_t i = 0; i < PCORI_ARRAY_LEN(n); i++) {
		pcor_handle_t s, r;
		pcor_msginfo_t info;
		CHECK_OK(pcor_recv_copy(peer, 0, tag, buf, n[i], &info, &r));
		th_fill(out, n[i], n[i] * 3 + (uint64_t)me);
		CHECK_OK(pcor_send_copy(peer, 0, tag, out, n[i], &s));
		CHECK_OK(pcor_handle_test(s, PCOR_BLOCK));
		CHECK_OK(pcor_handle_test(r, PCOR_BLOCK));
		CHECK(info.size == n[i]);
		CHECK_PATTERN(buf, n[i], n[i] * 3 + (uint64_t)peer);
	}
	free(buf);
	free(out);
}

static int run_spawn(const char *self)
{
	CHECK(np == 2);
	int newpid = -1;
	if (me == 0) {
		char *args[] = {(char *)self, "spawned", NULL};
		CHECK_OK(pcor_spawn(NULL, args, &newpid));
		CHECK(newpid == 2);
		/* Tell pid 1 who joined. */
		pcor_handle_t h;
		CHECK_OK(pcor_send_copy(1, 0, 20, &newpid, sizeof(newpid), &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	} else {
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(0, 0, 20, &newpid, sizeof(newpid), NULL,
					&h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		/* Pid 0's word can beat the directory's news: ask until known. */
		pcor_proc_info_t pi;
		int64_t end = now_ns() + 30 * SEC;
		while (pcor_proc_info(newpid, &pi) == PCOR_ERR_NOPEER &&
		       now_ns() < end)
			sched_yield();
		CHECK_OK(pcor_proc_info(newpid, &pi));
	}
	CHECK(through_shm(newpid));
	talk(newpid, 21);
	return 0;
}

static int run_spawned(void)
{
	CHECK(me == 2);
	for (int q = 0; q < 2; q++) {
		CHECK(through_shm(q));
		talk(q, 21);
	}
	return 0;
}

/* ------------------------------------------------------------- rogue */

/* Map pid's segment ourselves, as any local process could. */
static uint8_t *map_segment_of(int pid, size_t *size_p)
{
	pcori_member_t *m = xmalloc(sizeof(*m));
	CHECK_OK(pcori_dir_lookup(pid, m));
	pcori_shm_addr_t a;
	bool found = false;
	for (int i = 0; i < m->nports; i++)
		if (!strcmp(m->ports[i].provider, "pcor-shm")) {
			CHECK(m->ports[i].addrlen == sizeof(a));
			memcpy(&a, m->ports[i].addr, sizeof(a));
			found = true;
		}
	free(m);
	CHECK(found);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", a.ospid, a.fd);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	void *p = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(p != MAP_FAILED);
	*size_p = a.size;
	return p;
}

static void rogue_attack(void)
{
	size_t size;
	uint8_t *seg = map_segment_of(0, &size);
	pcori_shm_hdr_t *h = (pcori_shm_hdr_t *)(void *)seg;
	pcori_shm_geom_t g = {.nslots = h->nslots, .ring_size = h->ring_size,
			      .cell_size = h->cell_size, .ncells = h->ncells};
	CHECK(pcori_shm_layout(&g) == 0 && g.size == size);
	_Atomic uint64_t *owners = (_Atomic uint64_t *)(seg + g.off_owner);
	_Atomic uint64_t *heads = (_Atomic uint64_t *)(seg + g.off_head);
	int mine = -1, spare = -1, spare2 = -1;
	for (uint32_t i = 0; i < g.nslots; i++) {
		uint64_t o = atomic_load(&owners[i]);
		if (o == (uint64_t)me + 1)
			mine = (int)i;
		else if (o == 0 && spare < 0)
			spare = (int)i;
		else if (o == 0 && spare2 < 0)
			spare2 = (int)i;
	}
	CHECK(mine >= 0 && spare >= 0 && spare2 >= 0);
	/*
	 * Where pid 0 reads next in our ring: it has taken all we sent
	 * (its acks came), so that is the head it published.
	 */
	uint8_t *ring = seg + g.off_ring + (uint64_t)mine * g.ring_size;
	uint64_t t = atomic_load(&heads[mine]);
	uint64_t mask = g.ring_size - 1;
	uint64_t w;
	/* In a line's middle (after a one-slot record): a PAD first, below. */
	uint64_t pad_at = t;
	if (t % PCORI_SHM_LINE)
		t += PCORI_SHM_SLOT;
	/* 2 (read second): a record of an unknown kind: the ring is abandoned. */
	uint64_t t2 = t + pcori_shm_rec_size(100);
	w = pcori_shm_hdr_word(t2, 9, 8);
	memcpy(ring + (t2 & mask), &w, 8);
	/* 1: a well-framed record of garbage: the protocol drops it. */
	uint8_t *rec = ring + (t & mask);
	memset(rec + 8, 0x77, 100);
	w = pcori_shm_hdr_word(t, PCORI_SHM_REC_INLINE, 100);
	__atomic_store_n((uint64_t *)(void *)rec, w, __ATOMIC_SEQ_CST);
	if (pad_at != t) {
		w = pcori_shm_hdr_word(pad_at, PCORI_SHM_REC_PAD,
				       PCORI_SHM_SLOT);
		__atomic_store_n((uint64_t *)(void *)(ring + (pad_at & mask)),
				 w, __ATOMIC_SEQ_CST);
	}
	/* 3: a slot claimed in pid 1's name, announcing cells out of range. */
	CHECK(atomic_exchange(&owners[spare], 2) == 0);
	uint32_t hwm = atomic_load(&h->hwm);
	while (hwm < (uint32_t)spare + 1 &&
	       !atomic_compare_exchange_weak(&h->hwm, &hwm,
					     (uint32_t)spare + 1))
		;
	ring = seg + g.off_ring + (uint64_t)spare * g.ring_size;
	uint64_t run = (uint64_t)1 << 32 | 0xfffffff0u;
	memcpy(ring + 8, &run, 8);
	w = pcori_shm_hdr_word(0, PCORI_SHM_REC_CELLS, 5000);
	__atomic_store_n((uint64_t *)(void *)ring, w, __ATOMIC_SEQ_CST);
	/*
	 * 4: another slot in pid 1's name, with a fast record well framed
	 * but for a thread far out of range (its fields index pid 0's
	 * matching queues, so they must be checked before use).
	 */
	CHECK(atomic_exchange(&owners[spare2], 2) == 0);
	hwm = atomic_load(&h->hwm);
	while (hwm < (uint32_t)spare2 + 1 &&
	       !atomic_compare_exchange_weak(&h->hwm, &hwm,
					     (uint32_t)spare2 + 1))
		;
	ring = seg + g.off_ring + (uint64_t)spare2 * g.ring_size;
	const pcori_shm_fast_t bad = {.dst_thid = 0x40000000u,
				      .tag = 1,
				      .flags = PCORI_WF_FAST};
	memcpy(ring + 8, &bad, sizeof(bad));
	ring[8 + sizeof(bad)] = 'x';
	w = pcori_shm_hdr_word(0, PCORI_SHM_REC_FAST,
			       (uint32_t)sizeof(bad) + 1);
	__atomic_store_n((uint64_t *)(void *)ring, w, __ATOMIC_SEQ_CST);
	/* Wake pid 0 should it sleep, as a sender would. */
	atomic_fetch_add(&h->wake, 1);
	syscall(SYS_futex, &h->wake, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	munmap(seg, size);
}

static int run_rogue(void)
{
	CHECK(np == 3);
	for (int q = 0; q < np; q++)
		if (q != me)
			CHECK(through_shm(q));
	barrier(94); /* every pair has claimed its slots */
	pcori_port_t *port = route_of(me == 0 ? 1 : 0);
	/* A receive naming pid 2, whose messages after the garbage are lost. */
	pcor_handle_t from2 = 0;
	if (me == 0)
		CHECK_OK(pcor_recv_copy(2, 0, 36, NULL, 0, NULL, &from2));
	/*
	 * pid 0 has had every ack it needs from pid 2 once its barrier is
	 * over; only then may pid 2 spoil its ring to pid 0.  The word goes
	 * through pid 1, so pid 0 never waits on pid 2 again.
	 */
	if (me == 0 || me == 1) {
		pcor_handle_t h;
		if (me == 0)
			CHECK_OK(pcor_send_copy(1, 0, 33, NULL, 0, &h));
		else
			CHECK_OK(pcor_recv_copy(0, 0, 33, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		if (me == 1) {
			CHECK_OK(pcor_send_copy(2, 0, 33, NULL, 0, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		}
	}
	if (me == 2) {
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(1, 0, 33, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		rogue_attack();
		/* Then say so, through pcor-shm's other direction (to 1). */
		CHECK_OK(pcor_send_copy(1, 0, 30, NULL, 0, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		/*
		 * Write nothing more to pid 0 (our BYE at finalize would land
		 * on the garbage before pid 0 saw it) until it says, through
		 * pid 1, that it has.
		 */
		CHECK_OK(pcor_recv_copy(1, 0, 35, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	if (me == 1) {
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(2, 0, 30, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		/* Pass the word to pid 0 on our own ring. */
		CHECK_OK(pcor_send_copy(0, 0, 31, NULL, 0, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	if (me == 0) {
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(1, 0, 31, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		/* The garbage was seen (bounded wait: the scan is async). */
		int64_t end = now_ns() + 30 * SEC;
		while (atomic_load(&port->st.bad_hdr) < 4 && now_ns() < end)
			sched_yield();
		CHECK(atomic_load(&port->st.bad_hdr) >= 4);
		/*
		 * Its own ring broke: pid 2 is lost to us, and the receive
		 * naming it ends (the forged slots in pid 1's name cost pid 1
		 * nothing, below).  Bounded: it fails when the timers run.
		 */
		CHECK(pcor_handle_wait(from2, 30 * SEC) == PCOR_ERR_PEER_LOST);
		int rc = pcor_send_copy(2, 0, 37, NULL, 0, &h);
		if (rc == PCOR_OK)
			rc = pcor_handle_wait(h, 30 * SEC);
		CHECK(rc == PCOR_ERR_PEER_LOST);
		/* Still serving pid 1. */
		talk(1, 32);
		CHECK_OK(pcor_send_copy(1, 0, 34, NULL, 0, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	if (me == 1) {
		talk(0, 32);
		/* pid 0 has seen the garbage: pid 2 may leave. */
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(0, 0, 34, NULL, 0, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK_OK(pcor_send_copy(2, 0, 35, NULL, 0, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	return 0;
}

/* --------------------------------------------------- stopped reader */

/*
 * A reader declared lost while it still runs.  Process 0 posts a large
 * receive and is stopped (SIGSTOP, by process 1) before the offer of the
 * data reaches it; process 1's send ends PEER_LOST once the silence has
 * been timed, it rewrites the buffer and lets 0 run again.  0's single
 * copy read would now fetch memory its sender has let go of: the receive
 * must fail, never complete with the rewritten bytes.
 */
#define SR_LEN ((size_t)8 << 20)
#define SR_SENT 0xa5
#define SR_REUSED 0x5a

/* The state letter of a process in /proc, or 0 when it is gone. */
static char proc_state(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char *got = fgets(line, sizeof(line), f);
	fclose(f);
	char *rp = got ? strrchr(line, ')') : NULL;
	return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* Wait (bounded) until pid's state is one of want ("" also when gone). */
static bool proc_wait_state(pid_t pid, const char *want, int64_t limit_ns)
{
	int64_t end = now_ns() + limit_ns;
	for (;;) {
		char c = proc_state(pid);
		if ((c && strchr(want, c)) || (!c && !*want))
			return true;
		if (!c && strchr(want, 'Z'))
			return true; /* reaped already */
		if (now_ns() > end)
			return false;
		sched_yield();
	}
}

/*
 * Process 0's side: post a receive of len bytes from 1 on tag, tell 1 our
 * OS pid (tag + 1) and wait for the receive, stopped and resumed by 1 in
 * the meantime.  Returns how the receive ended; the bytes are in *buf_p.
 */
static int stopped_receive(size_t len, int tag, uint8_t **buf_p)
{
	uint8_t *buf = xmalloc(len);
	memset(buf, 0, len);
	pcor_handle_t hr, hs;
	CHECK_OK(pcor_recv_copy(1, 0, tag, buf, len, NULL, &hr));
	int32_t os = (int32_t)getpid();
	CHECK_OK(pcor_send_copy(1, 0, tag + 1, &os, sizeof(os), &hs));
	CHECK_OK(pcor_handle_test(hs, PCOR_BLOCK));
	*buf_p = buf;
	/* Stopped in here, and resumed fenced out. */
	return pcor_handle_test(hr, PCOR_BLOCK);
}

/* Process 1's side: stop process 0 once it has posted.  Its OS pid. */
static pid_t stop_receiver(int tag)
{
	int32_t os = 0;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(0, 0, tag + 1, &os, sizeof(os), NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(os > 0);
	CHECK(kill(os, SIGSTOP) == 0);
	CHECK(proc_wait_state(os, "Tt", 30 * SEC));
	return os;
}

static int run_stopread(void)
{
	CHECK(np == 2);
	CHECK(through_shm(1 - me));
	barrier(96);
	if (me == 0) {
		uint8_t *buf;
		int rc = stopped_receive(SR_LEN, 20, &buf);
		if (rc == PCOR_OK) {
			size_t reused = 0;
			for (size_t i = 0; i < SR_LEN; i++)
				reused += buf[i] == SR_REUSED;
			printf("stopread: completed, %zu bytes rewritten after "
			       "the loss\n", reused);
		}
		CHECK_RC(rc, PCOR_ERR_PEER_LOST);
		printf("stopread: receive ended with PEER_LOST\n");
		free(buf);
		return 0;
	}
	pid_t os = stop_receiver(20);
	pcor_handle_t h;
	uint8_t *buf = dma(SR_LEN);
	memset(buf, SR_SENT, SR_LEN);
	CHECK_OK(pcor_send_dma(0, 0, 20, buf, SR_LEN, 0, &h));
	/* Declared lost after its silence: the buffer is ours again. */
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	memset(buf, SR_REUSED, SR_LEN);
	CHECK(kill(os, SIGCONT) == 0);
	/* It reads our memory until it ends: keep the rewritten bytes. */
	CHECK(proc_wait_state(os, "Z", 120 * SEC));
	pcor_dma_free(buf);
	return 0;
}

/* ---------------------------------------------- stopped cell reader */

/*
 * The same through the sender's cell pool.  Process 0 posts a medium
 * receive and is stopped by process 1 before the message comes; 1 sends
 * it (copied into a run of its cells), waits until it has declared 0
 * lost, then cycles its whole pool twice through messages to process 2.
 * Resumed, 0 reads the run in place: its receive must end intact or
 * PEER_LOST, never with the bytes of 1's later messages.
 */
#define SC_LEN ((size_t)32 << 10) /* cells, not single copy */
#define SC_MSGS 128		  /* twice a 2 MiB pool */
#define SC_WINDOW 16

static int run_stopcells(void)
{
	CHECK(np == 3);
	CHECK(through_shm((me + 1) % 3) && through_shm((me + 2) % 3));
	barrier(97);
	if (me == 0) {
		uint8_t *buf;
		int rc = stopped_receive(SC_LEN, 40, &buf);
		/*
		 * A reused run holds 1's messages to 2: read as one to us, it
		 * would be dropped as someone else's or malformed, or held as
		 * out of its turn (its sequence number is 2's stream's).
		 */
		pcori_port_t *p = shm_port();
		uint64_t alien = atomic_load(&p->st.fwd) +
				 atomic_load(&p->st.fwd_drop) +
				 atomic_load(&p->st.bad_hdr) +
				 atomic_load(&p->st.held);
		printf("stopcells: %llu foreign records\n",
		       (unsigned long long)alien);
		CHECK(alien == 0);
		if (rc == PCOR_OK) {
			size_t bad = 0;
			for (size_t i = 0; i < SC_LEN; i++)
				bad += buf[i] != SR_SENT;
			printf("stopcells: completed, %zu bytes not as sent\n",
			       bad);
			CHECK(bad == 0);
		} else {
			CHECK_RC(rc, PCOR_ERR_PEER_LOST);
			printf("stopcells: receive ended with PEER_LOST\n");
		}
		free(buf);
		return 0;
	}
	uint8_t *buf = xmalloc(SC_LEN);
	pcor_handle_t h[SC_WINDOW];
	if (me == 2) {
		for (int i = 0; i < SC_MSGS; i++) {
			CHECK_OK(pcor_recv_copy(1, 0, 42, buf, SC_LEN, NULL,
						&h[0]));
			CHECK_OK(pcor_handle_test(h[0], PCOR_BLOCK));
			for (size_t k = 0; k < SC_LEN; k++)
				CHECK(buf[k] == SR_REUSED);
		}
		free(buf);
		return 0;
	}
	pid_t os = stop_receiver(40);
	memset(buf, SR_SENT, SC_LEN);
	CHECK_OK(pcor_send_copy(0, 0, 40, buf, SC_LEN, &h[0]));
	/* Complete in the channel, or failed by the loss: either is right. */
	int rc = pcor_handle_test(h[0], PCOR_BLOCK);
	CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
	/* Wait until 0 is declared lost here. */
	CHECK_OK(pcor_recv_copy(0, 0, 43, NULL, 0, NULL, &h[0]));
	CHECK_RC(pcor_handle_test(h[0], PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	memset(buf, SR_REUSED, SC_LEN);
	for (int i = 0; i < SC_MSGS; i++) {
		if (i >= SC_WINDOW)
			CHECK_OK(pcor_handle_test(h[i % SC_WINDOW], PCOR_BLOCK));
		CHECK_OK(pcor_send_copy(2, 0, 42, buf, SC_LEN,
					&h[i % SC_WINDOW]));
	}
	for (int i = 0; i < SC_WINDOW; i++)
		CHECK_OK(pcor_handle_test(h[i], PCOR_BLOCK));
	CHECK(kill(os, SIGCONT) == 0);
	/* Its cells stay ours until it ends: wait for that. */
	CHECK(proc_wait_state(os, "Z", 120 * SEC));
	free(buf);
	return 0;
}

/* ------------------------------------------------ a dead peer's last words */

/*
 * What a process put in the channel before it died is delivered: pcor-shm
 * keeps it in the receiver's ring (small records) or the sender's cells,
 * which the receiver still maps.  Process 0 is stopped while process 1
 * sends and dies, and resumed by process 2 only once the death is known,
 * so the records are read after it (by whichever of the dispatcher or the
 * membership hook comes first).
 */
#define LW_FAST 100
#define LW_CELLS 6
#define LW_CELL_LEN 4096
#define LW_TAG 60

static size_t lw_len(int i)
{
	return i < LW_FAST ? 8 + (size_t)(i % 57) : LW_CELL_LEN;
}

static uint8_t lw_byte(int i, size_t k)
{
	return (uint8_t)(i * 31 + (int)k * 7 + 1);
}

static int run_lastwords(void)
{
	CHECK(np == 3);
	for (int q = 0; q < np; q++)
		if (q != me)
			CHECK(through_shm(q));
	if (me != 1)
		th_watch_failure(1);
	barrier(98);
	int32_t os = (int32_t)getpid();
	pcor_handle_t h;
	if (me == 0) {
		/*
		 * Our OS pid to 2, which resumes us, then to 1, which stops
		 * us: in that order, or 1 could stop us before 2 has it.
		 */
		for (int q = 2; q >= 1; q--) {
			CHECK_OK(pcor_send_copy(q, 0, LW_TAG + q, &os,
						sizeof(os), &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		}
		th_await_failure(60);
		uint8_t *buf = xmalloc(LW_CELL_LEN);
		for (int i = 0; i < LW_FAST + LW_CELLS; i++) {
			pcor_msginfo_t mi;
			memset(buf, 0, LW_CELL_LEN);
			CHECK_OK(pcor_recv_copy(1, 0, LW_TAG, buf, LW_CELL_LEN,
						&mi, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(mi.size == lw_len(i));
			for (size_t k = 0; k < mi.size; k++)
				CHECK(buf[k] == lw_byte(i, k));
		}
		/* Nothing more comes from it: the next receive fails. */
		CHECK_OK(pcor_recv_copy(1, 0, LW_TAG, buf, LW_CELL_LEN, NULL,
					&h));
		CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
		free(buf);
		printf("lastwords: %d messages after the death\n",
		       LW_FAST + LW_CELLS);
		return 0;
	}
	int32_t os0 = 0;
	CHECK_OK(pcor_recv_copy(0, 0, LW_TAG + me, &os0, sizeof(os0), NULL,
				&h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(os0 > 0);
	if (me == 2) {
		/* 1's word that it sent all, then its death: resume 0. */
		uint8_t done;
		CHECK_OK(pcor_recv_copy(1, 0, LW_TAG, &done, 1, NULL, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		th_await_failure(60);
		CHECK(kill(os0, SIGCONT) == 0);
		return 0;
	}
	CHECK(kill(os0, SIGSTOP) == 0);
	CHECK(proc_wait_state(os0, "Tt", 30 * SEC));
	uint8_t *buf = xmalloc(LW_CELL_LEN);
	for (int i = 0; i < LW_FAST + LW_CELLS; i++) {
		size_t n = lw_len(i);
		for (size_t k = 0; k < n; k++)
			buf[k] = lw_byte(i, k);
		/* In the channel is complete: 0 reads nothing meanwhile. */
		CHECK_OK(pcor_send_copy(0, 0, LW_TAG, buf, n, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	uint8_t done = 1;
	CHECK_OK(pcor_send_copy(2, 0, LW_TAG, &done, 1, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	free(buf);
	kill(getpid(), SIGKILL);
	CHECK(!"still alive after SIGKILL");
	return 1;
}

/* ------------------------------------------- while nobody drives */

#define ID_ROUNDS 200
#define ID_TAG 70 /* +0 go, +1 first, +2 seen, +3 second */

static uint64_t id_word(int round, int which)
{
	return (uint64_t)round << 8 | (uint64_t)which;
}

/*
 * Is h complete?  Read from the request itself, which drives nothing:
 * what completes it must be some other thread.
 */
static bool id_done(pcor_handle_t h)
{
	uint32_t gen;
	pcori_req_t *r = pcori_req_lookup(h, &gen);
	CHECK(r);
	return atomic_load_explicit(&r->state, memory_order_acquire) ==
	       PCORI_REQ_DONE;
}

static int run_idle(void)
{
	CHECK(np == 2);
	CHECK(through_shm(1 - me));
	barrier(ID_TAG + 4);
	for (int i = 0; i < ID_ROUNDS; i++) {
		uint64_t a = 0, b = 0, go = (uint64_t)i, seen = 0;
		pcor_handle_t ha, hb, hg, hs;
		if (me == 1) {
			CHECK_OK(pcor_recv_copy(0, 0, ID_TAG, &go, sizeof(go),
						NULL, &hg));
			CHECK_OK(pcor_handle_test(hg, PCOR_BLOCK));
			CHECK(go == (uint64_t)i);
			a = id_word(i, 1);
			CHECK_OK(pcor_send_copy(0, 0, ID_TAG + 1, &a, sizeof(a),
						&ha));
			CHECK_OK(pcor_handle_test(ha, PCOR_BLOCK));
			/* The second goes once 0's waiter has left. */
			CHECK_OK(pcor_recv_copy(0, 0, ID_TAG + 2, &seen,
						sizeof(seen), NULL, &hs));
			CHECK_OK(pcor_handle_test(hs, PCOR_BLOCK));
			CHECK(seen == id_word(i, 2));
			b = id_word(i, 3);
			CHECK_OK(pcor_send_copy(0, 0, ID_TAG + 3, &b, sizeof(b),
						&hb));
			CHECK_OK(pcor_handle_test(hb, PCOR_BLOCK));
			continue;
		}
		CHECK_OK(pcor_recv_copy(1, 0, ID_TAG + 3, &b, sizeof(b), NULL,
					&hb));
		CHECK_OK(pcor_recv_copy(1, 0, ID_TAG + 1, &a, sizeof(a), NULL,
					&ha));
		CHECK_OK(pcor_send_copy(1, 0, ID_TAG, &go, sizeof(go), &hg));
		CHECK_OK(pcor_handle_test(hg, PCOR_BLOCK));
		CHECK_OK(pcor_handle_test(ha, PCOR_BLOCK));
		CHECK(a == id_word(i, 1));
		seen = id_word(i, 2);
		CHECK_OK(pcor_send_copy(1, 0, ID_TAG + 2, &seen, sizeof(seen),
					&hs));
		/* No call into pcor until the second is in. */
		int64_t end = now_ns() + 30 * SEC;
		while (!id_done(hb) && now_ns() < end)
			sched_yield();
		CHECK(id_done(hb));
		CHECK_OK(pcor_handle_test(hs, PCOR_BLOCK));
		CHECK_OK(pcor_handle_test(hb, PCOR_BLOCK));
		CHECK(b == id_word(i, 3));
	}
	barrier(ID_TAG + 5);
	return 0;
}

/*
 * Records of a slot and of lines mixed in one stream, each round opened
 * by a message without data that a waiter takes in place (a one-slot
 * record: the next one shares its line) and closed by an answer, so the
 * opener is a lone send: order and bytes of every message.
 */
#define SL_ROUNDS 300
#define SL_TAG 80 /* +0 opener, +1 burst, +2 answer */
static const size_t sl_sizes[] = {1, 0, 8, 9, 16, 33, 100, 5000, 20000, 2,
				  0, 1};

static int run_slots(void)
{
	CHECK(np == 2);
	CHECK(through_shm(1 - me));
	enum { N = PCORI_ARRAY_LEN(sl_sizes) };
	uint8_t *buf[N];
	for (size_t k = 0; k < N; k++)
		buf[k] = xmalloc(sl_sizes[k] + 1);
	barrier(SL_TAG + 3);
	for (int i = 0; i < SL_ROUNDS; i++) {
		pcor_handle_t h[N], o;
		if (me == 0) {
			CHECK_OK(pcor_send_copy(1, 0, SL_TAG, NULL, 0, &o));
			for (size_t k = 0; k < N; k++) {
				th_fill(buf[k], sl_sizes[k], (uint64_t)i * N + k);
				CHECK_OK(pcor_send_copy(1, 0, SL_TAG + 1, buf[k],
							sl_sizes[k], &h[k]));
			}
			CHECK_OK(pcor_handle_test(o, PCOR_BLOCK));
			for (size_t k = 0; k < N; k++)
				CHECK_OK(pcor_handle_test(h[k], PCOR_BLOCK));
			CHECK_OK(pcor_recv_copy(1, 0, SL_TAG + 2, NULL, 0, NULL,
						&o));
			CHECK_OK(pcor_handle_test(o, PCOR_BLOCK));
			continue;
		}
		CHECK_OK(pcor_recv_copy(0, 0, SL_TAG, NULL, 0, NULL, &o));
		CHECK_OK(pcor_handle_test(o, PCOR_BLOCK));
		for (size_t k = 0; k < N; k++) {
			pcor_msginfo_t info;
			memset(buf[k], 0, sl_sizes[k] + 1);
			CHECK_OK(pcor_recv_copy(0, 0, SL_TAG + 1, buf[k],
						sl_sizes[k] + 1, &info, &h[k]));
			CHECK_OK(pcor_handle_test(h[k], PCOR_BLOCK));
			CHECK(info.size == sl_sizes[k]);
			CHECK_PATTERN(buf[k], sl_sizes[k], (uint64_t)i * N + k);
		}
		CHECK_OK(pcor_send_copy(0, 0, SL_TAG + 2, NULL, 0, &o));
		CHECK_OK(pcor_handle_test(o, PCOR_BLOCK));
	}
	barrier(SL_TAG + 4);
	for (size_t k = 0; k < N; k++)
		free(buf[k]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: shm_app CASE [ARGS]\n");
		return 2;
	}
	const char *c = argv[1];
	CHECK_OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	np = pcor_nprocs();
	printf("ospid %d\n", (int)getpid());
	fflush(stdout);
	int rc;
	if (!strcmp(c, "sizes") && argc >= 3)
		rc = run_sizes((size_t)strtoull(argv[2], NULL, 0),
			       argc >= 4 && !strcmp(argv[3], "nocma"));
	else if (!strcmp(c, "alltoall") && argc >= 3)
		rc = run_alltoall(atoi(argv[2]));
	else if (!strcmp(c, "flood") && argc >= 3)
		rc = run_flood(atoi(argv[2]));
	else if (!strcmp(c, "kill"))
		rc = run_kill();
	else if (!strcmp(c, "spawn"))
		rc = run_spawn(argv[0]);
	else if (!strcmp(c, "spawned"))
		rc = run_spawned();
	else if (!strcmp(c, "rogue"))
		rc = run_rogue();
	else if (!strcmp(c, "stopread"))
		rc = run_stopread();
	else if (!strcmp(c, "stopcells"))
		rc = run_stopcells();
	else if (!strcmp(c, "lastwords"))
		rc = run_lastwords();
	else if (!strcmp(c, "idle"))
		rc = run_idle();
	else if (!strcmp(c, "slots"))
		rc = run_slots();
	else
		SKIP("unknown case %s", c);
	CHECK_OK(pcor_finalize());
	if (rc == 0)
		printf("%s: ok\n", c);
	return rc;
}
