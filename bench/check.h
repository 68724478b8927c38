/*
 * check.h -- the paper-API calls the same-process benchmarks make,
 * checked: a failure says what failed, in pcor's words, and ends the run.
 * Define BENCH_NAME (the program's name) before including it.
 */
#ifndef PCOR_BENCH_CHECK_H
#define PCOR_BENCH_CHECK_H

#include "harness.h"

#include <pcor/pcor.h>
#include <stdio.h>
#include <stdlib.h>

static inline _Noreturn void die(const char *what, int rc)
{
	fprintf(stderr, BENCH_NAME ": %s: %s (%d)\n", what, pcor_strerror(rc),
		rc);
	exit(1);
}

/* A handle, or exit: a non-positive value is a status. */
static inline int hcheck(int h, const char *what)
{
	if (h <= 0)
		die(what, h);
	return h;
}

/* Wait for h to complete; anything but PCOR_OK ends the run. */
static inline void wait_ok(int h, const char *what)
{
	int rc = testHandle(h, PCOR_BLOCK);
	if (rc != PCOR_OK)
		die(what, rc);
}

/*
 * The paper's blocking ping-pong with recvCopy/sendCopy between this
 * thread (side 0 or 1) and thread peer of this process: side 0 sends
 * first and times the round trips with clk; every receive is posted
 * before its message.  Returns ns per round trip on side 0, else 0.
 */
static inline double copy_pingpong(int side, int peer, int tag, char *sbuf,
				   char *rbuf, int len, long total,
				   bh_clock_t clk)
{
	const int pid = pcor_self_pid();
	int r = 0;
	if (side == 1)
		r = hcheck(
		    recvCopy(pid, peer, tag, rbuf, len, NULL, NULL, NULL, NULL),
		    "recvCopy");
	for (long i = 0; i < total; i++) {
		if (side == 0) {
			bh_clock_tick(&clk);
			r = hcheck(recvCopy(pid, peer, tag, rbuf, len, NULL,
					    NULL, NULL, NULL),
				   "recvCopy");
			wait_ok(hcheck(sendCopy(pid, peer, tag, sbuf, len),
				       "sendCopy"),
				"sendCopy completion");
			wait_ok(r, "recvCopy completion");
		} else {
			wait_ok(r, "recvCopy completion");
			if (i + 1 < total)
				r = hcheck(recvCopy(pid, peer, tag, rbuf, len,
						    NULL, NULL, NULL, NULL),
					   "recvCopy");
			wait_ok(hcheck(sendCopy(pid, peer, tag, sbuf, len),
				       "sendCopy"),
				"sendCopy completion");
		}
	}
	return side == 0 ? bh_clock_end(&clk) : 0;
}

#endif
