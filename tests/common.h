/*
 * common.h -- helpers shared by pcor's test programs, on top of harness.h:
 * a clock, fast message contents, and bounded waiting.
 */
#ifndef PCOR_TEST_COMMON_H
#define PCOR_TEST_COMMON_H

#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define TH_LEN(a) (sizeof(a) / sizeof((a)[0]))

static inline uint64_t th_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Reference contents.  A message with key k carries the bytes of one
 * pseudo-random block starting at an offset chosen by k, so that filling
 * or checking even 16 MiB is one memcpy or memcmp (fast under sanitizers
 * too), while messages of different keys still differ.
 */
#define TH_REF_SLACK 65536u

typedef struct th_ref {
	uint8_t *bytes;
	size_t max_len;
} th_ref_t;

static th_ref_t th_ref;

static inline uint64_t th_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* Make reference bytes for messages up to max_len. */
static inline void th_ref_init(size_t max_len)
{
	size_t n = max_len + TH_REF_SLACK;
	th_ref.bytes = malloc(n + 8);
	CHECK(th_ref.bytes != NULL);
	for (size_t i = 0; i < n; i += 8) {
		uint64_t w = th_mix(i);
		memcpy(th_ref.bytes + i, &w, 8);
	}
	th_ref.max_len = max_len;
}

static inline void th_ref_fini(void)
{
	free(th_ref.bytes);
	th_ref.bytes = NULL;
}

static inline const uint8_t *th_ref_at(uint64_t key)
{
	return th_ref.bytes + th_mix(key) % TH_REF_SLACK;
}

static inline void th_ref_fill(void *buf, size_t len, uint64_t key)
{
	CHECK(len <= th_ref.max_len);
	if (len)
		memcpy(buf, th_ref_at(key), len);
}

static inline bool th_ref_ok(const void *buf, size_t len, uint64_t key)
{
	return len <= th_ref.max_len &&
	       (len == 0 || memcmp(buf, th_ref_at(key), len) == 0);
}

/* Index of the first byte that differs from key's contents, for reports. */
static inline size_t th_ref_first_diff(const void *buf, size_t len,
				       uint64_t key)
{
	const uint8_t *b = buf, *r = th_ref_at(key);
	for (size_t i = 0; i < len; i++)
		if (b[i] != r[i])
			return i;
	return (size_t)-1;
}

#define CHECK_REF(buf, len, key)                                               \
	do {                                                                   \
		if (!th_ref_ok((buf), (len), (key))) {                         \
			char th_m_[256];                                       \
			snprintf(th_m_, sizeof(th_m_),                         \
				 "contents differ at byte %zu of %zu (key "    \
				 "%llu)",                                      \
				 th_ref_first_diff((buf), (len), (key)),       \
				 (size_t)(len), (unsigned long long)(key));    \
			th_fail_at(__FILE__, __LINE__, th_m_);                 \
		}                                                              \
	} while (0)

/* A small deterministic generator for seeded choices (xorshift64*). */
static inline uint64_t th_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* pthread helpers that fail the test instead of returning an error. */
static inline void th_barrier_init(pthread_barrier_t *b, unsigned n)
{
	CHECK(pthread_barrier_init(b, NULL, n) == 0);
}

static inline void th_barrier_wait(pthread_barrier_t *b)
{
	int rc = pthread_barrier_wait(b);
	CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
}

static inline void th_thread_start(pthread_t *t, void *(*fn)(void *),
				   void *arg)
{
	CHECK(pthread_create(t, NULL, fn, arg) == 0);
}

static inline void th_thread_join(pthread_t t)
{
	CHECK(pthread_join(t, NULL) == 0);
}

/*
 * Wait (bounded) until thread tid of this process is asleep in the
 * kernel, so a test can be sure the wake-up path, not the spinning one,
 * is what ends a wait.  Used only where the thread can block on nothing
 * but the wait under test.
 */
static inline void th_wait_thread_sleeping(int tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	uint64_t deadline = th_now_ns() + 20ull * 1000000000u;
	for (;;) {
		char line[512] = "";
		FILE *f = fopen(path, "r");
		CHECK(f != NULL);
		size_t n = fread(line, 1, sizeof(line) - 1, f);
		fclose(f);
		line[n] = '\0';
		/* The state follows the command name's closing parenthesis. */
		const char *p = strrchr(line, ')');
		CHECK(p != NULL && p[1] == ' ');
		if (p[2] == 'S')
			return;
		CHECK(th_now_ns() < deadline);
		sched_yield();
	}
}

/* A send that retries PCOR_ERR_AGAIN (back-pressure) a bounded number of
 * times; fails the test on any other error. */
#define TH_AGAIN_TRIES 10000

static inline pcor_handle_t th_send_copy(int pid, int thid, int tag,
					 const void *buf, size_t len)
{
	pcor_handle_t h = 0;
	for (int i = 0; i < TH_AGAIN_TRIES; i++) {
		int rc = pcor_send_copy(pid, thid, tag, buf, len, &h);
		if (rc == PCOR_OK)
			return h;
		CHECK_RC(rc, PCOR_ERR_AGAIN);
	}
	th_fail_at(__FILE__, __LINE__, "send kept failing with ERR_AGAIN");
	return 0;
}

#endif /* PCOR_TEST_COMMON_H */
