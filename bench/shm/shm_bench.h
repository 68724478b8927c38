/*
 * shm_bench.h -- what the point-to-point benchmarks share: argument
 * parsing, a clock, the size sweep, a barrier and CSV output.
 *
 * Every program runs as two processes under pcorrun (pid 0 and pid 1,
 * thread 0 each) and prints one CSV line per size from pid 0:
 *   bench,transport,size,value,unit
 * "transport" is the label given with -t (default: PCOR_PROVIDERS and
 * PCOR_DISPATCH), so runs of several configurations can be concatenated.
 */
#ifndef PCOR_SHM_BENCH_H
#define PCOR_SHM_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* POSIX: clock_gettime, getopt, readlink */
#endif

#include <pcor/pcor.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct sb_args {
	size_t min, max;   /* sizes: powers of two from min to max */
	long iters;        /* timed iterations per size (small sizes) */
	long warmup;       /* untimed iterations before */
	int window;        /* messages in flight (bandwidth, rate) */
	const char *label; /* transport column */
	int header;        /* print the CSV header line */
	int copy;          /* send with pcor_send_copy, not pcor_send_dma */
} sb_args_t;

static inline int64_t sb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void sb_must(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "bench: %s: %s\n", what, pcor_strerror(rc));
		exit(1);
	}
}

static inline size_t sb_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	return (size_t)v;
}

static inline void sb_usage(const char *prog, const char *what)
{
	fprintf(stderr,
		"usage: pcorrun -n 2 %s [-m MIN:MAX] [-i ITERS] [-x WARMUP] "
		"[-w WINDOW] [-t LABEL] [-c] [-H]\n  %s\n"
		"  sizes take k/m suffixes; -c sends with pcor_send_copy; -H "
		"prints the CSV header\n",
		prog, what);
	exit(2);
}

static inline void sb_parse(int argc, char **argv, sb_args_t *a,
			    const char *what)
{
	static char label[160];
	const char *prov = getenv("PCOR_PROVIDERS");
	const char *mode = getenv("PCOR_DISPATCH");
	snprintf(label, sizeof(label), "pcor/%s/%s",
		 prov && *prov ? prov : "default",
		 mode && *mode ? mode : "adaptive");
	a->label = label;
	int opt;
	while ((opt = getopt(argc, argv, "m:i:x:w:t:cH")) != -1) {
		switch (opt) {
		case 'm': {
			char *colon = strchr(optarg, ':');
			if (colon) {
				*colon = '\0';
				a->min = sb_size(optarg);
				a->max = sb_size(colon + 1);
			} else {
				a->min = a->max = sb_size(optarg);
			}
			break;
		}
		case 'i': a->iters = atol(optarg); break;
		case 'x': a->warmup = atol(optarg); break;
		case 'w': a->window = atoi(optarg); break;
		case 't': a->label = optarg; break;
		case 'c': a->copy = 1; break;
		case 'H': a->header = 1; break;
		default: sb_usage(argv[0], what);
		}
	}
	if (a->max < a->min || a->iters < 1 || a->window < 1 ||
	    a->warmup < 0)
		sb_usage(argv[0], what);
}

/* Fewer iterations for big messages, as OSU does (at least 10). */
static inline long sb_iters_for(size_t size, long base)
{
	if (size <= 8192)
		return base;
	long n = (long)((uint64_t)base * 8192 / size);
	return n < 10 ? 10 : n;
}

/* Two-process barrier on tag, thread 0 of each (zero-byte messages). */
static inline void sb_barrier(int me, int tag)
{
	int peer = 1 - me;
	pcor_handle_t r, s;
	sb_must(pcor_recv_copy(peer, 0, tag, NULL, 0, NULL, &r), "barrier recv");
	sb_must(pcor_send_copy(peer, 0, tag, NULL, 0, &s), "barrier send");
	sb_must(pcor_handle_test(r, PCOR_BLOCK), "barrier wait");
	sb_must(pcor_handle_test(s, PCOR_BLOCK), "barrier wait send");
}

static inline void sb_csv_header(const sb_args_t *a)
{
	if (a->header)
		printf("bench,transport,size,value,unit\n");
}

/* A DMA buffer filled with a pattern (sends never copy on our side). */
static inline void *sb_buf(size_t len)
{
	void *b;
	sb_must(pcor_dma_alloc(len ? len : 1, &b), "dma alloc");
	memset(b, 'a', len ? len : 1);
	return b;
}

/*
 * The frame every two-process program shares: init, check the job size,
 * DMA buffers for a.max bytes, the CSV header on pid 0.  Returns the pid.
 */
static inline int sb_start(int *argc, char ***argv, const char *prog,
			   const sb_args_t *a, char **sbuf, char **rbuf)
{
	sb_must(pcor_init(argc, argv), "init");
	int me = pcor_self_pid();
	if (pcor_nprocs() != 2) {
		fprintf(stderr, "%s: run with pcorrun -n 2\n", prog);
		exit(2);
	}
	*sbuf = sb_buf(a->max);
	*rbuf = sb_buf(a->max);
	if (me == 0)
		sb_csv_header(a);
	return me;
}

/* Everyone done, buffers back, leave. */
static inline int sb_finish(int me, char *sbuf, char *rbuf)
{
	sb_barrier(me, 1);
	pcor_dma_free(sbuf);
	pcor_dma_free(rbuf);
	sb_must(pcor_finalize(), "finalize");
	return 0;
}

/*
 * The osu_bw pattern: for every iteration pid 1 posts `window` receives
 * and pid 0 `window` sends of size bytes (all from and into one buffer
 * each), both wait for all of them, and pid 1 answers with a 4-byte
 * ack.  Returns the seconds pid 0 spent on `iters` iterations.
 */
static inline double sb_window(int me, size_t size, int window, long iters,
			       long warmup, int copy, char *sbuf, char *rbuf)
{
	pcor_handle_t *h = malloc(sizeof(*h) * (size_t)window);
	if (!h)
		sb_must(PCOR_ERR_NOMEM, "window");
	int64_t t0 = 0;
	sb_barrier(me, 1);
	for (long it = 0; it < iters + warmup; it++) {
		if (it == warmup)
			t0 = sb_now_ns();
		pcor_handle_t ack;
		if (me == 0) {
			sb_must(pcor_recv_copy(1, 0, 4, rbuf, 4, NULL, &ack),
				"ack recv");
			for (int w = 0; w < window; w++)
				sb_must(copy ? pcor_send_copy(1, 0, 3, sbuf,
							      size, &h[w])
					     : pcor_send_dma(1, 0, 3, sbuf,
							     size, 0, &h[w]),
					"send");
			for (int w = 0; w < window; w++)
				sb_must(pcor_handle_test(h[w], PCOR_BLOCK),
					"wait send");
			sb_must(pcor_handle_test(ack, PCOR_BLOCK), "ack");
		} else {
			for (int w = 0; w < window; w++)
				sb_must(pcor_recv_copy(0, 0, 3, rbuf, size,
						       NULL, &h[w]),
					"recv");
			for (int w = 0; w < window; w++)
				sb_must(pcor_handle_test(h[w], PCOR_BLOCK),
					"wait recv");
			sb_must(pcor_send_dma(0, 0, 4, sbuf, 4, 0, &ack),
				"ack send");
			sb_must(pcor_handle_test(ack, PCOR_BLOCK), "ack");
		}
	}
	int64_t t1 = sb_now_ns();
	free(h);
	return (double)(t1 - t0) / 1e9;
}

#endif /* PCOR_SHM_BENCH_H */
