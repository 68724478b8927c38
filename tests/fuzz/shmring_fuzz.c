/*
 * shmring_fuzz -- libFuzzer target for the pcor-shm ring reader
 * (pcori_shm_ring_next in src/port/shm_ring.c): the ring lives in
 * memory a local peer writes, so every byte of it may be hostile.
 *
 * Input: byte 0 picks the ring size (64 B to 8 KiB), bytes 1-2 the slot
 * the consumer's head stands on, byte 3 whether the low half of each
 * slot's first word is overwritten with the stamp its position would
 * carry (odd: so the fuzzer reaches the record decoder instead of stopping
 * at "nothing there yet"); the rest fills the ring.  The reader walks
 * records until it finds none or one malformed, and is done with each as
 * the port is (pcori_shm_ring_consumed).  Every record it accepts must
 * lie inside the ring, the walk must move forward, and what the consumer
 * cleared must read as no record.
 */
#include "port/shm.h"

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "invariant broken: %s\n", what);
		abort();
	}
}

/* Give every slot the stamp of the position it holds in the first lap. */
static void stamp_slots(uint8_t *buf, uint32_t rsize, uint64_t head)
{
	uint64_t hpos = head & (rsize - 1);
	for (uint32_t off = 0; off < rsize; off += PCORI_SHM_SLOT) {
		uint64_t pos = head + ((off + rsize - hpos) & (rsize - 1));
		uint32_t s = pcori_shm_stamp(pos);
		memcpy(buf + off, &s, sizeof s); /* little-endian low half */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	uint32_t rsize = 64u << (data[0] % 8);
	uint8_t *buf = aligned_alloc(PCORI_SHM_LINE, rsize);
	must(buf != NULL, "ring allocated");
	memset(buf, 0, rsize);
	size_t n = size - 4 < rsize ? size - 4 : rsize;
	memcpy(buf, data + 4, n);
	/* Counters are 64-bit and only grow: start far from zero. */
	uint64_t slot = ((uint64_t)data[1] << 8 | data[2]) %
			(rsize / PCORI_SHM_SLOT);
	uint64_t head = (1ull << 40) + slot * PCORI_SHM_SLOT;
	if (data[3] & 1)
		stamp_slots(buf, rsize, head);
	_Atomic uint64_t h = head;
	pcori_shm_ring_t r = {.buf = buf, .head = &h, .size = rsize};
	uint64_t start = head;
	for (int i = 0; i < 4096; i++) {
		pcori_shm_rec_t rec;
		uint64_t next = 0;
		int rc = pcori_shm_ring_next(&r, head, &rec, &next);
		if (rc != 1) {
			must(rc == 0 || rc == -1, "nothing there is 0, "
						  "malformed -1");
			break;
		}
		must(next > head, "the walk moves forward");
		must(next - start <= 2ull * rsize * 4096, "the walk is bounded");
		bool fill = rec.kind == PCORI_SHM_REC_WRAP ||
			    rec.kind == PCORI_SHM_REC_PAD;
		if (rec.kind == PCORI_SHM_REC_WRAP) {
			must((next & (rsize - 1)) == 0, "a wrap ends the lap");
		} else if (rec.kind == PCORI_SHM_REC_PAD) {
			must((next & (PCORI_SHM_LINE - 1)) == 0,
			     "a pad ends at a line");
		} else if (rec.kind == PCORI_SHM_REC_CELLS ||
			   rec.kind == PCORI_SHM_REC_FAST_CELLS) {
			must(rec.data == NULL, "cells carry no inline data");
		} else {
			must(rec.kind == PCORI_SHM_REC_INLINE ||
				     rec.kind == PCORI_SHM_REC_FAST ||
				     rec.kind == PCORI_SHM_REC_FAST_S,
			     "a known kind");
			must(next - head <= PCORI_SHM_SLOT ||
				     (head & (PCORI_SHM_LINE - 1)) == 0,
			     "a record of lines starts on one");
			must(rec.data >= buf && rec.data + rec.len <= buf + rsize,
			     "the payload lies inside the ring");
			/* Touch it: ASan checks the bounds. */
			volatile uint8_t sum = 0;
			for (uint32_t k = 0; k < rec.len; k++)
				sum = (uint8_t)(sum + rec.data[k]);
			(void)sum;
		}
		if (!fill) {
			pcori_shm_ring_consumed(&r, head, next);
			for (uint64_t at = head + PCORI_SHM_LINE; at < next;
			     at += PCORI_SHM_LINE)
				must(!pcori_shm_ring_ready(&r, at + rsize),
				     "a cleared line is no record");
		}
		head = next;
	}
	free(buf);
	return 0;
}
