/*
 * shm_ring_lat -- the floor under pcor-shm: one-way latency of a bare
 * ping-pong through two of the port's rings (shm_ring.c) between two
 * processes, with the record a pcor message of n bytes takes (64-byte
 * header included) and busy polling on the stamp of the record at the
 * head, as the port's scan does.  No protocol, matching or handles: what is left of pcor's
 * own latency once this is taken away is theirs.
 *
 *   shm_ring_lat [-m MIN:MAX] [-i ITERS]     (prints CSV, one-way us)
 */
#include "port/shm.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct side {
	_Atomic uint64_t head;
	char pad[56];
} side_t;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

int main(int argc, char **argv)
{
	size_t min = 1, max = 4096;
	long iters = 200000;
	int opt;
	while ((opt = getopt(argc, argv, "m:i:")) != -1) {
		if (opt == 'm') {
			char *c = strchr(optarg, ':');
			min = strtoull(optarg, NULL, 10);
			max = c ? strtoull(c + 1, NULL, 10) : min;
		} else if (opt == 'i') {
			iters = atol(optarg);
		} else {
			fprintf(stderr, "usage: shm_ring_lat [-m MIN:MAX] [-i N]\n");
			return 2;
		}
	}
	const uint32_t rsize = 32768;
	size_t total = 2 * sizeof(side_t) + 2 * rsize;
	uint8_t *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	side_t *sd = (side_t *)(void *)m;
	pcori_shm_ring_t ring[2];
	for (int i = 0; i < 2; i++) {
		ring[i].buf = m + 2 * sizeof(side_t) + (size_t)i * rsize;
		ring[i].size = rsize;
		ring[i].head = &sd[i].head;
	}
	uint8_t msg[8192 + 64];
	memset(msg, 1, sizeof(msg));
	printf("bench,transport,size,value,unit\n");
	for (size_t n = min; n <= max && n + 64 <= pcori_shm_inline_max(rsize);
	     n = n ? n * 2 : 1) {
		for (int i = 0; i < 2; i++) {
			atomic_store(&sd[i].head, 0);
			memset(ring[i].buf, 0, rsize);
		}
		uint32_t len = (uint32_t)n + 64;
		pid_t child = fork();
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
		double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
			     (double)(t1.tv_nsec - t0.tv_nsec)) /
			    1e3 / (2.0 * (double)iters);
		printf("latency,ring-floor,%zu,%.3f,us\n", n, us);
		fflush(stdout);
	}
	return 0;
}
