/*
 * hop.c -- hop probes (hop.h): per-thread stamps, summed per stretch.
 */
#include "hop.h"

#if defined(PCORI_HOP_PROBE) && PCORI_HOP_PROBE && \
	(defined(__x86_64__) || defined(__i386__))

#include "core.h"

#include <string.h>
#include <x86intrin.h>

/*
 * A stamp: the counter once everything before it has completed.  rdtsc
 * alone may run before an earlier load is served, and a miss then shows
 * in the stretch after it, not in the one it belongs to.
 */
static inline uint64_t stamp_now(void)
{
	_mm_lfence();
	return __rdtsc();
}

/* A hop longer than this (ticks) was not a ping-pong's turn: not counted. */
#define HOP_MAX_TICKS (1ull << 22)

typedef struct hop_state {
	uint64_t t[PCORI_HOP_NPOINTS];
	uint64_t sum[PCORI_HOP_NPOINTS]; /* sum[i]: t[i] - t[i - 1] */
	uint64_t hops, locks, lock_sum;
	uint64_t transit_sum, transits;
	uint64_t tsc0, ns0; /* for the counter's rate */
	bool open;
} hop_state_t;

static _Thread_local hop_state_t hop;

void pcori_hop_seen(const uint8_t *rec, size_t len)
{
	if (hop.open)
		return; /* a later record of the same drain */
	uint64_t now = stamp_now();
	if (!hop.tsc0) {
		hop.tsc0 = now;
		hop.ns0 = pcori_now_ns();
	}
	if (len <= PCORI_HOP_STAMP_AT) {
		uint64_t sent;
		memcpy(&sent, rec + PCORI_HOP_STAMP_AT, sizeof(sent));
		if (sent && sent < now && now - sent < HOP_MAX_TICKS) {
			hop.transit_sum += now - sent;
			hop.transits++;
		}
	}
	memset(hop.t, 0, sizeof(hop.t));
	hop.t[PCORI_HOP_SEEN] = now;
	hop.locks = 0;
	hop.open = true;
}

void pcori_hop_stamp(uint8_t *rec, size_t len)
{
	if (len <= PCORI_HOP_STAMP_AT) {
		uint64_t now = stamp_now();
		memcpy(rec + PCORI_HOP_STAMP_AT, &now, sizeof(now));
	}
}

void pcori_hop_mark(pcori_hop_point_t pt)
{
	if (!hop.open || hop.t[pt])
		return;
	hop.t[pt] = stamp_now();
	if (pt != PCORI_HOP_COMMIT)
		return;
	hop.open = false;
	for (int i = 1; i < PCORI_HOP_NPOINTS; i++)
		if (hop.t[i] < hop.t[i - 1])
			return; /* a point was skipped: not a plain turn */
	if (hop.t[PCORI_HOP_COMMIT] - hop.t[PCORI_HOP_SEEN] > HOP_MAX_TICKS)
		return;
	for (int i = 1; i < PCORI_HOP_NPOINTS; i++)
		hop.sum[i] += hop.t[i] - hop.t[i - 1];
	hop.lock_sum += hop.locks;
	hop.hops++;
}

void pcori_hop_lock(void)
{
	hop.locks += hop.open;
}

void pcori_hop_report(void)
{
	if (!hop.tsc0)
		return;
	uint64_t ns = pcori_now_ns() - hop.ns0;
	uint64_t ticks = __rdtsc() - hop.tsc0;
	if (!ns || !ticks)
		return;
	double per_ns = (double)ticks / (double)ns;
	/* What one stamp costs, to read the stretches with. */
	volatile uint64_t sink = 0;
	uint64_t c0 = stamp_now();
	for (int i = 0; i < 1000; i++)
		sink += stamp_now();
	double stamp = (double)(stamp_now() - c0) / 1000.0 / per_ns;
	double h = hop.hops ? (double)hop.hops : 1.0;
	double tr = hop.transits ? (double)hop.transits : 1.0;
	fprintf(stderr,
		"hop-probe,pid %d,hops %llu,transit %.1f ns,seen->matched "
		"%.1f,->left %.1f,->returned %.1f,->send %.1f,->commit "
		"%.1f ns,locks %.2f,stamp %.1f ns\n",
		pcori_rt.pid, (unsigned long long)hop.hops,
		(double)hop.transit_sum / tr / per_ns,
		(double)hop.sum[PCORI_HOP_MATCHED] / h / per_ns,
		(double)hop.sum[PCORI_HOP_LEFT] / h / per_ns,
		(double)hop.sum[PCORI_HOP_RETURNED] / h / per_ns,
		(double)hop.sum[PCORI_HOP_SEND] / h / per_ns,
		(double)hop.sum[PCORI_HOP_COMMIT] / h / per_ns,
		(double)hop.lock_sum / h, stamp);
}

#endif
