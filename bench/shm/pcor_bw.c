/*
 * pcor_bw -- streaming bandwidth between two processes, as osu_bw
 * measures it: windows of 64 (-w) messages from pid 0 to pid 1, each
 * window acknowledged; MB/s (10^6 bytes per second) of payload.
 * Sends are pcor_send_dma from DMA memory (no copy on the send side, the
 * counterpart of MPI_Isend from a user buffer); receives pcor_recv_copy.
 */
#include "shm_bench.h"

int main(int argc, char **argv)
{
	sb_args_t a = {.min = 1, .max = 4 << 20, .iters = 100, .warmup = 10,
		       .window = 64};
	sb_parse(argc, argv, &a, "streaming bandwidth, MB/s");
	sb_must(pcor_init(&argc, &argv), "init");
	int me = pcor_self_pid();
	if (pcor_nprocs() != 2) {
		fprintf(stderr, "pcor_bw: run with pcorrun -n 2\n");
		return 2;
	}
	char *sbuf = sb_buf(a.max), *rbuf = sb_buf(a.max);
	if (me == 0)
		sb_csv_header(&a);
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		/* osu_bw: fewer rounds above 8 KiB. */
		long iters = size > 8192 ? (a.iters + 4) / 5 : a.iters;
		long warm = size > 8192 ? (a.warmup + 4) / 5 : a.warmup;
		double s = sb_window(me, size, a.window, iters, warm, sbuf,
				     rbuf);
		if (me == 0)
			printf("bw,%s,%zu,%.2f,MB/s\n", a.label, size,
			       (double)size * a.window * iters / s / 1e6);
		fflush(stdout);
		if (size >= a.max)
			break;
	}
	sb_barrier(me, 1);
	pcor_dma_free(sbuf);
	pcor_dma_free(rbuf);
	sb_must(pcor_finalize(), "finalize");
	return 0;
}
