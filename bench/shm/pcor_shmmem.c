/*
 * pcor_shmmem -- shared memory the pcor-shm port uses on a host, after
 * every process has exchanged small, medium (cells) and 60 KB messages
 * with every other (the scenario of Chai et al., Figure 6).
 *
 * Each process finds its own segment (the memfd named "pcor-shm-...")
 * among its descriptors and reports the bytes really allocated to it
 * (st_blocks) and its size (address space reserved); pid 0 prints
 *   shmmem,<label>,<P>,<allocated bytes>,<reserved bytes>
 * summed over the P processes.  Run with pcorrun -n P.
 */
#include "shm_bench.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

static void segment_usage(uint64_t out[2])
{
	out[0] = out[1] = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], link[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!strstr(link, "memfd:pcor-shm-"))
			continue;
		struct stat st;
		if (stat(path, &st) == 0) {
			out[0] += (uint64_t)st.st_blocks * 512;
			out[1] += (uint64_t)st.st_size;
		}
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	sb_args_t a = {.min = 0, .max = 0, .iters = 1, .warmup = 0,
		       .window = 1};
	sb_parse(argc, argv, &a, "pcor-shm memory per host, bytes");
	sb_must(pcor_init(&argc, &argv), "init");
	int me = pcor_self_pid(), np = pcor_nprocs();
	static const size_t sizes[] = {64, 9000, 60000};
	static const int counts[] = {64, 16, 4};
	char *buf = sb_buf(60000), *rbuf = sb_buf(60000);
	int per = 0;
	for (int k = 0; k < 3; k++)
		per += counts[k];
	pcor_handle_t *h = malloc(sizeof(*h) * (size_t)per * 2 * (size_t)np);
	if (!h)
		return 1;
	int n = 0;
	for (int q = 0; q < np; q++) {
		if (q == me)
			continue;
		for (int k = 0; k < 3; k++)
			for (int i = 0; i < counts[k]; i++) {
				sb_must(pcor_recv_copy(q, 0, 9, rbuf, 60000,
						       NULL, &h[n++]),
					"recv");
				sb_must(pcor_send_dma(q, 0, 9, buf, sizes[k], 0,
						      &h[n++]),
					"send");
			}
	}
	for (int i = 0; i < n; i++)
		sb_must(pcor_handle_test(h[i], PCOR_BLOCK), "wait");
	uint64_t use[2];
	segment_usage(use);
	if (me == 0) {
		uint64_t tot[2] = {use[0], use[1]};
		for (int q = 1; q < np; q++) {
			uint64_t u[2];
			pcor_handle_t r;
			sb_must(pcor_recv_copy(q, 0, 10, u, sizeof(u), NULL, &r),
				"recv usage");
			sb_must(pcor_handle_test(r, PCOR_BLOCK), "wait usage");
			tot[0] += u[0];
			tot[1] += u[1];
		}
		sb_csv_header(&a);
		printf("shmmem,%s,%d,%llu,%llu\n", a.label, np,
		       (unsigned long long)tot[0], (unsigned long long)tot[1]);
	} else {
		pcor_handle_t s;
		sb_must(pcor_send_copy(0, 0, 10, use, sizeof(use), &s), "send");
		sb_must(pcor_handle_test(s, PCOR_BLOCK), "wait");
	}
	free(h);
	pcor_dma_free(buf);
	pcor_dma_free(rbuf);
	sb_must(pcor_finalize(), "finalize");
	return 0;
}
