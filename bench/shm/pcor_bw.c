/*
 * pcor_bw -- streaming bandwidth between two processes, as osu_bw
 * measures it: windows of 64 (-w) messages from pid 0 to pid 1, each
 * window acknowledged; MB/s (10^6 bytes per second) of payload.
 * Sends are pcor_send_dma from DMA memory (no copy on the send side, the
 * counterpart of MPI_Isend from a user buffer), or pcor_send_copy with
 * -c; receives pcor_recv_copy.
 */
#include "shm_bench.h"

int main(int argc, char **argv)
{
	sb_args_t a = {.min = 1, .max = 4 << 20, .iters = 100, .warmup = 10,
		       .window = 64};
	sb_parse(argc, argv, &a, "streaming bandwidth, MB/s");
	char *sbuf, *rbuf;
	int me = sb_start(&argc, &argv, "pcor_bw", &a, &sbuf, &rbuf);
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		/* osu_bw: fewer rounds above 8 KiB. */
		long iters = size > 8192 ? (a.iters + 4) / 5 : a.iters;
		long warm = size > 8192 ? (a.warmup + 4) / 5 : a.warmup;
		double s = sb_window(me, size, a.window, iters, warm,
				     a.copy, sbuf, rbuf);
		if (me == 0)
			printf("bw,%s,%zu,%.2f,MB/s\n", a.label, size,
			       (double)size * a.window * iters / s / 1e6);
		fflush(stdout);
		if (size >= a.max)
			break;
	}
	return sb_finish(me, sbuf, rbuf);
}
