/*
 * futex_pp -- the bare two-process references for pcor's small-message
 * latency: two processes on one shared page, no library.
 *
 *   futex_pp spin|futex [-i ITERS] [-x WARMUP]
 *
 * spin:  each side spins on its own cache line for the other's store.
 * futex: each side sleeps on its word with FUTEX_WAIT unless the value
 *        already changed, and the other stores then calls FUTEX_WAKE
 *        (the block-mode reference: one wake per hop, nothing else).
 * Prints "latency,bare-<kind>,8,<one-way us>,us".
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fwait(_Atomic unsigned *w, unsigned v)
{
	syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void fwake(_Atomic unsigned *w)
{
	syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Wait while *w == v. */
static void await(_Atomic unsigned *w, unsigned v, int sleep)
{
	while (atomic_load_explicit(w, memory_order_acquire) == v)
		if (sleep)
			fwait(w, v);
}

static void post(_Atomic unsigned *w, unsigned v, int sleep)
{
	atomic_store_explicit(w, v, memory_order_release);
	if (sleep)
		fwake(w);
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "spin") && strcmp(argv[1], "futex"))) {
		fprintf(stderr, "usage: futex_pp spin|futex [-i N] [-x N]\n");
		return 2;
	}
	int sleep = !strcmp(argv[1], "futex");
	long iters = 100000, warm = 1000;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-i"))
			iters = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-x"))
			warm = atol(argv[i + 1]);
	}
	if (iters < 1 || warm < 0)
		return 2;
	/* The two words on lines of their own. */
	_Atomic unsigned *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 1;
	_Atomic unsigned *ping = &page[0], *pong = &page[16];
	long n = iters + warm;
	pid_t c = fork();
	if (c < 0)
		return 1;
	if (c == 0) {
		for (long i = 0; i < n; i++) {
			await(ping, (unsigned)i, sleep);
			post(pong, (unsigned)i + 1, sleep);
		}
		_exit(0);
	}
	double t0 = 0;
	for (long i = 0; i < n; i++) {
		if (i == warm)
			t0 = now_us();
		post(ping, (unsigned)i + 1, sleep);
		await(pong, (unsigned)i, sleep);
	}
	double t1 = now_us();
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	printf("latency,bare-%s,8,%.3f,us\n", argv[1],
	       (t1 - t0) / (2.0 * (double)iters));
	return 0;
}
