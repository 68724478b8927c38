/*
 * reasm -- segmentation bounds and the 32-bit reassembly bitmaps of
 * src/frag: fragment counts and bounds, out-of-order, duplicate, missing
 * and out-of-window fragments, window advance.
 */
#include "frag/frag.h"

#include "../common.h"

/* Fragment counts, and that the bounds tile the message exactly. */
static void test_bounds(void)
{
	CHECK(pcori_frag_count(0, 64) == 1); /* an empty message is 1 fragment */
	CHECK(pcori_frag_count(1, 64) == 1);
	CHECK(pcori_frag_count(64, 64) == 1);
	CHECK(pcori_frag_count(65, 64) == 2);
	CHECK(pcori_frag_count(64 * 32, 64) == 32);
	CHECK(pcori_frag_count(64 * 32 + 1, 64) == 33);

	size_t off, len;
	pcori_frag_bounds(0, 64, 0, &off, &len);
	CHECK(off == 0 && len == 0);
	pcori_frag_bounds(100, 64, 0, &off, &len);
	CHECK(off == 0 && len == 64);
	pcori_frag_bounds(100, 64, 1, &off, &len); /* the short last one */
	CHECK(off == 64 && len == 36);
	pcori_frag_bounds(128, 64, 1, &off, &len); /* a full last one */
	CHECK(off == 64 && len == 64);
	pcori_frag_bounds(128, 64, 2, &off, &len); /* past the end: empty */
	CHECK(len == 0);

	/* Every size around fragment boundaries: fragments are contiguous,
	 * non-empty except for the empty message, and cover it exactly. */
	const size_t fss[] = {1, 7, 64, 1024, 65536};
	for (size_t f = 0; f < PCORI_ARRAY_LEN(fss); f++) {
		size_t fs = fss[f];
		for (size_t size = 0; size <= 3 * fs + 2;
		     size += (fs > 64 ? fs / 4 - 1 : 1)) {
			uint32_t n = pcori_frag_count(size, fs);
			size_t next = 0;
			for (uint32_t i = 0; i < n; i++) {
				pcori_frag_bounds(size, fs, i, &off, &len);
				CHECK(off == next);
				CHECK(len <= fs);
				CHECK(len > 0 || size == 0);
				next = off + len;
			}
			CHECK(next == size);
		}
	}
}

static void test_empty_message(void)
{
	pcori_reasm_t r;
	pcori_reasm_init(&r, pcori_frag_count(0, 65536));
	CHECK(!pcori_reasm_complete(&r));
	CHECK(pcori_reasm_window_len(&r) == 1);
	CHECK(pcori_reasm_missing(&r) == 1u);
	CHECK(pcori_reasm_accept(&r, 1) == PCORI_FRAG_BAD);
	CHECK(pcori_reasm_accept(&r, 0) == PCORI_FRAG_NEW);
	CHECK(pcori_reasm_accept(&r, 0) == PCORI_FRAG_DUP);
	CHECK(pcori_reasm_complete(&r));
	CHECK(pcori_reasm_window_done(&r));
	pcori_reasm_advance(&r);
	CHECK(!pcori_reasm_window_done(&r)); /* no window past the end */
	CHECK(pcori_reasm_accept(&r, 0) == PCORI_FRAG_DUP);
	CHECK(r.received == 1);
}

/* Shuffle idx[0..n) with a seeded generator. */
static void shuffle(uint32_t *idx, uint32_t n, uint64_t *rs)
{
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)(th_rand(rs) % i);
		uint32_t t = idx[i - 1];
		idx[i - 1] = idx[j];
		idx[j] = t;
	}
}

/*
 * A message of nfrags fragments delivered window by window in random
 * order, with duplicates, fragments of the next window (refused as AHEAD)
 * and of past windows (DUP), and bad indexes mixed in.
 */
static void run_message(uint32_t nfrags, uint64_t seed)
{
	uint64_t rs = seed;
	pcori_reasm_t r;
	pcori_reasm_init(&r, nfrags);
	uint32_t *idx = malloc(sizeof(uint32_t) * PCORI_FRAG_WINDOW);
	CHECK(idx != NULL);
	uint32_t nnew = 0;
	while (!pcori_reasm_complete(&r)) {
		uint32_t base = r.base;
		uint32_t wl = pcori_reasm_window_len(&r);
		CHECK(wl == PCORI_MIN(PCORI_FRAG_WINDOW, nfrags - base));
		uint32_t mask = wl == 32 ? 0xffffffffu : (1u << wl) - 1;
		CHECK(pcori_reasm_missing(&r) == mask);
		for (uint32_t i = 0; i < wl; i++)
			idx[i] = base + i;
		shuffle(idx, wl, &rs);
		for (uint32_t i = 0; i < wl; i++) {
			CHECK(!pcori_reasm_window_done(&r));
			CHECK(pcori_reasm_accept(&r, idx[i]) == PCORI_FRAG_NEW);
			nnew++;
			CHECK(!(pcori_reasm_missing(&r) &
				(1u << (idx[i] - base))));
			/* Noise that must change nothing. */
			uint32_t again = idx[th_rand(&rs) % (i + 1)];
			CHECK(pcori_reasm_accept(&r, again) == PCORI_FRAG_DUP);
			if (base + wl < nfrags) {
				uint32_t later = nfrags - (base + wl);
				uint32_t ahead = base + wl +
						 (uint32_t)(th_rand(&rs) % later);
				CHECK(pcori_reasm_accept(&r, ahead) ==
				      PCORI_FRAG_AHEAD);
			}
			if (base > 0)
				CHECK(pcori_reasm_accept(
					      &r, (uint32_t)(th_rand(&rs) %
							     base)) ==
				      PCORI_FRAG_DUP);
			CHECK(pcori_reasm_accept(&r, nfrags) == PCORI_FRAG_BAD);
			CHECK(pcori_reasm_accept(&r, UINT32_MAX) ==
			      PCORI_FRAG_BAD);
			CHECK(r.received == nnew);
		}
		CHECK(pcori_reasm_window_done(&r));
		CHECK(pcori_reasm_missing(&r) == 0);
		pcori_reasm_advance(&r);
		CHECK(r.base == base + wl);
		CHECK(r.bitmap == 0);
	}
	CHECK(nnew == nfrags);
	CHECK(r.base == nfrags);
	free(idx);
}

/* One fragment missing: the window is not done and names the gap. */
static void test_missing(void)
{
	pcori_reasm_t r;
	pcori_reasm_init(&r, 40);
	for (uint32_t i = 0; i < 32; i++)
		if (i != 17)
			CHECK(pcori_reasm_accept(&r, i) == PCORI_FRAG_NEW);
	CHECK(!pcori_reasm_window_done(&r));
	CHECK(pcori_reasm_missing(&r) == (1u << 17));
	/* The next window cannot start before the gap is filled. */
	CHECK(pcori_reasm_accept(&r, 32) == PCORI_FRAG_AHEAD);
	CHECK(pcori_reasm_accept(&r, 39) == PCORI_FRAG_AHEAD);
	CHECK(r.received == 31);
	CHECK(pcori_reasm_accept(&r, 17) == PCORI_FRAG_NEW);
	CHECK(pcori_reasm_window_done(&r));
	pcori_reasm_advance(&r);
	/* The last window has 8 fragments: only their bits count. */
	CHECK(pcori_reasm_window_len(&r) == 8);
	CHECK(pcori_reasm_missing(&r) == 0xffu);
	for (uint32_t i = 39; i >= 33; i--)
		CHECK(pcori_reasm_accept(&r, i) == PCORI_FRAG_NEW);
	CHECK(!pcori_reasm_window_done(&r));
	CHECK(!pcori_reasm_complete(&r));
	CHECK(pcori_reasm_missing(&r) == 1u);
	CHECK(pcori_reasm_accept(&r, 32) == PCORI_FRAG_NEW);
	CHECK(pcori_reasm_complete(&r));
	CHECK(pcori_reasm_window_done(&r));
	CHECK(pcori_reasm_accept(&r, 40) == PCORI_FRAG_BAD);
}

int main(void)
{
	test_bounds();
	test_empty_message();
	test_missing();
	const uint32_t counts[] = {1, 2, 31, 32, 33, 63, 64, 65, 100, 1000};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(counts); i++)
		run_message(counts[i], 1000 + i);
	return 0;
}
