/*
 * idle_app -- poll mode with a port nobody uses, run by pcorrun with
 * PCOR_PROVIDERS=pcor-shm,net and PCOR_DISPATCH=poll.
 *
 *   idle_app idle      pid 0 <-> pid 1 ping-pong over pcor-shm for at
 *                      least half a second, each answer checked; the net
 *                      port's dispatcher meanwhile stays asleep in its
 *                      fabric (under 2 % of a CPU) rather than spinning
 *                      beside the waiters
 *
 * Each process prints "idle: ok" when every check held.
 */
#include "common.h"
#include "dispatch/dispatch.h"

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
	CHECK_OK(pcor_send_copy(pid, 0, TAG_PING, &v, sizeof(v), &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static uint64_t recv_u64(int pid)
{
	uint64_t v = 0;
	pcor_msginfo_t info = {0};
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(pid, 0, TAG_PING, &v, sizeof(v), &info, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(info.size == sizeof(v) && info.pid == pid);
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
	clockid_t cpu;
	CHECK(pthread_getcpuclockid(idle->rx_thread, &cpu) == 0);

	uint64_t t0 = 0, c0 = 0;
	uint32_t i = 0;
	for (bool last = false; !last; i++) {
		if (i == WARMUP) {
			t0 = th_now_ns();
			c0 = cpu_ns(cpu);
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
	printf("idle: %s's dispatcher used %.1f %% of a CPU over %u round "
	       "trips in %.0f ms\n",
	       idle->info.provider, 100.0 * share, i - WARMUP,
	       (double)wall / 1e6);
	CHECK(share < IDLE_SHARE_MAX);
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "idle")) {
		fprintf(stderr, "usage: idle_app idle\n");
		return 2;
	}
	CHECK_OK(pcor_init(&argc, &argv));
	int me = pcor_self_pid();
	CHECK(pcor_nprocs() == 2);
	run_idle(me);
	CHECK_OK(pcor_finalize());
	printf("idle: ok\n");
	return 0;
}
