/*
 * msgrate.c -- aggregate same-process message rate of many pcor threads
 * in pairs.
 *
 * The traffic (chosen so that only the number of threads changes):
 *  - T threads form T/2 pairs.  Every sender is pinned to CPU 0 and every
 *    receiver to CPU 1, so at every T each message crosses between the
 *    same two cores and each core carries half of the threads.
 *  - The same total number of messages (--msgs) is split evenly over the
 *    pairs, in windows of --window messages.
 *  - A receiver keeps --depth windows of receives posted: when window k
 *    is complete it posts window k + depth and only then acknowledges k
 *    (a 0-byte message).  A sender sends window k (sendCopy, --sizes bytes
 *    each, then completes the handles) only after the acknowledgement of
 *    window k - depth.  So every data message finds its receive posted
 *    (pcor's direct path), no pair can run ahead and fill the unexpected
 *    queue, and with depth 2 a single pair keeps both cores busy: the
 *    receiver reposts one window while the sender fills the other.
 *  - Threads block with testHandle(PCOR_BLOCK) under the process's spin
 *    window (PCOR_SPIN_NS, default unless --spin-ns is given), the same
 *    at every T.
 *  - All threads start at one barrier; the rate is data messages (not
 *    acknowledgements) over the time from the first thread's start to the
 *    last thread's end.
 */
#include "harness.h"

#define BENCH_NAME "msgrate"
#include "check.h"

#include <pcor/pcor.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 11
#define TAG_ACK	 12

typedef struct run {
	long npairs, windows, window, depth;
	size_t size;
	int *thid; /* sender of pair k at 2k, its receiver at 2k + 1 */
	pthread_barrier_t start;
	uint64_t *t_start, *t_end;
} run_t;

typedef struct member {
	run_t *run;
	long idx;
} member_t;

/* h: window handles; ack[k % depth]: the acknowledgement of window k. */
static void sender(run_t *run, int peer, char *buf, int *h, int *ack)
{
	const int pid = pcor_self_pid(), len = (int)run->size;
	for (long w = 0; w < run->windows; w++) {
		if (w >= run->depth)
			wait_ok(ack[w % run->depth], "ack completion");
		ack[w % run->depth] =
		    hcheck(recvCopy(pid, peer, TAG_ACK, NULL, 0, NULL, NULL,
				    NULL, NULL),
			   "recvCopy(ack)");
		for (long j = 0; j < run->window; j++)
			h[j] = hcheck(sendCopy(pid, peer, TAG_DATA, buf, len),
				      "sendCopy");
		for (long j = 0; j < run->window; j++)
			wait_ok(h[j], "sendCopy completion");
	}
	long first = run->windows > run->depth ? run->windows - run->depth : 0;
	for (long w = first; w < run->windows; w++)
		wait_ok(ack[w % run->depth], "ack completion");
}

/* Receives of window w: handles and buffers of slot w % depth. */
static void post_window(run_t *run, int peer, char *buf, int *h, long w)
{
	const int pid = pcor_self_pid(), len = (int)run->size;
	const long slot = w % run->depth, n = run->window;
	for (long j = 0; j < n; j++)
		h[slot * n + j] =
		    hcheck(recvCopy(pid, peer, TAG_DATA,
				    buf + (size_t)(slot * n + j) * run->size,
				    len, NULL, NULL, NULL, NULL),
			   "recvCopy");
}

static void receiver(run_t *run, int peer, char *buf, int *h)
{
	const int pid = pcor_self_pid();
	const long n = run->window;
	for (long w = 0; w < run->depth && w < run->windows; w++)
		post_window(run, peer, buf, h, w);
	for (long w = 0; w < run->windows; w++) {
		const long slot = w % run->depth;
		for (long j = 0; j < n; j++)
			wait_ok(h[slot * n + j], "recvCopy completion");
		if (w + run->depth < run->windows)
			post_window(run, peer, buf, h, w + run->depth);
		wait_ok(hcheck(sendCopy(pid, peer, TAG_ACK, NULL, 0),
			       "sendCopy(ack)"),
			"ack send completion");
	}
}

static void *member_main(void *arg)
{
	member_t *m = arg;
	run_t *run = m->run;
	const bool is_sender = (m->idx & 1) == 0;
	bh_pin_self(is_sender ? 0 : 1);
	const long slots = is_sender ? 1 : run->depth;
	size_t bytes = run->size * (size_t)(slots * run->window);
	char *buf = malloc(bytes ? bytes : 1);
	int *h = malloc(sizeof(int) * (size_t)(slots * run->window));
	int *ack = malloc(sizeof(int) * (size_t)run->depth);
	if (!buf || !h || !ack)
		die("malloc", PCOR_ERR_NOMEM);
	memset(buf, 0x3c, bytes);
	pthread_barrier_wait(&run->start);
	/* Ids are all known once the barrier opens. */
	int peer = run->thid[m->idx ^ 1];
	run->t_start[m->idx] = bh_now_ns();
	if (is_sender)
		sender(run, peer, buf, h, ack);
	else
		receiver(run, peer, buf, h);
	run->t_end[m->idx] = bh_now_ns();
	free(buf);
	free(h);
	free(ack);
	return NULL;
}

/* One point: messages per second (all pairs together). */
static double measure(long nthreads, size_t size, long window, long depth,
		      long msgs)
{
	run_t run = {.npairs = nthreads / 2,
		     .window = window,
		     .depth = depth,
		     .size = size};
	long per_pair = (msgs + run.npairs - 1) / run.npairs;
	run.windows = (per_pair + window - 1) / window;
	if (run.windows < 1)
		run.windows = 1;
	long n = run.npairs * 2;
	run.thid = calloc((size_t)n, sizeof(int));
	run.t_start = calloc((size_t)n, sizeof(uint64_t));
	run.t_end = calloc((size_t)n, sizeof(uint64_t));
	member_t *mem = calloc((size_t)n, sizeof(member_t));
	if (!run.thid || !run.t_start || !run.t_end || !mem)
		die("calloc", PCOR_ERR_NOMEM);
	pthread_barrier_init(&run.start, NULL, (unsigned)n + 1);
	for (long i = 0; i < n; i++) {
		mem[i] = (member_t){&run, i};
		int rc = pcor_thread_create(member_main, &mem[i], &run.thid[i]);
		if (rc)
			die("pcor_thread_create", rc);
	}
	pthread_barrier_wait(&run.start);
	for (long i = 0; i < n; i++)
		pcor_thread_join(run.thid[i], NULL);
	pthread_barrier_destroy(&run.start);
	uint64_t first = UINT64_MAX, last = 0;
	for (long i = 0; i < n; i++) {
		if (run.t_start[i] < first)
			first = run.t_start[i];
		if (run.t_end[i] > last)
			last = run.t_end[i];
	}
	double total =
	    (double)run.npairs * (double)run.windows * (double)window;
	free(run.thid);
	free(run.t_start);
	free(run.t_end);
	free(mem);
	return total / ((double)(last - first) * 1e-9);
}

int main(int argc, char **argv)
{
	bh_opts_t o = {
	    .bench = "msgrate", .reps = 5, .iters = 1, .min_iters = 1};
	o.sizes[0] = 8;
	o.nsizes = 1;
	static const long deft[] = {2, 8, 64, 256, 1024};
	for (int i = 0; i < 5; i++)
		o.threads[i] = deft[i];
	o.nthreads = 5;
	const char *msgs_s = "1048576", *window_s = "64", *depth_s = "2";
	const char *spin_s = NULL;
	bh_extra_t ex[] = {
	    {"msgs", "N", "data messages per point, over all pairs", &msgs_s},
	    {"window", "N", "messages per window", &window_s},
	    {"depth", "N", "windows of receives kept posted", &depth_s},
	    {"spin-ns", "N", "set PCOR_SPIN_NS (else the runtime default)",
	     &spin_s},
	};
	bh_parse(argc, argv, &o, ex, (int)(sizeof(ex) / sizeof(ex[0])),
		 "Aggregate message rate of T threads in T/2 pairs (senders on "
		 "CPU 0,\nreceivers on CPU 1).  The first --sizes entry is the "
		 "message size; --iters\nand --warmup are unused.");
	long msgs = atol(msgs_s), window = atol(window_s),
	     depth = atol(depth_s);
	if (msgs < 1 || window < 1 || window > 65536 || depth < 1 ||
	    depth > 64) {
		fprintf(stderr, "msgrate: bad --msgs, --window or --depth\n");
		return 2;
	}
	for (int t = 0; t < o.nthreads; t++)
		if (o.threads[t] < 2 || o.threads[t] % 2) {
			fprintf(stderr,
				"msgrate: thread counts must be even\n");
			return 2;
		}
	if (spin_s)
		setenv("PCOR_SPIN_NS", spin_s, 1);
	const char *env = getenv("PCOR_SPIN_NS");
	char wait[48];
	snprintf(wait, sizeof(wait), "spin_ns=%s", env ? env : "default");
	int rc = pcor_init(&argc, &argv);
	if (rc)
		die("pcor_init", rc);
	long most = 0;
	for (int t = 0; t < o.nthreads; t++)
		most = o.threads[t] > most ? o.threads[t] : most;
	if (pcor_max_threads() <= most) {
		fprintf(stderr, "msgrate: raise PCOR_MAX_THREADS\n");
		return 2;
	}
	bh_csv_begin(&o);
	const int R = o.reps, T = o.nthreads;
	const size_t size = o.sizes[0];
	double *rate = calloc((size_t)(R * T), sizeof(double));
	double tmp[BH_MAX_LIST * 16];
	if (!rate)
		die("calloc", PCOR_ERR_NOMEM);
	for (int r = 0; r < R; r++)
		for (int t = 0; t < T; t++)
			rate[t * R + r] =
			    measure(o.threads[t], size, window, depth, msgs) /
			    1e6;
	int t2 = -1;
	for (int t = 0; t < T; t++)
		if (o.threads[t] == 2)
			t2 = t;
	for (int t = 0; t < T && t2 >= 0; t++) {
		if (t == t2)
			continue;
		char name[64], what[96];
		snprintf(name, sizeof(name), "rate%ld/rate2", o.threads[t]);
		snprintf(what, sizeof(what),
			 "message rate, %ld threads / 2 threads", o.threads[t]);
		bh_ratio_row(&o, name, wait, size, o.threads[t], &rate[t * R],
			     &rate[t2 * R], R, "Mmsg/s",
			     o.threads[t] == 256 ? 0.5 : 0, false, what);
	}
	for (int t = 0; t < T; t++) {
		memcpy(tmp, &rate[t * R], sizeof(double) * (size_t)R);
		bh_csv_row(&o, "rate", "copy", wait, size, o.threads[t], msgs,
			   tmp, R, "Mmsg/s", "");
	}
	free(rate);
	bh_csv_end(&o);
	rc = pcor_finalize();
	if (rc)
		die("pcor_finalize", rc);
	return 0;
}
