/*
 * fabric_pp.c -- messaging between two processes over the fabric, the
 * measurements of the paper's Fig. 3 extended: run under pcorrun -n 2.
 *
 *   fabric_pp lat   round trip between thread 0 of each process, per size;
 *                   reported one way (half the round trip), as fi_pingpong
 *   fabric_pp bw    one-way streaming throughput, a window of sends in
 *                   flight, the receiver's last receive ends the clock
 *   fabric_pp rate  aggregate 8-byte message rate, T sender threads in
 *                   pid 0 each paired with one receiver thread in pid 1
 *
 * --variant copy|dma picks sendCopy/recvCopy or sendDMA/recvDMA.  The
 * dispatcher mode and provider come from PCOR_DISPATCH / PCOR_PROVIDERS
 * and are written into the CSV.  pid 0 prints the CSV.
 */
#include "harness.h"

#include <pcor/pcor.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 1
#define TAG_SYNC 2
#define TAG_IDS 3
#define WINDOW 64

static int me;
static const char *variant = "copy";
static bool dma;

static void die(const char *what, int rc)
{
	fprintf(stderr, "fabric_pp[%d]: %s: %s\n", me, what,
		pcor_strerror(rc));
	exit(1);
}

#define OK(call)                                                               \
	do {                                                                   \
		int rc_ = (call);                                              \
		if (rc_ != PCOR_OK)                                            \
			die(#call, rc_);                                       \
	} while (0)

static void wait_h(pcor_handle_t h)
{
	OK(pcor_handle_test(h, PCOR_BLOCK));
}

/* A zero-byte message each way: both sides start a step together. */
static void sync_peer(void)
{
	pcor_handle_t s, r;
	int other = 1 - me;
	OK(pcor_recv_copy(other, 0, TAG_SYNC, NULL, 0, NULL, &r));
	OK(pcor_send_copy(other, 0, TAG_SYNC, NULL, 0, &s));
	wait_h(s);
	wait_h(r);
}

static void *alloc_buf(size_t n)
{
	void *b = NULL;
	if (dma) {
		OK(pcor_dma_alloc(n ? n : 1, &b));
	} else if (!(b = malloc(n ? n : 1))) {
		die("malloc", PCOR_ERR_NOMEM);
	}
	memset(b, 0x5a, n ? n : 1);
	return b;
}

static void free_buf(void *b)
{
	if (dma)
		pcor_dma_free(b);
	else
		free(b);
}

static void send_one(int pid, int thid, void *buf, size_t n,
		     pcor_handle_t *h)
{
	if (dma)
		OK(pcor_send_dma(pid, thid, TAG_DATA, buf, n, 0, h));
	else
		OK(pcor_send_copy(pid, thid, TAG_DATA, buf, n, h));
}

/* Receive one message; a DMA receive's block is freed once it arrived. */
static void recv_one(int pid, int thid, void *buf, size_t n)
{
	pcor_handle_t h;
	if (dma) {
		void *got = NULL;
		OK(pcor_recv_dma(pid, thid, TAG_DATA, &got, NULL, &h));
		wait_h(h);
		pcor_dma_free(got);
	} else {
		OK(pcor_recv_copy(pid, thid, TAG_DATA, buf, n, NULL, &h));
		wait_h(h);
	}
}

/* ------------------------------------------------------------ latency */

static double lat_once(size_t n, long iters, long warmup, void *buf)
{
	int other = 1 - me;
	uint64_t t0 = 0;
	for (long i = 0; i < iters + warmup; i++) {
		if (i == warmup)
			t0 = bh_now_ns();
		pcor_handle_t s;
		if (me == 0) {
			send_one(other, 0, buf, n, &s);
			wait_h(s);
			recv_one(other, 0, buf, n);
		} else {
			recv_one(other, 0, buf, n);
			send_one(other, 0, buf, n, &s);
			wait_h(s);
		}
	}
	return (double)(bh_now_ns() - t0) / (double)iters / 2.0 / 1000.0;
}

/* --------------------------------------------------------- throughput */

static double bw_once(size_t n, long iters, long warmup, void *buf)
{
	int other = 1 - me;
	uint64_t t0 = 0;
	(void)warmup;
	if (me == 0) {
		pcor_handle_t win[WINDOW];
		int used = 0;
		t0 = bh_now_ns();
		for (long i = 0; i < iters; i++) {
			if (used == WINDOW) {
				for (int k = 0; k < used; k++)
					wait_h(win[k]);
				used = 0;
			}
			send_one(other, 0, buf, n, &win[used++]);
		}
		for (int k = 0; k < used; k++)
			wait_h(win[k]);
		/* The receiver's word that everything landed ends the clock. */
		pcor_handle_t r;
		OK(pcor_recv_copy(other, 0, TAG_SYNC, NULL, 0, NULL, &r));
		wait_h(r);
		return (double)n * (double)iters /
		       ((double)(bh_now_ns() - t0) / 1e9) / 1e6;
	}
	for (long i = 0; i < iters; i++)
		recv_one(other, 0, buf, n);
	pcor_handle_t s;
	OK(pcor_send_copy(other, 0, TAG_SYNC, NULL, 0, &s));
	wait_h(s);
	return 0;
}

/* ------------------------------------------------------- message rate */

typedef struct rate_arg {
	int k;
	long msgs;
	int peer_thid; /* pid 0: the receiver; pid 1: unused */
	pthread_barrier_t *go;
} rate_arg_t;

static void *rate_thread(void *p)
{
	rate_arg_t *a = p;
	int other = 1 - me;
	uint64_t v = 0;
	/* The barrier starts senders together once the tables are out. */
	pthread_barrier_wait(a->go);
	if (me == 0) {
		pcor_handle_t win[WINDOW];
		int used = 0;
		for (long i = 0; i < a->msgs; i++) {
			if (used == WINDOW) {
				for (int k = 0; k < used; k++)
					wait_h(win[k]);
				used = 0;
			}
			OK(pcor_send_copy(other, a->peer_thid, TAG_DATA, &v,
					  sizeof(v), &win[used++]));
		}
		for (int k = 0; k < used; k++)
			wait_h(win[k]);
	} else {
		for (long i = 0; i < a->msgs; i++) {
			pcor_handle_t h;
			OK(pcor_recv_copy(other, PCOR_ANY_THID, TAG_DATA, &v,
					  sizeof(v), NULL, &h));
			wait_h(h);
		}
		/* Tell pid 0's main thread this receiver is done. */
		pcor_handle_t s;
		OK(pcor_send_copy(other, 0, TAG_SYNC, NULL, 0, &s));
		wait_h(s);
	}
	return NULL;
}

static double rate_once(long t, long msgs)
{
	int other = 1 - me;
	int *ids = calloc((size_t)t, sizeof(int));
	rate_arg_t *args = calloc((size_t)t, sizeof(*args));
	pthread_barrier_t go;
	if (!ids || !args)
		die("calloc", PCOR_ERR_NOMEM);
	pthread_barrier_init(&go, NULL, (unsigned)t + 1);
	for (long k = 0; k < t; k++) {
		args[k] = (rate_arg_t){(int)k, msgs, 0, &go};
		if (me == 1)
			OK(pcor_thread_create(rate_thread, &args[k], &ids[k]));
	}
	pcor_handle_t h;
	if (me == 1) { /* receivers exist: tell the sender their ids */
		OK(pcor_send_copy(other, 0, TAG_IDS, ids, sizeof(int) * t, &h));
		wait_h(h);
	} else {
		OK(pcor_recv_copy(other, 0, TAG_IDS, ids, sizeof(int) * t,
				  NULL, &h));
		wait_h(h);
		for (long k = 0; k < t; k++) {
			args[k].peer_thid = ids[k];
			OK(pcor_thread_create(rate_thread, &args[k], &ids[k]));
		}
	}
	sync_peer();
	uint64_t t0 = bh_now_ns();
	pthread_barrier_wait(&go);
	if (me == 0)
		for (long k = 0; k < t; k++) {
			OK(pcor_recv_copy(other, PCOR_ANY_THID, TAG_SYNC, NULL, 0,
					  NULL, &h));
			wait_h(h);
		}
	double secs = (double)(bh_now_ns() - t0) / 1e9;
	for (long k = 0; k < t; k++)
		OK(pcor_thread_join(ids[k], NULL));
	pthread_barrier_destroy(&go);
	free(ids);
	free(args);
	return (double)t * (double)msgs / secs / 1e6;
}

/* --------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	const char *test = "lat", *msgs_s = "20000";
	bh_extra_t extra[] = {
		{"test", "lat|bw|rate", "what to measure", &test},
		{"variant", "copy|dma", "send/receive calls", &variant},
		{"msgs", "N", "rate: messages per sender thread", &msgs_s},
	};
	bh_opts_t o = {.bench = "fabric"};
	bh_parse(argc, argv, &o, extra, 3,
		 "under pcorrun -n 2: latency, throughput or message rate "
		 "between two processes");
	dma = !strcmp(variant, "dma");
	OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	if (pcor_nprocs() != 2)
		die("needs exactly 2 processes", PCOR_ERR_INVAL);
	const char *wait = getenv("PCOR_DISPATCH") ? getenv("PCOR_DISPATCH")
						    : "adaptive";
	const char *prov = getenv("PCOR_PROVIDERS") ? getenv("PCOR_PROVIDERS")
						     : "default";
	if (me == 0)
		bh_csv_begin(&o);
	double v[64];
	int reps = o.reps > 64 ? 64 : o.reps;
	if (!strcmp(test, "rate")) {
		long msgs = atol(msgs_s);
		for (int i = 0; i < o.nthreads; i++) {
			for (int r = 0; r < reps; r++)
				v[r] = rate_once(o.threads[i], msgs);
			if (me == 0)
				bh_csv_row(&o, "rate", variant, wait, 8,
					   o.threads[i], msgs, v, reps,
					   "Mmsg/s", prov);
		}
	} else {
		bool lat = !strcmp(test, "lat");
		for (int i = 0; i < o.nsizes; i++) {
			size_t n = o.sizes[i];
			long iters = bh_iters_for(&o, n, o.iters);
			void *buf = alloc_buf(n);
			for (int r = 0; r < reps; r++) {
				sync_peer();
				v[r] = lat ? lat_once(n, iters, o.warmup, buf)
					   : bw_once(n, iters, o.warmup, buf);
			}
			free_buf(buf);
			if (me == 0)
				bh_csv_row(&o, lat ? "latency" : "bandwidth",
					   variant, wait, n, 1, iters, v, reps,
					   lat ? "us" : "MB/s", prov);
		}
	}
	if (me == 0)
		bh_csv_end(&o);
	sync_peer();
	OK(pcor_finalize());
	return 0;
}
