/*
 * shm_copy.c -- the pcor-shm port's copy of a message into its send cells:
 * with ordinary stores, or with non-temporal ones, whichever this machine
 * makes cheaper now.
 *
 * An ordinary store first takes ownership of its line.  The receiver read
 * the cell last, so when its core's cache is far from ours every line's
 * ownership crosses the machine: in that placement a 64 KiB copy took
 * 9.6 us with ordinary stores and 1.7 us with non-temporal ones, which
 * fetch nothing.  When the two cores share a cache it is the other way
 * round, and by more: ordinary stores are cheap and leave the data where
 * the receiver reads it, while whole non-temporal copies ran at a tenth
 * of their rate (docs/BENCHMARKS.md).  The host moves
 * our virtual CPUs between such placements as it runs, so the port keeps
 * timing: one copy in SAMPLE_EVERY starts with SAMPLE_BYTES of the kind
 * not in use, another with the kind in use, and the port takes
 * non-temporal stores while ordinary ones cost more than 2.5 times as
 * much (medians of the last SHMP_NT_SAMPLES samples of each, so an
 * interrupted sample or two change nothing).  Timing only the first bytes
 * bounds what a sample of the wrong kind costs.
 */
#include "shm_port.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <x86intrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif

#include <string.h>

#define SAMPLE_BYTES 8192 /* timed at the start of a sampled copy */
#define SAMPLE_EVERY 128  /* copies per sample of each kind */
#define SAMPLE_EARLY 8	  /* the same, until each kind has SHMP_NT_SAMPLES */
/*
 * Ordinary over non-temporal cost that switches: 2.5.  8 KiB samples gave
 * ratios of 1.1-1.8 where ordinary stores are the better kind and 4.4-5.9
 * where non-temporal ones are; in between, ordinary stores, the kind
 * that was always used before.
 */
#define NT_GAIN_X2   5

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
		const __m128i *s = (const __m128i *)(const void *)src;
		__m128i *d = (__m128i *)(void *)dst;
		__m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
		__m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
		_mm_stream_si128(d, a);
		_mm_stream_si128(d + 1, b);
		_mm_stream_si128(d + 2, c);
		_mm_stream_si128(d + 3, e);
	}
	memcpy(dst, src, n);
}

static uint64_t ticks_now(void)
{
	return __rdtsc();
}
#else
/* Never called: without HAVE_NT the kind is fixed to ordinary stores. */
static uint64_t ticks_now(void)
{
	return 0;
}
#endif

static void copy_kind(uint8_t *dst, const uint8_t *src, size_t n, bool nt)
{
#if HAVE_NT
	if (nt) {
		copy_nt(dst, src, n);
		return;
	}
#else
	(void)nt;
#endif
	memcpy(dst, src, n);
}

/* Bytes [from, to) of the pieces, to the same place of dst. */
static void gather(uint8_t *dst, const struct iovec *iov, size_t niov,
		   size_t from, size_t to, bool nt)
{
	size_t at = 0;
	for (size_t i = 0; i < niov && at < to; i++) {
		size_t n = iov[i].iov_len;
		size_t a = PCORI_MAX(at, from), b = PCORI_MIN(at + n, to);
		if (a < b)
			copy_kind(dst + a, (const uint8_t *)iov[i].iov_base +
					       (a - at),
				  b - a, nt);
		at += n;
	}
}

/*
 * Non-temporal stores are not ordered by the release store that publishes
 * the record: fence them first.
 */
static void fence_nt(void)
{
#if HAVE_NT
	_mm_sfence();
#endif
}

static uint32_t median(_Atomic uint32_t *v)
{
	uint32_t a[SHMP_NT_SAMPLES];
	for (int i = 0; i < SHMP_NT_SAMPLES; i++) {
		uint32_t x = atomic_load_explicit(&v[i], memory_order_relaxed);
		int j = i;
		for (; j > 0 && a[j - 1] > x; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
	return a[SHMP_NT_SAMPLES / 2];
}

/* Has a full set of samples of the kind been taken? */
static bool sampled(shm_copy_t *c, bool nt)
{
	return atomic_load_explicit(&c->nticks[nt], memory_order_relaxed) >=
	       SHMP_NT_SAMPLES;
}

/* A timed sample of one kind: keep it, and choose again. */
static void note(shm_copy_t *c, bool nt, uint64_t ticks)
{
	/* Racing copies may overwrite each other's samples: no matter. */
	uint32_t i = atomic_fetch_add_explicit(&c->nticks[nt], 1,
					       memory_order_relaxed);
	atomic_store_explicit(&c->ticks[nt][i % SHMP_NT_SAMPLES],
			      (uint32_t)PCORI_MIN(ticks, UINT32_MAX),
			      memory_order_relaxed);
	if (!sampled(c, false) || !sampled(c, true))
		return;
	atomic_store_explicit(&c->nt,
			      2 * (uint64_t)median(c->ticks[0]) >
				  NT_GAIN_X2 * (uint64_t)median(c->ticks[1]),
			      memory_order_relaxed);
}

/*
 * Auto: the kind for the k-th copy in question, and whether it begins
 * with a timed sample (*sample_p: of non-temporal stores).
 */
static bool choose(shm_copy_t *c, uint64_t k, bool *timed_p, bool *sample_p)
{
	bool nt = atomic_load_explicit(&c->nt, memory_order_relaxed);
	bool early = !sampled(c, false) || !sampled(c, true);
	uint64_t every = early ? SAMPLE_EARLY : SAMPLE_EVERY;
	uint64_t phase = k % every;
	*timed_p = phase == 0 || phase == every / 2;
	*sample_p = *timed_p && (phase == 0 ? !nt : nt);
	return nt;
}

shm_copy_plan_t shmp_copy_plan(shm_copy_t *c, size_t len)
{
	shm_copy_plan_t pl = {false, false, false};
	if (len < SHMP_NT_MIN)
		return pl;
	/* Counted when made (shmp_copy): a plan whose cells were refused
	 * is made again. */
	uint64_t k = atomic_load_explicit(&c->n, memory_order_relaxed);
	if (c->force >= 0)
		pl.nt = c->force;
	else
		pl.nt = choose(c, k, &pl.timed, &pl.sample);
	return pl;
}

void shmp_copy(shm_copy_t *c, const shm_copy_plan_t *pl, uint8_t *dst,
	       const struct iovec *iov, size_t niov, size_t len)
{
	size_t from = 0;
	if (pl->timed) {
		/* The first bytes, of the kind sampled, timed. */
		uint64_t t0 = ticks_now();
		gather(dst, iov, niov, 0, SAMPLE_BYTES, pl->sample);
		note(c, pl->sample, ticks_now() - t0);
		from = SAMPLE_BYTES;
	}
	gather(dst, iov, niov, from, len, pl->nt);
	if (pl->nt || pl->sample)
		fence_nt();
	if (len >= SHMP_NT_MIN)
		atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
	if (pl->nt)
		atomic_fetch_add_explicit(&c->n_nt, 1, memory_order_relaxed);
}
