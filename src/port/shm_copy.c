/*
 * shm_copy.c -- the pcor-shm port's copy of a message into its send cells:
 * with ordinary stores, or with non-temporal ones, whichever this machine
 * makes cheaper now.
 *
 * An ordinary store first takes ownership of its line.  The receiver read
 * the cell last, so when its core's cache is far from ours every line's
 * ownership crosses the machine: in that placement a 64 KiB copy took
 * 9.6 us with ordinary stores and 1.7 us with non-temporal ones, which
 * fetch nothing (docs/BENCHMARKS.md).  When the two cores share a cache the
 * ordinary copy is cheap and leaves the data where the receiver reads it,
 * while non-temporal stores would push it out to memory.  The host moves
 * our virtual CPUs between such placements as it runs, so the port times a
 * sample of its copies of each kind and takes non-temporal stores while
 * ordinary ones cost more than twice as much.
 */
#include "shm_port.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif

#include <string.h>

#define SAMPLE_EVERY 64 /* of the copies in question, one of each kind timed */
#define EWMA_SHIFT   2	/* weight of a new sample: 1/4 */
#define NT_GAIN	     2	/* ordinary over non-temporal cost that switches */

void shmp_copy_init(shm_copy_t *c)
{
	const char *knob = pcori_rt.cfg.shm_nt_stores;
	c->force = -1;
	if (!strcmp(knob, "on"))
		c->force = 1;
	else if (!strcmp(knob, "off"))
		c->force = 0;
	else if (strcmp(knob, "auto"))
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "PCOR_SHM_NT_STORES=\"%s\": use auto, on or off; "
			   "taken as auto",
			   knob);
	if (!HAVE_NT)
		c->force = 0;
}

#if HAVE_NT
/* Whole lines with non-temporal stores; the ragged ends ordinarily. */
static void copy_nt(uint8_t *dst, const uint8_t *src, size_t n)
{
	size_t head = (size_t)(-(uintptr_t)dst & 63);
	if (head > n)
		head = n;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	for (; n >= 64; dst += 64, src += 64, n -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
		__m128i b = _mm_loadu_si128(
		    (const __m128i *)(const void *)(src + 16));
		__m128i c = _mm_loadu_si128(
		    (const __m128i *)(const void *)(src + 32));
		__m128i d = _mm_loadu_si128(
		    (const __m128i *)(const void *)(src + 48));
		_mm_stream_si128((__m128i *)(void *)dst, a);
		_mm_stream_si128((__m128i *)(void *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(void *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(void *)(dst + 48), d);
	}
	memcpy(dst, src, n);
}
#endif

static void gather(uint8_t *dst, const struct iovec *iov, size_t niov,
		   bool nt)
{
	for (size_t i = 0; i < niov; i++) {
		if (!iov[i].iov_len)
			continue;
#if HAVE_NT
		if (nt)
			copy_nt(dst, iov[i].iov_base, iov[i].iov_len);
		else
#endif
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
#if HAVE_NT
	/*
	 * Non-temporal stores are not ordered by the release store that
	 * publishes the record: fence them first.
	 */
	if (nt)
		_mm_sfence();
#else
	(void)nt;
#endif
}

/* A timed copy's cost, in picoseconds a byte, folded into *avg. */
static void note(_Atomic uint32_t *avg, uint64_t ns, size_t len)
{
	uint64_t ps = ns * 1000 / len;
	if (ps > UINT32_MAX / 2)
		ps = UINT32_MAX / 2;
	uint32_t old = atomic_load_explicit(avg, memory_order_relaxed);
	/* Racing copies may each lose the other's sample: no matter. */
	uint32_t v = old ? (uint32_t)(old - (old >> EWMA_SHIFT) +
				      (ps >> EWMA_SHIFT))
			 : (uint32_t)ps;
	atomic_store_explicit(avg, v ? v : 1, memory_order_relaxed);
}

void shmp_copy(shm_copy_t *c, uint8_t *dst, const struct iovec *iov,
	       size_t niov, size_t len)
{
	if (len < SHMP_NT_MIN) {
		gather(dst, iov, niov, false);
		return;
	}
	uint64_t k = atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
	bool nt, timed = false;
	if (c->force >= 0) {
		nt = c->force;
	} else {
		/*
		 * One copy in SAMPLE_EVERY is timed with the other kind of
		 * store, one with the kind in use; the rest are not timed.
		 */
		uint32_t phase = (uint32_t)(k % SAMPLE_EVERY);
		nt = atomic_load_explicit(&c->nt, memory_order_relaxed);
		timed = phase == 0 || phase == SAMPLE_EVERY / 2;
		if (phase == 0)
			nt = !nt;
	}
	uint64_t t0 = timed ? pcori_now_ns() : 0;
	gather(dst, iov, niov, nt);
	if (nt)
		atomic_fetch_add_explicit(&c->n_nt, 1, memory_order_relaxed);
	if (!timed)
		return;
	note(nt ? &c->ps_nt : &c->ps_plain, pcori_now_ns() - t0, len);
	uint32_t plain =
	    atomic_load_explicit(&c->ps_plain, memory_order_relaxed);
	uint32_t fast = atomic_load_explicit(&c->ps_nt, memory_order_relaxed);
	if (plain && fast)
		atomic_store_explicit(&c->nt, plain > NT_GAIN * (uint64_t)fast,
				      memory_order_relaxed);
}
