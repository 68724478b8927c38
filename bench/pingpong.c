/*
 * pingpong.c -- same-process round trip between two pcor threads pinned to
 * CPUs 0 and 1: RTT and ping-pong bandwidth (size / one-way time), next to
 * the bare baselines measured in the same process and repetition.
 *
 * Variants
 *   copy          sendCopy / recvCopy.
 *   dma           sendDMA / recvDMA as in the paper: no hand-over, so the
 *                 sender keeps its buffer and the receiver gets a fresh DMA
 *                 block holding one copy, which it frees.
 *   dma-handover  pcor_send_dma(PCOR_SEND_HANDOVER) / recvDMA: the buffer
 *                 itself travels; no byte moves, and each side sends back
 *                 the block it just received.
 *
 * Wait modes (one child process each, since the spin window is a knob read
 * at pcor_init):
 *   spin   PCOR_SPIN_NS = --spin-ns (1 s): testHandle(PCOR_BLOCK) spins.
 *   block  PCOR_SPIN_NS = 0: testHandle(PCOR_BLOCK) sleeps on the futex.
 *
 * Every receive is posted before the message it takes is sent (each side
 * posts its next receive before it sends), so this measures pcor's direct
 * path: the sender copies straight into the receiver's buffer.  No report
 * pointers are passed: the receiver knows what it expects.
 */
#include "harness.h"

#define BENCH_NAME "pingpong"
#include "check.h"

#include <pcor/pcor.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { V_COPY, V_DMA, V_HANDOVER, NVARIANT };
static const char *const vnames[NVARIANT] = {"copy", "dma", "dma-handover"};

#define TAG   7
#define PAT_A 0xa5
#define PAT_B 0x5b

/* One measured point: the pair's shared description. */
typedef struct point {
	int variant;
	size_t size;
	long total;  /* iterations, warm-up included */
	int thid[2]; /* A (CPU 0), B (CPU 1) */
	pthread_barrier_t start;
	bh_clock_t clk; /* A's */
	double ns;	/* per round trip */
} point_t;

typedef struct side {
	point_t *pt;
	int who;
} side_t;

static void check_bytes(const void *buf, size_t size, int pat)
{
	const unsigned char *b = buf;
	if (size && (b[0] != pat || b[size - 1] != pat)) {
		fprintf(stderr, "pingpong: payload corrupted\n");
		exit(1);
	}
}

static void *xalloc(size_t size)
{
	void *p = aligned_alloc(BH_CACHELINE, (size + 63) & ~(size_t)63);
	if (!p) {
		fprintf(stderr, "pingpong: out of memory\n");
		exit(1);
	}
	return p;
}

static void *dalloc(size_t size)
{
	void *p;
	int rc = pcor_dma_alloc(size, &p);
	if (rc)
		die("pcor_dma_alloc", rc);
	return p;
}

static void run_copy(point_t *pt, int who)
{
	const int me = who, len = (int)pt->size;
	int peer;
	char *sbuf = xalloc(pt->size), *rbuf = xalloc(pt->size);
	memset(sbuf, who ? PAT_B : PAT_A, pt->size);
	memset(rbuf, 0, pt->size);
	pthread_barrier_wait(&pt->start);
	/* Only now are both ids written (pcor_thread_create returned). */
	peer = pt->thid[1 - who];
	/* The shared point is read once, not inside the timed loop. */
	double ns = copy_pingpong(me, peer, TAG, sbuf, rbuf, len, pt->total,
				  pt->clk);
	if (me == 0)
		pt->ns = ns;
	check_bytes(rbuf, pt->size, who ? PAT_A : PAT_B);
	free(sbuf);
	free(rbuf);
}

static void run_dma(point_t *pt, int who)
{
	const int me = who, pid = pcor_self_pid();
	int peer;
	const int len = (int)pt->size;
	char *sbuf = dalloc(pt->size);
	void *in = NULL;
	memset(sbuf, who ? PAT_B : PAT_A, pt->size);
	pthread_barrier_wait(&pt->start);
	/* Only now are both ids written (pcor_thread_create returned). */
	peer = pt->thid[1 - who];
	/* Copies: the shared point is not read inside the timed loop. */
	const long total = pt->total;
	bh_clock_t clk = pt->clk;
	int r = 0;
	if (me == 1)
		r = hcheck(recvDMA(pid, peer, TAG, &in, NULL, NULL, NULL, NULL),
			   "recvDMA");
	for (long i = 0; i < total; i++) {
		const bool last = i + 1 == total;
		if (me == 0) {
			bh_clock_tick(&clk);
			r = hcheck(recvDMA(pid, peer, TAG, &in, NULL, NULL,
					   NULL, NULL),
				   "recvDMA");
			wait_ok(hcheck(sendDMA(pid, peer, TAG, sbuf, len),
				       "sendDMA"),
				"sendDMA completion");
			wait_ok(r, "recvDMA completion");
		} else {
			wait_ok(r, "recvDMA completion");
		}
		if (last)
			check_bytes(in, pt->size, who ? PAT_A : PAT_B);
		pcor_dma_free(in);
		if (me == 1) {
			if (!last)
				r = hcheck(recvDMA(pid, peer, TAG, &in, NULL,
						   NULL, NULL, NULL),
					   "recvDMA");
			wait_ok(hcheck(sendDMA(pid, peer, TAG, sbuf, len),
				       "sendDMA"),
				"sendDMA completion");
		}
	}
	if (me == 0)
		pt->ns = bh_clock_end(&clk);
	pcor_dma_free(sbuf);
}

static void send_handover(int pid, int peer, void *buf, size_t len)
{
	pcor_handle_t h;
	int rc =
	    pcor_send_dma(pid, peer, TAG, buf, len, PCOR_SEND_HANDOVER, &h);
	if (rc)
		die("pcor_send_dma", rc);
	wait_ok(h, "pcor_send_dma completion");
}

static void run_handover(point_t *pt, int who)
{
	const int me = who, pid = pcor_self_pid();
	int peer;
	void *buf = NULL, *in = NULL;
	if (me == 0) {
		buf = dalloc(pt->size);
		memset(buf, PAT_A, pt->size);
	}
	pthread_barrier_wait(&pt->start);
	/* Only now are both ids written (pcor_thread_create returned). */
	peer = pt->thid[1 - who];
	/* Copies: the shared point is not read inside the timed loop. */
	const long total = pt->total;
	bh_clock_t clk = pt->clk;
	int r = 0;
	if (me == 1)
		r = hcheck(recvDMA(pid, peer, TAG, &in, NULL, NULL, NULL, NULL),
			   "recvDMA");
	for (long i = 0; i < total; i++) {
		if (me == 0) {
			bh_clock_tick(&clk);
			r = hcheck(recvDMA(pid, peer, TAG, &in, NULL, NULL,
					   NULL, NULL),
				   "recvDMA");
			send_handover(pid, peer, buf, pt->size);
			wait_ok(r, "recvDMA completion");
			buf = in;
		} else {
			wait_ok(r, "recvDMA completion");
			buf = in;
			if (i + 1 < total)
				r = hcheck(recvDMA(pid, peer, TAG, &in, NULL,
						   NULL, NULL, NULL),
					   "recvDMA");
			send_handover(pid, peer, buf, pt->size);
		}
	}
	if (me == 0) {
		pt->ns = bh_clock_end(&clk);
		/* The block went there and back unchanged. */
		check_bytes(buf, pt->size, PAT_A);
		pcor_dma_free(buf);
	}
}

static void *side_main(void *p)
{
	side_t *s = p;
	bh_pin_self(s->who);
	switch (s->pt->variant) {
	case V_COPY:
		run_copy(s->pt, s->who);
		break;
	case V_DMA:
		run_dma(s->pt, s->who);
		break;
	default:
		run_handover(s->pt, s->who);
		break;
	}
	return NULL;
}

/* One point: a fresh pair of pcor threads.  Nanoseconds per round trip. */
static double measure(int variant, size_t size, long iters, long warmup)
{
	point_t pt = {.variant = variant, .size = size};
	pt.total = warmup + bh_clock_init(&pt.clk, iters, warmup);
	side_t sd[2] = {{&pt, 0}, {&pt, 1}};
	pthread_barrier_init(&pt.start, NULL, 3);
	for (int i = 0; i < 2; i++) {
		int rc = pcor_thread_create(side_main, &sd[i], &pt.thid[i]);
		if (rc)
			die("pcor_thread_create", rc);
	}
	/* Both ids are known now; let the pair start. */
	pthread_barrier_wait(&pt.start);
	for (int i = 0; i < 2; i++)
		pcor_thread_join(pt.thid[i], NULL);
	pthread_barrier_destroy(&pt.start);
	return pt.ns;
}

/* Usable pairs: the two bare runs around a pcor run agree this well. */
#define PAIR_SPREAD 1.25
/* Below this the host had put both vCPUs on one core (SMT siblings). */
#define SIBLINGS_NS 100.0

/*
 * A bare figure measured before and after the pcor figure it is paired
 * with: their mean, or 0 (pair rejected) if the two disagree -- the host
 * moved the vCPUs meanwhile -- or are below floor.
 */
static double bracket(double before, double after, double floor)
{
	double lo = before < after ? before : after;
	double hi = before < after ? after : before;
	if (lo < floor || hi > lo * PAIR_SPREAD)
		return 0;
	return (before + after) / 2;
}

/*
 * The targets.  On this shared host the vCPUs move between host cores
 * (bare RTTs from ~30 ns on SMT siblings to ~500 ns), so a target ratio is
 * taken over many short pairs, each pcor run bracketed by its bare runs.
 */
static void targets(bh_opts_t *o, bool spin, const char *wait, int npairs,
		    long iters)
{
	const size_t mib = (size_t)1 << 20;
	double *c8 = calloc((size_t)npairs, sizeof(double));
	double *sh = calloc((size_t)npairs, sizeof(double));
	double *ln = calloc((size_t)npairs, sizeof(double));
	double *bq = calloc((size_t)npairs, sizeof(double));
	double *fx = calloc((size_t)npairs, sizeof(double));
	double *c1m = calloc((size_t)npairs, sizeof(double));
	double *m1m = calloc((size_t)npairs, sizeof(double));
	if (!c8 || !sh || !ln || !bq || !fx || !c1m || !m1m)
		die("calloc", PCOR_ERR_NOMEM);
	const long wu = iters / 10, it1m = bh_iters_for(o, mib, iters / 2);
	for (int b = 0; b < npairs; b++) {
		if (spin) {
			double s0 = bh_bare_spin_rtt(BH_SPIN_SHARED, iters, wu);
			double l0 = bh_bare_spin_rtt(BH_SPIN_LINE, iters, wu);
			double q0 = bh_bare_queue_rtt(iters, wu);
			c8[b] = measure(V_COPY, 8, iters, wu);
			double q1 = bh_bare_queue_rtt(iters, wu);
			double s1 = bh_bare_spin_rtt(BH_SPIN_SHARED, iters, wu);
			double l1 = bh_bare_spin_rtt(BH_SPIN_LINE, iters, wu);
			sh[b] = bracket(s0, s1, SIBLINGS_NS);
			ln[b] = bracket(l0, l1, SIBLINGS_NS);
			bq[b] = bracket(q0, q1, SIBLINGS_NS);
		} else {
			double f0 = bh_bare_futex_rtt(iters, wu);
			c8[b] = measure(V_COPY, 8, iters, wu);
			double f1 = bh_bare_futex_rtt(iters, wu);
			fx[b] = bracket(f0, f1, 0);
		}
		double m0 = bh_gbs(mib, bh_memcpy_ns(mib, it1m, it1m / 10));
		c1m[b] = bh_gbs(mib, measure(V_COPY, mib, it1m, it1m / 10) / 2);
		double m1 = bh_gbs(mib, bh_memcpy_ns(mib, it1m, it1m / 10));
		m1m[b] = bracket(m0, m1, 0);
	}
	if (spin) {
		bh_ratio_row(o, "rtt8-copy/bare-spin-shared", wait, 8, 2, c8,
			     sh, npairs, "ns", 2.5, true,
			     "8 B copy RTT (spin) / bare spin RTT, one shared "
			     "line");
		bh_ratio_row(o, "rtt8-copy/bare-spin-line", wait, 8, 2, c8, ln,
			     npairs, "ns", 2.5, true,
			     "8 B copy RTT (spin) / bare spin RTT, a line per "
			     "direction");
		/* Where the rest goes: pcor's lines without pcor's code. */
		bh_ratio_row(
		    o, "rtt8-copy/bare-queue", wait, 8, 2, c8, bq, npairs, "ns",
		    0, true,
		    "8 B copy RTT (spin) / the same line traffic, bare");
		bh_ratio_row(
		    o, "bare-queue/bare-spin-line", wait, 8, 2, bq, ln, npairs,
		    "ns", 0, true,
		    "pcor's line traffic, bare / bare spin RTT, a line "
		    "per direction");
	} else {
		bh_ratio_row(o, "rtt8-copy/bare-futex", wait, 8, 2, c8, fx,
			     npairs, "ns", 1.3, true,
			     "8 B copy RTT (block) / bare futex RTT");
	}
	bh_ratio_row(o, "bw1m-copy/memcpy", wait, mib, 2, c1m, m1m, npairs,
		     "GB/s", spin ? 0.8 : 0, false,
		     "1 MiB copy ping-pong bandwidth / memcpy");
	free(c8);
	free(sh);
	free(ln);
	free(bq);
	free(fx);
	free(c1m);
	free(m1m);
}

/* Everything one wait mode measures, in this (child) process. */
static int run_mode(bh_opts_t *o, const char *wait, const char *variants,
		    int npairs, long pair_iters)
{
	const bool spin = !strcmp(wait, "spin");
	const int R = o->reps, S = o->nsizes;
	int rc = pcor_init(NULL, NULL);
	if (rc)
		die("pcor_init", rc);
	bool on[NVARIANT];
	for (int v = 0; v < NVARIANT; v++)
		on[v] = bh_list_has(variants, vnames[v]);

	/* [rep], [size][rep], [variant][size][rep] */
	double *b_sh = calloc((size_t)R, sizeof(double));
	double *b_ln = calloc((size_t)R, sizeof(double));
	double *b_bq = calloc((size_t)R, sizeof(double));
	double *b_fx = calloc((size_t)R, sizeof(double));
	double *mc = calloc((size_t)(S * R), sizeof(double));
	double *rtt = calloc((size_t)(NVARIANT * S * R), sizeof(double));
	double *tmp = calloc((size_t)R, sizeof(double));
	double *tmp2 = calloc((size_t)R, sizeof(double));
	if (!b_sh || !b_ln || !b_bq || !b_fx || !mc || !rtt || !tmp || !tmp2)
		die("calloc", PCOR_ERR_NOMEM);
#define RTT(v, s, r) rtt[((v)*S + (s)) * R + (r)]

	if (npairs > 0)
		targets(o, spin, wait, npairs,
			spin ? pair_iters : pair_iters / 10);

	/*
	 * A blocking round trip is some 10 us (two wake-ups): a tenth of the
	 * iterations gives the same precision and keeps the run bounded.
	 */
	if (!spin) {
		o->iters = o->iters / 10 > 10 ? o->iters / 10 : 10;
		o->warmup /= 10;
	}
	for (int r = 0; r < R; r++) {
		if (spin) {
			/* 10x: a bare round trip is that much shorter. */
			b_sh[r] = bh_bare_spin_rtt(BH_SPIN_SHARED,
						   o->iters * 10, o->warmup);
			b_ln[r] = bh_bare_spin_rtt(BH_SPIN_LINE, o->iters * 10,
						   o->warmup);
			b_bq[r] = bh_bare_queue_rtt(o->iters, o->warmup);
		} else {
			b_fx[r] = bh_bare_futex_rtt(o->iters, o->warmup);
		}
		for (int s = 0; s < S; s++) {
			size_t sz = o->sizes[s];
			long it = bh_iters_for(o, sz, o->iters);
			long wu = bh_iters_for(o, sz, o->warmup);
			mc[s * R + r] = bh_memcpy_ns(sz, it, wu);
			for (int v = 0; v < NVARIANT; v++)
				if (on[v])
					RTT(v, s, r) = measure(v, sz, it, wu);
		}
	}

	if (spin) {
		memcpy(tmp, b_sh, sizeof(double) * (size_t)R);
		bh_csv_row(o, "rtt", "bare-spin-shared", wait, 0, 2,
			   o->iters * 10, tmp, R, "ns", "");
		memcpy(tmp, b_ln, sizeof(double) * (size_t)R);
		bh_csv_row(o, "rtt", "bare-spin-line", wait, 0, 2,
			   o->iters * 10, tmp, R, "ns", "");
		memcpy(tmp, b_bq, sizeof(double) * (size_t)R);
		bh_csv_row(o, "rtt", "bare-queue", wait, 8, 2, o->iters, tmp, R,
			   "ns", "");
	} else {
		memcpy(tmp, b_fx, sizeof(double) * (size_t)R);
		bh_csv_row(o, "rtt", "bare-futex", wait, 0, 2, o->iters, tmp, R,
			   "ns", "");
	}
	for (int s = 0; s < S; s++) {
		size_t sz = o->sizes[s];
		long it = bh_iters_for(o, sz, o->iters);
		for (int r = 0; r < R; r++)
			tmp[r] = bh_gbs(sz, mc[s * R + r]);
		bh_csv_row(o, "bw", "memcpy", wait, sz, 1, it, tmp, R, "GB/s",
			   "");
		for (int v = 0; v < NVARIANT; v++) {
			if (!on[v])
				continue;
			for (int r = 0; r < R; r++) {
				tmp[r] = RTT(v, s, r);
				tmp2[r] = bh_gbs(sz, RTT(v, s, r) / 2);
			}
			bh_csv_row(o, "rtt", vnames[v], wait, sz, 2, it, tmp, R,
				   "ns", "");
			bh_csv_row(o, "bw", vnames[v], wait, sz, 2, it, tmp2, R,
				   "GB/s", "");
		}
	}

#undef RTT
	free(b_sh);
	free(b_ln);
	free(b_bq);
	free(b_fx);
	free(mc);
	free(rtt);
	free(tmp);
	free(tmp2);
	bh_csv_flush(o);
	rc = pcor_finalize();
	if (rc)
		die("pcor_finalize", rc);
	return 0;
}

int main(int argc, char **argv)
{
	bh_opts_t o = {.bench = "pingpong",
		       .iters = 20000,
		       .warmup = 2000,
		       .min_iters = 20,
		       .reps = 5};
	o.nsizes = bh_parse_size_list("1:16m", o.sizes, BH_MAX_LIST);
	const char *waits = "spin,block", *variants = "copy,dma,dma-handover";
	const char *spin_ns = "1000000000", *pairs = "21";
	const char *pair_iters = "20000";
	bh_extra_t ex[] = {
	    {"wait", "LIST", "wait modes: spin, block", &waits},
	    {"variants", "LIST", "copy, dma, dma-handover", &variants},
	    {"spin-ns", "N", "PCOR_SPIN_NS in spin mode", &spin_ns},
	    {"pairs", "N", "bracketed pairs for the target ratios (0: none)",
	     &pairs},
	    {"pair-iters", "N", "8 B round trips per pair (block mode: /10)",
	     &pair_iters},
	};
	bh_parse(argc, argv, &o, ex, (int)(sizeof(ex) / sizeof(ex[0])),
		 "Round trip and ping-pong bandwidth between two pcor threads "
		 "of one process\n(pinned to CPUs 0 and 1), with bare spin, "
		 "futex and memcpy baselines.\nThe block mode runs a tenth of "
		 "--iters.");
	int npairs = atoi(pairs);
	long piters = atol(pair_iters);
	if (npairs < 0 || npairs > 500 || piters < 10) {
		fprintf(stderr, "pingpong: bad --pairs or --pair-iters\n");
		return 2;
	}
	if (!bh_list_has(waits, "spin") && !bh_list_has(waits, "block")) {
		fprintf(stderr, "pingpong: --wait needs spin and/or block\n");
		return 2;
	}
	bh_csv_begin(&o);
	int status = 0;
	static const char *const modes[] = {"spin", "block"};
	for (int m = 0; m < 2; m++) {
		if (!bh_list_has(waits, modes[m]))
			continue;
		bh_csv_flush(&o);
		pid_t pid = fork();
		if (pid < 0) {
			perror("pingpong: fork");
			return 1;
		}
		if (pid == 0) {
			/* Never outlive the parent (killed by a timeout). */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setenv("PCOR_SPIN_NS", m == 0 ? spin_ns : "0", 1);
			int rc =
			    run_mode(&o, modes[m], variants, npairs, piters);
			bh_csv_flush(&o);
			_exit(rc);
		}
		int ws;
		if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) ||
		    WEXITSTATUS(ws) != 0) {
			fprintf(stderr, "pingpong: %s mode failed\n", modes[m]);
			status = 1;
		}
	}
	bh_csv_end(&o);
	return status;
}
