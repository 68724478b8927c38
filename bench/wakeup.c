/*
 * wakeup.c -- what it costs to wake a receiver that sleeps in testHandle.
 *
 * The process runs with PCOR_SPIN_NS=0, so a blocking testHandle sleeps on
 * its request's futex at once.  Measured side by side, per repetition:
 *
 *   rtt  bare-spin-shared   spin ping-pong on one shared line
 *   rtt  bare-spin-line     spin ping-pong, one line per direction
 *   rtt  bare-futex         futex wait/wake ping-pong
 *   rtt  copy               pcor 8 B sendCopy/recvCopy ping-pong, both
 *                           sides blocking: every message wakes a sleeper
 *   wake bare-futex, copy   one-way latency of waking a receiver asleep on
 *                           an idle CPU: the waker waits until the receiver
 *                           sleeps (its state in /proc), stamps the time and
 *                           sends; the receiver stamps when it runs again
 *   call bare-futex, copy   time the waker spends in its calls (store and
 *                           FUTEX_WAKE; sendCopy)
 *
 * For reference, the pCoR paper measured 35 us per wake-up.
 */
#include "harness.h"

#define BENCH_NAME "wakeup"
#include "check.h"

#include <pcor/pcor.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TAG 9
#define MSG 8

typedef struct pair {
	long total; /* iterations, warm-up included */
	int thid[2];
	bh_clock_t clk; /* ping-pong: set up before; A times with a copy */
	pthread_barrier_t start;
	uint64_t *t_sent, *t_woken, *t_call; /* wake test */
	/* Written while running: each on its own line. */
	_Alignas(BH_CACHELINE) _Atomic int tid_b;   /* receiver's kernel id */
	_Alignas(BH_CACHELINE) _Atomic long posted; /* receives posted */
	_Alignas(BH_CACHELINE) double ns; /* ping-pong: per round trip */
} pair_t;

typedef struct side {
	pair_t *p;
	int who;
	bool wake_test;
} side_t;

/* Blocking 8 B ping-pong; every receive is posted before its message. */
static void pingpong(pair_t *p, int who)
{
	char sbuf[MSG], rbuf[MSG];
	const int peer = p->thid[1 - who];
	memset(sbuf, who, sizeof(sbuf));
	/* The shared pair is read once, not inside the timed loop. */
	double ns = copy_pingpong(who, peer, TAG, sbuf, rbuf, MSG, p->total,
				  p->clk);
	if (who == 0)
		p->ns = ns;
}

/* One-way wake-ups of a receiver that is surely asleep. */
static void wake_test(pair_t *p, int who)
{
	char buf[MSG] = {0};
	const int pid = pcor_self_pid(), peer = p->thid[1 - who];
	const long total = p->total;
	if (who == 1) {
		atomic_store(&p->tid_b, bh_gettid());
		for (long i = 0; i < total; i++) {
			int r = hcheck(recvCopy(pid, peer, TAG, buf, MSG, NULL,
						NULL, NULL, NULL),
				       "recvCopy");
			atomic_store_explicit(&p->posted, i + 1,
					      memory_order_release);
			wait_ok(r, "recvCopy completion");
			p->t_woken[i] = bh_now_ns();
		}
		return;
	}
	int tid;
	while ((tid = atomic_load(&p->tid_b)) == 0)
		sched_yield();
	for (long i = 0; i < total; i++) {
		while (atomic_load_explicit(&p->posted, memory_order_acquire) <
		       i + 1)
			sched_yield();
		while (!bh_thread_sleeping(tid))
			sched_yield();
		uint64_t t0 = bh_now_ns();
		int h = sendCopy(pid, peer, TAG, buf, MSG);
		uint64_t t1 = bh_now_ns();
		wait_ok(hcheck(h, "sendCopy"), "sendCopy completion");
		p->t_sent[i] = t0;
		p->t_call[i] = t1 - t0;
	}
}

static void *side_main(void *arg)
{
	side_t *s = arg;
	bh_pin_self(s->who);
	pthread_barrier_wait(&s->p->start);
	if (s->wake_test)
		wake_test(s->p, s->who);
	else
		pingpong(s->p, s->who);
	return NULL;
}

static void run_pcor(pair_t *p, bool wake)
{
	side_t sd[2] = {{p, 0, wake}, {p, 1, wake}};
	pthread_barrier_init(&p->start, NULL, 3);
	for (int i = 0; i < 2; i++) {
		int rc = pcor_thread_create(side_main, &sd[i], &p->thid[i]);
		if (rc)
			die("pcor_thread_create", rc);
	}
	pthread_barrier_wait(&p->start);
	for (int i = 0; i < 2; i++)
		pcor_thread_join(p->thid[i], NULL);
	pthread_barrier_destroy(&p->start);
}

static double pcor_rtt(long iters, long warmup)
{
	pair_t p = {0};
	p.total = warmup + bh_clock_init(&p.clk, iters, warmup);
	run_pcor(&p, false);
	return p.ns;
}

static double pcor_wake(long iters, double *call_p)
{
	pair_t p = {.total = iters};
	p.t_sent = calloc((size_t)iters, sizeof(uint64_t));
	p.t_woken = calloc((size_t)iters, sizeof(uint64_t));
	p.t_call = calloc((size_t)iters, sizeof(uint64_t));
	double *lat = calloc((size_t)iters, sizeof(double));
	if (!p.t_sent || !p.t_woken || !p.t_call || !lat)
		die("calloc", PCOR_ERR_NOMEM);
	run_pcor(&p, true);
	for (long i = 0; i < iters; i++)
		lat[i] = (double)p.t_call[i];
	*call_p = bh_median(lat, (int)iters);
	for (long i = 0; i < iters; i++)
		lat[i] = (double)(p.t_woken[i] - p.t_sent[i]);
	double med = bh_median(lat, (int)iters);
	free(lat);
	free(p.t_sent);
	free(p.t_woken);
	free(p.t_call);
	return med;
}

int main(int argc, char **argv)
{
	bh_opts_t o = {.bench = "wakeup",
		       .iters = 20000,
		       .warmup = 1000,
		       .min_iters = 1,
		       .reps = 5};
	const char *wakes = "2000";
	bh_extra_t ex[] = {
	    {"wakes", "N", "one-way wake-ups per repetition", &wakes},
	};
	bh_parse(argc, argv, &o, ex, (int)(sizeof(ex) / sizeof(ex[0])),
		 "Cost of waking a pcor receiver blocked in testHandle, next "
		 "to bare futex and\nspin ping-pongs measured in the same "
		 "run.");
	long nwake = atol(wakes);
	if (nwake < 1) {
		fprintf(stderr, "wakeup: --wakes must be >= 1\n");
		return 2;
	}
	/* A blocking wait sleeps at once: every message is a wake-up. */
	setenv("PCOR_SPIN_NS", "0", 1);
	int rc = pcor_init(&argc, &argv);
	if (rc)
		die("pcor_init", rc);
	bh_csv_begin(&o);

	enum { SH, LN, FX, PP, FW, PW, FC, PC, N };
	const int R = o.reps;
	double *v[N];
	for (int k = 0; k < N; k++)
		if (!(v[k] = calloc((size_t)R, sizeof(double))))
			die("calloc", PCOR_ERR_NOMEM);
	for (int r = 0; r < R; r++) {
		v[SH][r] =
		    bh_bare_spin_rtt(BH_SPIN_SHARED, o.iters * 10, o.warmup);
		v[LN][r] =
		    bh_bare_spin_rtt(BH_SPIN_LINE, o.iters * 10, o.warmup);
		v[FX][r] = bh_bare_futex_rtt(o.iters, o.warmup);
		v[PP][r] = pcor_rtt(o.iters, o.warmup);
		v[FW][r] = bh_bare_futex_wake(nwake, &v[FC][r]);
		v[PW][r] = pcor_wake(nwake, &v[PC][r]);
	}
	double tmp[BH_MAX_LIST * 16];
	/* Ratios first: bh_csv_row reorders its input. */
	bh_ratio_row(&o, "rtt8-copy/bare-futex", "block", MSG, 2, v[PP], v[FX],
		     R, "ns", 1.3, true,
		     "pcor blocking 8 B RTT / bare futex RTT");
	bh_ratio_row(&o, "wake-copy/bare-futex", "block", MSG, 2, v[PW], v[FW],
		     R, "ns", 0, true,
		     "pcor one-way wake-up / bare futex wake-up");
	struct {
		int k;
		const char *metric, *variant, *wait;
		size_t size;
		long iters;
	} rows[] = {
	    {SH, "rtt", "bare-spin-shared", "spin", 0, o.iters * 10},
	    {LN, "rtt", "bare-spin-line", "spin", 0, o.iters * 10},
	    {FX, "rtt", "bare-futex", "block", 0, o.iters},
	    {PP, "rtt", "copy", "block", MSG, o.iters},
	    {FW, "wake", "bare-futex", "block", 0, nwake},
	    {PW, "wake", "copy", "block", MSG, nwake},
	    {FC, "call", "bare-futex", "block", 0, nwake},
	    {PC, "call", "copy", "block", MSG, nwake},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		memcpy(tmp, v[rows[i].k], sizeof(double) * (size_t)R);
		bh_csv_row(&o, rows[i].metric, rows[i].variant, rows[i].wait,
			   rows[i].size, 2, rows[i].iters, tmp, R, "ns", "");
	}
	for (int k = 0; k < N; k++)
		free(v[k]);
	bh_csv_end(&o);
	rc = pcor_finalize();
	if (rc)
		die("pcor_finalize", rc);
	return 0;
}
