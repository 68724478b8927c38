/*
 * line_stream -- what packing small records costs or saves a stream: one
 * process streams records of REC bytes (32: two to a cache line, 64: one,
 * as pcor-shm's ring holds a 1 B message) to another through a 16 KiB
 * shared ring.  The producer writes a header's worth of each record (its
 * first 28 bytes) and its last byte, then a stamp in its first word; the
 * consumer polls the stamp, reads that byte and publishes its head every
 * 64 records.  No library: the stream's rate is bound by the lines it
 * crosses, the most a message rate benchmark can reach.
 *
 *   line_stream [-n RECORDS] [-k ROUNDS] [REC ...]   (default 32 64)
 *   CSV: stream,ROUND,REC,Mrec/s -- the sizes interleaved in each round
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { RING = 16384, PUBLISH = 64, HDR = 28 };

typedef struct shared {
	_Alignas(64) _Atomic uint64_t head; /* consumer's position */
	_Alignas(64) unsigned char ring[RING];
} shared_t;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

/* Never 0, the ring's initial value; names the lap as well. */
static uint32_t stamp(uint64_t pos, size_t rec)
{
	return (uint32_t)(pos / rec) | 1u;
}

static void consume(shared_t *sh, size_t rec, long n)
{
	uint64_t pos = 0;
	for (long i = 0; i < n; i++) {
		unsigned char *r = &sh->ring[pos % RING];
		_Atomic uint32_t *w = (_Atomic uint32_t *)(void *)r;
		while (atomic_load_explicit(w, memory_order_acquire) !=
		       stamp(pos, rec))
			;
		/* Every record, in order: its last byte is its number. */
		if (r[rec - 1] != (unsigned char)i)
			_exit(1);
		pos += rec;
		if (i % PUBLISH == PUBLISH - 1 || i == n - 1)
			atomic_store_explicit(&sh->head, pos,
					      memory_order_release);
	}
	_exit(0);
}

/* Records per microsecond of one stream, or a negative value on failure. */
static double stream(shared_t *sh, size_t rec, long n)
{
	memset(sh, 0, sizeof(*sh));
	pid_t child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		pin(1);
		consume(sh, rec, n);
	}
	pin(0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t pos = 0;
	for (long i = 0; i < n; i++) {
		while (pos + rec > atomic_load_explicit(&sh->head,
							memory_order_acquire) +
					   RING)
			;
		unsigned char *r = &sh->ring[pos % RING];
		/* The rest of a header's worth, then the record's last byte. */
		memset(r + 4, 0x5a, HDR - 4);
		r[rec - 1] = (unsigned char)i;
		atomic_store_explicit((_Atomic uint32_t *)(void *)r,
				      stamp(pos, rec), memory_order_release);
		pos += rec;
	}
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
		    (double)(t1.tv_nsec - t0.tv_nsec);
	return (double)n / ns * 1e3;
}

int main(int argc, char **argv)
{
	long n = 20000000, rounds = 12;
	int c;
	while ((c = getopt(argc, argv, "n:k:")) != -1) {
		if (c == 'n')
			n = atol(optarg);
		else if (c == 'k')
			rounds = atol(optarg);
		else
			goto usage;
	}
	size_t recs[8] = {32, 64};
	int nrec = 2;
	if (optind < argc) {
		nrec = 0;
		for (; optind < argc && nrec < 8; optind++)
			recs[nrec++] = (size_t)atol(argv[optind]);
	}
	if (n < 1 || rounds < 1 || optind < argc)
		goto usage;
	for (int i = 0; i < nrec; i++)
		if (recs[i] <= HDR || recs[i] > 4096 || RING % recs[i])
			goto usage;
	shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("line_stream: mmap");
		return 1;
	}
	printf("stream,round,rec,Mrec_per_s\n");
	fflush(stdout); /* not once more by each child */
	for (long k = 0; k < rounds; k++)
		for (int i = 0; i < nrec; i++) {
			double rate = stream(sh, recs[i], n);
			if (rate < 0) {
				fprintf(stderr, "line_stream: a stream of %zu-byte "
					"records failed\n", recs[i]);
				return 1;
			}
			printf("stream,%ld,%zu,%.2f\n", k, recs[i], rate);
			fflush(stdout);
		}
	return 0;
usage:
	fprintf(stderr, "usage: line_stream [-n RECORDS] [-k ROUNDS] "
		"[REC ...] (%d-4096 bytes, dividing %d)\n", HDR + 1, RING);
	return 2;
}
