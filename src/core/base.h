/*
 * base.h -- what every file of pcor leans on before anything else:
 * compiler helpers, short copies, assertions, the clock and the
 * intrusive list.  Part of core.h, which includes it.
 */
#ifndef PCOR_CORE_BASE_H
#define PCOR_CORE_BASE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <pcor/pcor.h>

#include <limits.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ compiler */

#define PCORI_CACHELINE 64
/* For the few small functions of the send path that GCC leaves as calls. */
#define PCORI_ALWAYS_INLINE inline __attribute__((always_inline))
/*
 * Out of line: a fast path's rare branch, so the fast path needs no frame;
 * and in one copy, which profiles find by its name.
 */
#if defined(__clang__)
#define PCORI_NOINLINE __attribute__((noinline))
#else
#define PCORI_NOINLINE __attribute__((noinline, noclone))
#endif
#define PCORI_LIKELY(x) __builtin_expect(!!(x), 1)
#define PCORI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PCORI_UNUSED __attribute__((unused))
#define PCORI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define PCORI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PCORI_CONTAINER_OF(ptr, type, member)                                  \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define PCORI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PCORI_MAX(a, b) ((a) > (b) ? (a) : (b))

/* CPU hint inside spin loops. */
static inline void pcori_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * Copy n bytes that do not overlap.  The few bytes of a small message
 * go by overlapping word moves rather than a call to memcpy, whose
 * call and size dispatch cost more than the copy at these sizes.
 */
static inline void pcori_copy_short(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 32) {
		memcpy(d, s, n);
	} else if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8)
			memcpy(d + i, s + i, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n) {
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}

/*
 * Hint: fetch the line holding p for writing.  For data another core wrote
 * last that we are about to read and then write (a posted receive taken
 * by a sender, a queue lock), one exclusive fetch replaces a shared fetch
 * followed by an upgrade: one coherence round trip instead of two.  On
 * x86-64 only where the CPU has PREFETCHW (checked once, in sync.c).
 */
extern bool pcori_have_prefetchw;
static inline void pcori_prefetchw(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (PCORI_LIKELY(pcori_have_prefetchw))
		__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* Programming bugs only -- never a peer, the network or memory running out. */
#define PCORI_ASSERT(cond)                                                     \
	do {                                                                   \
		if (PCORI_UNLIKELY(!(cond)))                                   \
			pcori_panic(__FILE__, __LINE__, #cond);                \
	} while (0)
_Noreturn void pcori_panic(const char *file, int line, const char *what);

/* Monotonic time in nanoseconds. */
uint64_t pcori_now_ns(void);
/*
 * Time from t to now, 0 if t is later: a `now` read before a pass may
 * precede a stamp another thread made meanwhile.
 */
static inline uint64_t pcori_elapsed_ns(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}
/*
 * How long a wait until deadline (UINT64_MAX: none) may sleep: *left_p is
 * the nanoseconds left, -1 for no bound.  PCOR_ERR_TIMEDOUT once passed.
 */
static inline int pcori_wait_left(uint64_t deadline, int64_t *left_p)
{
	*left_p = -1;
	if (deadline == UINT64_MAX)
		return PCOR_OK;
	uint64_t now = pcori_now_ns();
	if (now >= deadline)
		return PCOR_ERR_TIMEDOUT;
	*left_p = (int64_t)(deadline - now);
	return PCOR_OK;
}

/* ---------------------------------------------------------------- lists */

/* Intrusive circular doubly-linked list; the head is a sentinel node. */
typedef struct pcori_list {
	struct pcori_list *next, *prev;
} pcori_list_t;

static inline void pcori_list_init(pcori_list_t *h)
{
	h->next = h->prev = h;
}
static inline bool pcori_list_empty(const pcori_list_t *h)
{
	return h->next == h;
}
static inline void pcori_list_push_back(pcori_list_t *h, pcori_list_t *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}
static inline void pcori_list_remove(pcori_list_t *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
#define pcori_list_foreach(pos, head)                                          \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)
#define pcori_list_foreach_safe(pos, tmp, head)                                \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);       \
	     (pos) = (tmp), (tmp) = (pos)->next)


#endif /* PCOR_CORE_BASE_H */
