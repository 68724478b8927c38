/*
 * harness.h -- the few helpers every pcor test uses.
 *
 * A test is one executable; it exits 0 when every check held, 1 when one
 * failed (after printing where and what), 77 to report a skip (meson's
 * convention), with the reason on stdout.
 */
#ifndef PCOR_TEST_HARNESS_H
#define PCOR_TEST_HARNESS_H

#include <pcor/pcor.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TH_SKIP 77

static inline void th_fail_at(const char *file, int line, const char *what)
{
	fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what);
	fflush(stderr);
	exit(1);
}

/* Check a condition. */
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			th_fail_at(__FILE__, __LINE__, #cond);                 \
	} while (0)

/* Check that an expression yields exactly the status expected. */
#define CHECK_RC(expr, expect)                                                 \
	do {                                                                   \
		int th_rc_ = (expr);                                           \
		int th_ex_ = (expect);                                         \
		if (th_rc_ != th_ex_) {                                        \
			char th_m_[512];                                       \
			snprintf(th_m_, sizeof(th_m_),                         \
				 "%s returned %d (%s), expected %d (%s)",      \
				 #expr, th_rc_, pcor_status_name(th_rc_),      \
				 th_ex_, pcor_status_name(th_ex_));            \
			th_fail_at(__FILE__, __LINE__, th_m_);                 \
		}                                                              \
	} while (0)

#define CHECK_OK(expr) CHECK_RC(expr, PCOR_OK)

/* Report a skip with its reason and end the test. */
#define SKIP(...)                                                              \
	do {                                                                   \
		printf("SKIP: ");                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		exit(TH_SKIP);                                                 \
	} while (0)

/*
 * Deterministic pattern so any byte out of place is detected: byte i is
 * byte i % 8 of a 64-bit mix of (seed, i / 8).  Made and checked a word
 * at a time, so a 256 MiB message costs milliseconds, not seconds.
 */
static inline uint64_t th_pattern_word(uint64_t seed, size_t w)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + w + 1;
	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static inline uint8_t th_pattern_byte(uint64_t seed, size_t i)
{
	uint64_t w = th_pattern_word(seed, i / 8);
	return (uint8_t)(w >> (8 * (i % 8)));
}

static inline void th_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *b = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = th_pattern_word(seed, i / 8);
		for (int k = 0; k < 8; k++) /* little-endian order, any host */
			b[i + (size_t)k] = (uint8_t)(w >> (8 * k));
	}
	for (; i < len; i++)
		b[i] = th_pattern_byte(seed, i);
}

/* Index of the first wrong byte, or (size_t)-1 when all are right. */
static inline size_t th_verify(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *b = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = th_pattern_word(seed, i / 8), got = 0;
		for (int k = 0; k < 8; k++)
			got |= (uint64_t)b[i + (size_t)k] << (8 * k);
		if (got != w)
			break; /* find the byte below */
	}
	for (; i < len; i++)
		if (b[i] != th_pattern_byte(seed, i))
			return i;
	return (size_t)-1;
}

#define CHECK_PATTERN(buf, len, seed)                                          \
	do {                                                                   \
		size_t th_at_ = th_verify((buf), (len), (seed));               \
		if (th_at_ != (size_t)-1) {                                    \
			char th_m_[256];                                       \
			snprintf(th_m_, sizeof(th_m_),                         \
				 "pattern mismatch at byte %zu of %zu",        \
				 th_at_, (size_t)(len));                       \
			th_fail_at(__FILE__, __LINE__, th_m_);                 \
		}                                                              \
	} while (0)

#endif /* PCOR_TEST_HARNESS_H */
