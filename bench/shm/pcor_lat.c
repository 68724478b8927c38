/*
 * pcor_lat -- one-way latency between two processes, as osu_latency
 * measures it: pid 0 sends, pid 1 answers with as many bytes, and the
 * round trip over 2 is reported (microseconds).
 *
 * pid 0 prints, per size, the mean, then the median and the 99th
 * percentile of the single round trips, halved:
 *   latency,LABEL,SIZE,MEAN,us
 *   lat-p50,LABEL,SIZE,MEDIAN,us
 *   lat-p99,LABEL,SIZE,P99,us
 *   stalls,LABEL,SIZE,N,per-100k-round-trips
 *   stall-cost,LABEL,SIZE,NS,ns-one-way
 * The mean comes from a loop with no clock read inside (its length over
 * its iterations, as osu_latency times); the percentiles from a second
 * loop of as many round trips that reads the clock once per iteration
 * (a read costs about as much as 20 ns here, which would otherwise sit on
 * every round trip of the mean).  Stalls are the round trips of that loop
 * that took 20 us or more, and their cost what they add to its mean
 * beyond the median: where the mean and the median part.
 *
 * Each iteration is osu_latency's: pid 0 sends and waits for the send,
 * then posts its receive and waits; pid 1 posts, waits, then sends and
 * waits.  A receive is thus posted a round trip before its message is
 * due.  The send buffer is DMA memory (pcor_send_dma: no copy on the
 * send side, the equivalent of MPI_Send from a user buffer).
 *
 * pid 0 also prints its process's context switches (voluntary and not,
 * every thread) per round trip of the timed loops: a waiter that spins
 * and finds its message costs none, one that sleeps costs one, and a
 * dispatcher that wakes while a waiter spins shows up here too.
 */
#include "percentile.h"
#include "shm_bench.h"

#include <sys/resource.h>

static long ctx_switches(void)
{
	struct rusage u;
	if (getrusage(RUSAGE_SELF, &u))
		return 0;
	return u.ru_nvcsw + u.ru_nivcsw;
}

/* One osu_latency iteration: a round trip started by pid 0. */
static void round_trip(int me, size_t size, char *sbuf, char *rbuf)
{
	int peer = 1 - me;
	pcor_handle_t r, s;
	if (me == 0) {
		sb_must(pcor_send_dma(peer, 0, 2, sbuf, size, 0, &s), "send");
		sb_must(pcor_handle_test(s, PCOR_BLOCK), "wait send");
	}
	sb_must(pcor_recv_copy(peer, 0, 2, rbuf, size, NULL, &r), "recv");
	sb_must(pcor_handle_test(r, PCOR_BLOCK), "wait");
	if (me == 1) {
		sb_must(pcor_send_dma(peer, 0, 2, sbuf, size, 0, &s), "send");
		sb_must(pcor_handle_test(s, PCOR_BLOCK), "wait send");
	}
}

int main(int argc, char **argv)
{
	sb_args_t a = {.min = 0, .max = 4 << 20, .iters = 10000,
		       .warmup = 1000, .window = 1};
	sb_parse(argc, argv, &a, "one-way latency (RTT/2), us");
	char *sbuf, *rbuf;
	int me = sb_start(&argc, &argv, "pcor_lat", &a, &sbuf, &rbuf);
	/* Round trips of one size (sb_iters_for never gives more). */
	double *rtt = malloc(sizeof(*rtt) * (size_t)a.iters); /* ns */
	if (!rtt)
		sb_must(PCOR_ERR_NOMEM, "samples");
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		long iters = sb_iters_for(size, a.iters);
		long warm = sb_iters_for(size, a.warmup);
		sb_barrier(me, 1);
		for (long i = 0; i < warm; i++)
			round_trip(me, size, sbuf, rbuf);
		long cs0 = ctx_switches();
		int64_t t0 = sb_now_ns();
		for (long i = 0; i < iters; i++)
			round_trip(me, size, sbuf, rbuf);
		int64_t t1 = sb_now_ns();
		for (long i = 0; i < iters; i++) {
			int64_t t = me == 0 ? sb_now_ns() : 0;
			round_trip(me, size, sbuf, rbuf);
			if (me == 0)
				rtt[i] = (double)(sb_now_ns() - t);
		}
		long cs = ctx_switches() - cs0;
		if (me == 0) {
			printf("latency,%s,%zu,%.3f,us\n", a.label, size,
			       (double)(t1 - t0) / 1e3 / (2.0 * (double)iters));
			bench_round_trip_rows(a.label, size, rtt, iters, 1);
			printf("ctxsw,%s,%zu,%.4f,per-round-trip\n", a.label,
			       size, (double)cs / (2.0 * (double)iters));
		}
		fflush(stdout);
		if (size >= a.max)
			break;
	}
	free(rtt);
	return sb_finish(me, sbuf, rbuf);
}
