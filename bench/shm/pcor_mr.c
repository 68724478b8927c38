/*
 * pcor_mr -- message rate of one pair, as osu_mbw_mr measures it with two
 * processes: windows of 64 (-w) messages of -m bytes (default 1) from
 * pid 0 to pid 1, each window acknowledged; messages per second.
 */
#include "shm_bench.h"

int main(int argc, char **argv)
{
	sb_args_t a = {.min = 1, .max = 1, .iters = 2000, .warmup = 200,
		       .window = 64};
	sb_parse(argc, argv, &a, "message rate, messages/s");
	sb_must(pcor_init(&argc, &argv), "init");
	int me = pcor_self_pid();
	if (pcor_nprocs() != 2) {
		fprintf(stderr, "pcor_mr: run with pcorrun -n 2\n");
		return 2;
	}
	char *sbuf = sb_buf(a.max), *rbuf = sb_buf(a.max);
	if (me == 0)
		sb_csv_header(&a);
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		double s = sb_window(me, size, a.window, a.iters, a.warmup,
				     sbuf, rbuf);
		if (me == 0)
			printf("rate,%s,%zu,%.0f,msg/s\n", a.label, size,
			       (double)a.window * a.iters / s);
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
