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
	char *sbuf, *rbuf;
	int me = sb_start(&argc, &argv, "pcor_mr", &a, &sbuf, &rbuf);
	for (size_t size = a.min;; size = size ? size * 2 : 1) {
		double s = sb_window(me, size, a.window, a.iters, a.warmup,
				     a.copy, sbuf, rbuf);
		if (me == 0)
			printf("rate,%s,%zu,%.0f,msg/s\n", a.label, size,
			       (double)a.window * a.iters / s);
		fflush(stdout);
		if (size >= a.max)
			break;
	}
	return sb_finish(me, sbuf, rbuf);
}
