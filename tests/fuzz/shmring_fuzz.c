/*
 * shmring_fuzz -- libFuzzer target for the pcor-shm ring reader
 * (pcori_shm_ring_next in src/dispatch/shm_ring.c): the ring lives in
 * memory a local peer writes, so every byte of it, and the counters, may
 * be hostile.
 *
 * Input: byte 0 picks the ring size (64 B to 8 KiB), bytes 1-2 the head
 * offset, bytes 3-4 how far the tail is ahead; the rest fills the ring.
 * The reader walks records until it reports one malformed.  Every record
 * it accepts must lie inside the ring and between head and tail, and
 * the walk must move forward.
 */
#include "dispatch/shm.h"

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "invariant broken: %s\n", what);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	uint32_t rsize = 64u << (data[0] % 8);
	uint8_t *buf = aligned_alloc(PCORI_SHM_LINE, rsize);
	must(buf != NULL, "ring allocated");
	memset(buf, 0, rsize);
	size_t n = size - 5 < rsize ? size - 5 : rsize;
	memcpy(buf, data + 5, n);
	/* Counters are 64-bit and only grow: start far from zero. */
	uint64_t head = (1ull << 40) + ((uint64_t)data[1] << 8 | data[2]);
	uint64_t tail = head + (((uint64_t)data[3] << 8 | data[4]) % (rsize + 1));
	_Atomic uint64_t t = tail, h = head;
	pcori_shm_ring_t r = {.buf = buf, .tail = &t, .head = &h,
			      .size = rsize};
	for (int i = 0; i < 4096 && head < tail; i++) {
		pcori_shm_rec_t rec;
		uint64_t next = 0;
		int rc = pcori_shm_ring_next(&r, head, tail, &rec, &next);
		if (rc != 1) {
			must(rc == -1, "malformed is -1");
			break;
		}
		must(next > head && next <= tail, "the walk moves forward, "
						  "within the tail");
		if (rec.kind == PCORI_SHM_REC_CELLS) {
			must(rec.data == NULL, "cells carry no inline data");
		} else {
			must(rec.kind == PCORI_SHM_REC_INLINE ||
				     rec.kind == PCORI_SHM_REC_FAST,
			     "a known kind");
			must(rec.data >= buf && rec.data + rec.len <= buf + rsize,
			     "the payload lies inside the ring");
			/* Touch it: ASan checks the bounds. */
			volatile uint8_t sum = 0;
			for (uint32_t k = 0; k < rec.len; k++)
				sum = (uint8_t)(sum + rec.data[k]);
			(void)sum;
		}
		head = next;
	}
	free(buf);
	return 0;
}
