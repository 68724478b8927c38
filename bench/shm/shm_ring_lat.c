/*
 * shm_ring_lat -- the floor under pcor-shm: one-way latency of a bare
 * ping-pong through two of the port's rings (shm_ring.c) between two
 * processes, with the record a pcor message of n bytes takes (64-byte
 * header included) and busy polling on the stamp of the record at the
 * head, as the port's scan does.  No protocol, matching or handles: what is left of pcor's
 * own latency once this is taken away is theirs.
 *
 * -w NS,NS,...: also with a turn of NS nanoseconds of work (a chain of
 * dependent multiplies, calibrated at start, touching no shared memory)
 * between taking each record and sending the next, as a library's
 * matching and send path put there; the rows are labelled ring-turn-NS.
 * On some placements of the two CPUs the one-way time does not grow by
 * the turn but jumps by a whole line transfer once the turn passes a few
 * tens of nanoseconds; bench/shm/run_turn.sh sweeps it.
 *
 * -f: also with no work but one instruction of a kind between taking
 * each record and answering: a locked add (ring-locked: what a lock
 * costs the hop), an lfence (ring-lfence, x86: an instruction that holds
 * back the ones after it until the ones before are done) and a clock
 * read (ring-clock: what timing each round trip, as a percentile needs,
 * puts into the timing side's turn).
 *
 *   shm_ring_lat [-m MIN:MAX] [-i ITERS] [-w NS,...] [-f]
 *   (CSV, one-way us)
 */
#include "port/shm.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { RSIZE = 32768 }; /* each ring, as PCOR_SHM_RING_SIZE's default */

typedef struct side {
	_Atomic uint64_t head;
	char pad[56];
} side_t;

/* n steps of a dependent chain (about 4 cycles each); returns its end. */
static uint64_t work(uint64_t x, long n)
{
	for (long i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x)); /* no closed form, no hoisting */
	}
	return x;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static volatile uint64_t chain_end;

/* Steps of work() per nanosecond: the fastest of a few 2-ms runs. */
static double steps_per_ns(void)
{
	const long n = 2000000;
	double best = 0;
	uint64_t x = 1;
	for (int k = 0; k < 5; k++) {
		double t0 = now_ns();
		x = work(x, n);
		double rate = (double)n / (now_ns() - t0);
		if (rate > best)
			best = rate;
	}
	chain_end = x;
	return best;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

/* What -f puts into the turn instead of work. */
typedef enum { EXTRA_NONE, EXTRA_LOCKED, EXTRA_LFENCE, EXTRA_CLOCK } extra_t;

static _Atomic uint64_t locked_word;

static void extra(extra_t e)
{
	struct timespec t;
	switch (e) {
	case EXTRA_LOCKED:
		atomic_fetch_add(&locked_word, 1);
		break;
	case EXTRA_LFENCE:
#if defined(__x86_64__) || defined(__i386__)
		__asm__ volatile("lfence" ::: "memory");
#endif
		break;
	case EXTRA_CLOCK:
		clock_gettime(CLOCK_MONOTONIC, &t);
		__asm__ volatile("" : : "r"(t.tv_nsec) : "memory");
		break;
	case EXTRA_NONE:
		break;
	}
}

/*
 * One ping-pong of iters round trips with n-byte messages and a turn of
 * `steps` work steps on each side (then the extra instruction e); returns
 * the one-way time in us.
 */
static double run(pcori_shm_ring_t ring[2], side_t sd[2], const uint8_t *msg,
		  size_t n, long iters, long steps, extra_t e)
{
	for (int i = 0; i < 2; i++) {
		atomic_store(&sd[i].head, 0);
		memset(ring[i].buf, 0, RSIZE);
	}
	uint32_t len = (uint32_t)n + 64;
	pid_t child = fork();
	if (child < 0)
		return -1;
	int me = child == 0;
	pin(me);
	/* me sends on ring[me], receives on ring[1 - me]. */
	pcori_shm_ring_t *out = &ring[me], *in = &ring[1 - me];
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	uint64_t head = 0;
	uint8_t sink[8192 + 64];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0; k < iters; k++) {
		if (me == 0) { /* ping */
			uint8_t *d = pcori_shm_ring_reserve(
				out, &pr, PCORI_SHM_REC_INLINE, len, len);
			memcpy(d, msg, len);
			pcori_shm_ring_commit(out, &pr);
		}
		pcori_shm_rec_t rec;
		uint64_t next;
		int got;
		while ((got = pcori_shm_ring_next(in, head, &rec,
						  &next)) == 0 ||
		       (got == 1 && rec.kind == PCORI_SHM_REC_WRAP)) {
			if (got)
				head = next;
			else
				pcori_cpu_relax();
		}
		memcpy(sink, rec.data, rec.len);
		/* The turn: after taking the record, before answering. */
		if (steps)
			sink[0] ^= (uint8_t)work(sink[0], steps);
		if (e != EXTRA_NONE)
			extra(e);
		pcori_shm_ring_consumed(in, head, next);
		head = next;
		atomic_store_explicit(in->head, head,
				      memory_order_release);
		if (me == 1) { /* pong */
			uint8_t *d = pcori_shm_ring_reserve(
				out, &pr, PCORI_SHM_REC_INLINE, len, len);
			memcpy(d, sink, len);
			pcori_shm_ring_commit(out, &pr);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (me == 1)
		_exit(0);
	waitpid(child, NULL, 0);
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
		     (double)(t1.tv_nsec - t0.tv_nsec)) /
		    1e3 / (2.0 * (double)iters);
}

int main(int argc, char **argv)
{
	size_t min = 1, max = 4096;
	long iters = 200000;
	/* Turns to run: -1 is the bare floor (no work, labelled ring-floor). */
	long turns[32] = {-1};
	int nturns = 1;
	bool one_insn = false;
	int opt;
	while ((opt = getopt(argc, argv, "m:i:w:f")) != -1) {
		if (opt == 'm') {
			char *c = strchr(optarg, ':');
			min = strtoull(optarg, NULL, 10);
			max = c ? strtoull(c + 1, NULL, 10) : min;
		} else if (opt == 'i') {
			iters = atol(optarg);
		} else if (opt == 'w') {
			nturns = 0;
			for (char *t = strtok(optarg, ","); t && nturns < 32;
			     t = strtok(NULL, ","))
				turns[nturns++] = atol(t);
		} else if (opt == 'f') {
			one_insn = true;
		} else {
			fprintf(stderr, "usage: shm_ring_lat [-m MIN:MAX] [-i N] "
					"[-w NS,...] [-f]\n");
			return 2;
		}
	}
	if (iters < 1)
		iters = 1;
	double rate = 0;
	for (int t = 0; t < nturns; t++)
		if (turns[t] > 0 && !rate)
			rate = steps_per_ns();
	size_t total = 2 * sizeof(side_t) + 2 * RSIZE;
	uint8_t *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	side_t *sd = (side_t *)(void *)m;
	pcori_shm_ring_t ring[2];
	for (int i = 0; i < 2; i++) {
		ring[i].buf = m + 2 * sizeof(side_t) + (size_t)i * RSIZE;
		ring[i].size = RSIZE;
		ring[i].head = &sd[i].head;
	}
	uint8_t msg[8192 + 64];
	memset(msg, 1, sizeof(msg));
	printf("bench,transport,size,value,unit\n");
	for (size_t n = min; n <= max && n + 64 <= pcori_shm_inline_max(RSIZE);
	     n = n ? n * 2 : 1) {
		for (int t = 0; t < nturns; t++) {
			long steps = turns[t] > 0
					 ? (long)((double)turns[t] * rate + 0.5)
					 : 0;
			double us =
			    run(ring, sd, msg, n, iters, steps, EXTRA_NONE);
			if (us < 0)
				return 1;
			if (turns[t] < 0)
				printf("latency,ring-floor,%zu,%.3f,us\n", n, us);
			else
				printf("latency,ring-turn-%ld,%zu,%.3f,us\n",
				       turns[t], n, us);
			fflush(stdout);
		}
		static const struct {
			extra_t e;
			const char *label;
		} extras[] = {{EXTRA_LOCKED, "ring-locked"},
#if defined(__x86_64__) || defined(__i386__)
			      {EXTRA_LFENCE, "ring-lfence"},
#endif
			      {EXTRA_CLOCK, "ring-clock"}};
		for (size_t k = 0; one_insn && k < PCORI_ARRAY_LEN(extras); k++) {
			double us = run(ring, sd, msg, n, iters, 0, extras[k].e);
			if (us < 0)
				return 1;
			printf("latency,%s,%zu,%.3f,us\n", extras[k].label, n,
			       us);
			fflush(stdout);
		}
	}
	return 0;
}
