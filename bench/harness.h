/*
 * harness.h -- what every pcor benchmark shares: command-line flags,
 * monotonic timing, medians over repetitions, CSV output, CPU pinning and
 * the bare baselines (cache-line and futex ping-pongs, memcpy) that pcor's
 * figures are divided by.
 *
 * Every benchmark prints one CSV table, on stdout and/or into a file:
 *
 *   bench,metric,variant,wait,size,threads,iters,reps,median,min,max,unit,note
 *
 * One row per measured point; median/min/max are over the repetitions.
 * Within a repetition a timed loop's figure is itself the median of 64
 * batch means (bh_clock_t), so one preemption does not spoil a point.
 * Rows whose metric is "ratio" compare two points measured in the same
 * process: each repetition measures both side by side and the row gives
 * the median (min, max) of the per-repetition quotients.  Their note says
 * the target and whether it was met.
 */
#ifndef PCOR_BENCH_HARNESS_H
#define PCOR_BENCH_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BH_MAX_LIST  64
#define BH_CACHELINE 64

/* A flag a benchmark adds to the common ones; its value is kept raw. */
typedef struct bh_extra {
	const char *name; /* without the leading "--" */
	const char *arg;  /* name of its value in --help */
	const char *help;
	const char **val_p; /* receives the value; preset to the default */
} bh_extra_t;

typedef struct bh_opts {
	const char *bench; /* first CSV column */
	size_t sizes[BH_MAX_LIST];
	int nsizes;
	long threads[BH_MAX_LIST];
	int nthreads;
	long iters;	/* timed iterations at sizes up to BH_SCALE_FROM */
	long warmup;	/* untimed iterations before them */
	long min_iters; /* floor once iterations scale down with size */
	int reps;	/* repetitions; figures are medians over them */
	const char *csv_path; /* also write the CSV here */
	bool quiet;	      /* no CSV on stdout */
	FILE *csv;	      /* the file, once opened */
} bh_opts_t;

/* Above this size, iterations shrink so each point moves similar bytes. */
#define BH_SCALE_FROM ((size_t)64 << 10)

/*
 * Parse the common flags plus extra[] (nextra entries) into o, whose
 * fields hold the benchmark's defaults on entry.  Prints usage and exits
 * on --help (status 0) or a bad flag (status 2).
 */
void bh_parse(int argc, char **argv, bh_opts_t *o, const bh_extra_t *extra,
	      int nextra, const char *synopsis);

/* Parse "8", "64k", "1m" (powers of 1024).  0 on success, -1 if bad. */
int bh_parse_size(const char *s, size_t *out_p);
/*
 * Parse a comma-separated list of sizes; an item "a:b" expands to the
 * powers of two from a to b.  Returns the count, -1 if malformed.
 */
int bh_parse_size_list(const char *s, size_t *out, int max);
/* Is word one of the comma-separated items of list? */
bool bh_list_has(const char *list, const char *word);

/* Iterations for one point of the given size (see BH_SCALE_FROM). */
long bh_iters_for(const bh_opts_t *o, size_t size, long base);

/* Monotonic time in nanoseconds. */
uint64_t bh_now_ns(void);

/*
 * A measured loop is timed in batches and its figure is the median of the
 * batch means: on a shared host a preemption then spoils one batch, not
 * the point.  Use:
 *
 *   long n = bh_clock_init(&c, iters, warmup);   (n: timed iterations)
 *   for (i = 0; i < warmup + n; i++) { bh_clock_tick(&c); ...one... }
 *   ns = bh_clock_end(&c);                        (per iteration)
 */
#define BH_BATCHES 64
typedef struct bh_clock {
	long batch; /* iterations per batch */
	long left;  /* iterations until the next stamp */
	int n;	    /* stamps taken */
	int nb;	    /* batches */
	uint64_t stamp[BH_BATCHES + 1];
} bh_clock_t;

/* iters rounded down to whole batches (at least one iteration). */
long bh_clock_init(bh_clock_t *c, long iters, long warmup);

/* At the top of every iteration, warm-up included. */
static inline void bh_clock_tick(bh_clock_t *c)
{
	if (--c->left == 0) {
		if (c->n < BH_BATCHES)
			c->stamp[c->n++] = bh_now_ns();
		c->left = c->batch;
	}
}

/* After the loop: nanoseconds per iteration, median over the batches. */
double bh_clock_end(bh_clock_t *c);

/* Median of v[0..n-1] (v is reordered).  0 for n == 0. */
double bh_median(double *v, int n);
double bh_min(const double *v, int n);
double bh_max(const double *v, int n);

/* Pin the calling thread to cpu (modulo the CPUs online).  0 or -1. */
int bh_pin_self(int cpu);
/* Number of CPUs this process may run on. */
int bh_ncpus(void);

/* Open the CSV file (if any) and print the header. */
void bh_csv_begin(bh_opts_t *o);
/* One row from the values of a repetition (v is reordered). */
void bh_csv_row(const bh_opts_t *o, const char *metric, const char *variant,
		const char *wait, size_t size, long threads, long iters,
		double *v, int n, const char *unit, const char *note);
/* Flush both outputs (before fork and at the end). */
void bh_csv_flush(const bh_opts_t *o);
void bh_csv_end(bh_opts_t *o);

/*
 * A ratio row: pairs num[i] / den[i] measured side by side, median over
 * the pairs.  A pair with an operand <= 0 was rejected by the caller and is
 * left out (the note counts the pairs used).  A target > 0 is checked
 * (upper bound when at_most, else lower bound); the verdict and the
 * operands' medians (in unit) go into the note, and a line on stderr.
 * Returns 1 if a target was given and met, 0 if missed, -1 if none.
 */
int bh_ratio_row(const bh_opts_t *o, const char *name, const char *wait,
		 size_t size, long threads, const double *num,
		 const double *den, int n, const char *unit, double target,
		 bool at_most, const char *what);

/* --------------------------------------------------------- baselines */

/* Where the two sides of a bare spin ping-pong meet. */
typedef enum bh_spin_layout {
	BH_SPIN_SHARED, /* one atomic line written by both sides */
	BH_SPIN_LINE,	/* one line per direction, each written by one side */
} bh_spin_layout_t;

/*
 * Bare ping-pongs between two plain threads pinned to CPUs 0 and 1, with
 * nothing of pcor in the way: the floors pcor's round trips are divided
 * by.  Each returns nanoseconds per round trip after warmup untimed ones.
 */
double bh_bare_spin_rtt(bh_spin_layout_t layout, long iters, long warmup);
/* Each side sleeps in FUTEX_WAIT until the other stores and wakes it. */
double bh_bare_futex_rtt(long iters, long warmup);

/*
 * The cache-line traffic of pcor's same-process path with none of its
 * software: each thread has a queue line (lock word, list head) and a
 * request line (the posted receive's pattern, buffer, link and completion
 * word).  A side posts its next receive (write its request line, lock its
 * queue, link it, unlock), then sends: locks the peer's queue, takes the
 * posted request, copies 8 bytes into its buffer, completes it, unlocks;
 * then spins on its own request.  The same prefetches as pcor.  What this
 * costs over bh_bare_spin_rtt is the design; what pcor costs over this is
 * its code.
 */
double bh_bare_queue_rtt(long iters, long warmup);

/*
 * One-way latency of waking a thread that sleeps in FUTEX_WAIT on an
 * otherwise idle CPU: the waker stores and calls FUTEX_WAKE, the woken
 * thread stamps the time it runs.  Median over iters wake-ups, in ns;
 * *send_ns_p gets the median time the waker spent in its calls.
 */
double bh_bare_futex_wake(long iters, double *send_ns_p);

/*
 * Has thread tid (of this process) gone to sleep?  Reads its state from
 * /proc; used to be sure a receiver really blocks before it is woken.
 */
bool bh_thread_sleeping(int tid);
/* The calling thread's kernel id. */
int bh_gettid(void);

/*
 * Single-thread memcpy of size bytes between two cache-hot buffers on
 * CPU 0: nanoseconds per copy.
 */
double bh_memcpy_ns(size_t size, long iters, long warmup);

/* Bytes per nanosecond is GB/s (10^9 B/s). */
static inline double bh_gbs(size_t bytes, double ns)
{
	return ns > 0 ? (double)bytes / ns : 0.0;
}

#endif /* PCOR_BENCH_HARNESS_H */
