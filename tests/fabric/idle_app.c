/*
 * idle_app -- poll mode with a port nobody uses, run by pcorrun with
 * PCOR_PROVIDERS=pcor-shm,net and PCOR_DISPATCH=poll.
 *
 *   idle_app idle      pid 0 <-> pid 1 ping-pong over pcor-shm for at
 *                      least half a second, each answer checked; the net
 *                      port's dispatcher meanwhile stays asleep in its
 *                      fabric (under 2 % of a CPU) rather than spinning
 *                      beside the waiters, and pcor-shm's parked (as
 *                      little) while the waiters drive that port
 *   idle_app idle-high the same from a pcor thread whose id has no byte
 *                      of its own in the ports' drive_slot (16 threads
 *                      hold ids 1-16 meanwhile): it drives through the
 *                      ports' locked count, which keeps the dispatcher
 *                      as quiet
 *
 * Each process prints "CASE: ok" when every check held.
 */
#include "common.h"
#include "dispatch/dispatch.h"

#include <pthread.h>
#include <time.h>

#define TAG_PING 1
#define WARMUP 100         /* round trips before the window opens */
#define ROUNDS_MIN 2000    /* the window holds at least this many, */
#define WINDOW_NS 500000000ull /* and lasts this long, */
#define ROUNDS_MAX 20000000u   /* unless it reaches this many */
/*
 * One asleep wakes at most every 100 ms and spins PCOR_DISPATCH_SPIN_NS
 * (0.2 ms) before it sleeps again: 0.2 % of a CPU at most.  One that
 * spins beside two waiters on two cores took 3 to 38 % (a whole CPU on a
 * larger machine).
 */
#define IDLE_SHARE_MAX 0.02

static const char *case_name;
static int ping_thid; /* the ping-ponging thread's id, in both processes */

/* CPU time of a thread, through its clock. */
static uint64_t cpu_ns(clockid_t c)
{
	struct timespec ts;
	CHECK(clock_gettime(c, &ts) == 0);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void send_u64(int pid, uint64_t v)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(pid, ping_thid, TAG_PING, &v, sizeof(v), &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static uint64_t recv_u64(int pid)
{
	uint64_t v = 0;
	pcor_msginfo_t info = {0};
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(pid, ping_thid, TAG_PING, &v, sizeof(v), &info, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.size == sizeof(v) && info.pid == pid &&
	      info.thid == ping_thid);
	return v;
}

/* Round trip i's word: its number, and the bit that says it is the last. */
static uint64_t word(uint32_t i, bool last)
{
	return ((uint64_t)i << 1 | last) ^ 0x5a5a000000000000ull;
}

static void run_idle(int me)
{
	int peer = 1 - me;
	CHECK(pcori_net.nports == 2);
	pcori_peer_t *pp = pcori_peer_get(peer);
	CHECK(pp && pcori_peer_ready(pp) == PCOR_OK);
	pcori_port_t *shm = pcori_peer_route(pp)->port;
	CHECK(!strcmp(shm->info.provider, "pcor-shm"));
	pcori_port_t *idle = pcori_net.ports[shm->index == 0 ? 1 : 0];
	CHECK(idle->rx_started);
	clockid_t cpu, shm_cpu;
	CHECK(pthread_getcpuclockid(idle->rx_thread, &cpu) == 0);
	CHECK(shm->rx_started);
	CHECK(pthread_getcpuclockid(shm->rx_thread, &shm_cpu) == 0);

	uint64_t t0 = 0, c0 = 0, s0 = 0;
	uint32_t i = 0;
	for (bool last = false; !last; i++) {
		if (i == WARMUP) {
			t0 = th_now_ns();
			c0 = cpu_ns(cpu);
			s0 = cpu_ns(shm_cpu);
		}
		if (me == 0) {
			/* pid 0 says when the window is over. */
			last = i >= ROUNDS_MAX ||
			       (i >= WARMUP + ROUNDS_MIN &&
				th_now_ns() - t0 >= WINDOW_NS);
			send_u64(peer, word(i, last));
			CHECK(recv_u64(peer) == word(i, last));
		} else {
			uint64_t v = recv_u64(peer);
			last = v == word(i, true);
			CHECK(last || v == word(i, false));
			send_u64(peer, v);
		}
	}
	uint64_t wall = th_now_ns() - t0;
	double share = (double)(cpu_ns(cpu) - c0) / (double)wall;
	double shm_share = (double)(cpu_ns(shm_cpu) - s0) / (double)wall;
	printf("%s: %s's dispatcher used %.1f %% of a CPU, %s's %.1f %%, "
	       "over %u round trips in %.0f ms (thread %d)\n",
	       case_name, idle->info.provider, 100.0 * share,
	       shm->info.provider, 100.0 * shm_share, i - WARMUP,
	       (double)wall / 1e6, ping_thid);
	CHECK(share < IDLE_SHARE_MAX);
	CHECK(shm_share < IDLE_SHARE_MAX);
}

/* The threads that hold ids 1-16 wait here, on no pcor call. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool hold_over;

static void *hold_id(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&hold_mu);
	while (!hold_over)
		pthread_cond_wait(&hold_cv, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
	return NULL;
}

static void *ping_high(void *arg)
{
	ping_thid = pcor_self_thid();
	CHECK(ping_thid >= PCORI_DRIVE_SLOTS);
	run_idle(*(int *)arg);
	return NULL;
}

/* run_idle from a thread whose id is past the ports' bytes. */
static void run_idle_high(int me)
{
	int held[PCORI_DRIVE_SLOTS];
	for (int i = 0; i < PCORI_DRIVE_SLOTS; i++)
		CHECK_OK(pcor_thread_create(hold_id, NULL, &held[i]));
	/* Ids are taken lowest first: both processes get the same one. */
	int thid;
	CHECK_OK(pcor_thread_create(ping_high, &me, &thid));
	CHECK_OK(pcor_thread_join(thid, NULL));
	CHECK(ping_thid == thid);
	pthread_mutex_lock(&hold_mu);
	hold_over = true;
	pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_mu);
	for (int i = 0; i < PCORI_DRIVE_SLOTS; i++)
		CHECK_OK(pcor_thread_join(held[i], NULL));
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "idle") &&
			 strcmp(argv[1], "idle-high"))) {
		fprintf(stderr, "usage: idle_app idle|idle-high\n");
		return 2;
	}
	case_name = argv[1];
	CHECK_OK(pcor_init(&argc, &argv));
	int me = pcor_self_pid();
	CHECK(pcor_nprocs() == 2);
	if (!strcmp(case_name, "idle"))
		run_idle(me);
	else
		run_idle_high(me);
	CHECK_OK(pcor_finalize());
	printf("%s: ok\n", case_name);
	return 0;
}
