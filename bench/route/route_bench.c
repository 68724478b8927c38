/*
 * route_bench -- latency and bandwidth through a gateway, run by pcorrun
 * with three processes: 0 (A, net1), 1 (B, both nets), 2 (C, net2).
 *
 *   route_bench [--iters N] [--reps R] [--min S] [--max S] [--smoke]
 *
 * Measures, one pair at a time (the third process waits), A-B (net1,
 * direct), B-C (net2, direct) and A-C (through B), for sizes min..max in
 * steps of x8:
 *   latency    ping-pong, half the round trip, median of N
 *   bandwidth  windows of 8 messages then a zero-byte ack, median of R
 * Process 0 prints CSV: pair,hops,size,lat_us,bw_MBps (MB = 1e6 bytes).
 */
#include <pcor/pcor.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_PING 1
#define TAG_BW 2
#define TAG_ACK 3
#define TAG_GO 4
#define WINDOW 8

static int me;

#define OK(x)                                                                  \
	do {                                                                   \
		int rc_ = (x);                                                 \
		if (rc_ != PCOR_OK) {                                          \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, \
				#x, pcor_strerror(rc_));                       \
			exit(1);                                               \
		}                                                              \
	} while (0)

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void xsend(int pid, int tag, const void *b, size_t n)
{
	pcor_handle_t h;
	OK(pcor_send_copy(pid, 0, tag, b, n, &h));
	OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void xrecv(int pid, int tag, void *b, size_t n)
{
	pcor_handle_t h;
	OK(pcor_recv_copy(pid, 0, tag, b, n, NULL, &h));
	OK(pcor_handle_test(h, PCOR_BLOCK));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* x leads, y answers.  Returns x's medians (others return 0). */
static void measure(int x, int y, size_t size, int iters, int reps,
		    char *buf, double *lat_p, double *bw_p)
{
	int n = iters > reps ? iters : reps;
	double *t = malloc(sizeof(*t) * (size_t)n);
	if (!t)
		exit(1);
	/* A few untimed rounds warm up routes, buffers and caches. */
	for (int i = -3; i < iters; i++) {
		if (me == x) {
			double t0 = now_us();
			xsend(y, TAG_PING, buf, size);
			xrecv(y, TAG_PING, buf, size);
			if (i >= 0)
				t[i] = (now_us() - t0) / 2;
		} else {
			xrecv(x, TAG_PING, buf, size);
			xsend(x, TAG_PING, buf, size);
		}
	}
	if (me == x)
		*lat_p = median(t, iters);
	for (int r = -1; r < reps; r++) {
		if (me == x) {
			pcor_handle_t h[WINDOW];
			double t0 = now_us();
			for (int w = 0; w < WINDOW; w++)
				OK(pcor_send_copy(y, 0, TAG_BW, buf, size,
						  &h[w]));
			for (int w = 0; w < WINDOW; w++)
				OK(pcor_handle_test(h[w], PCOR_BLOCK));
			xrecv(y, TAG_ACK, NULL, 0);
			if (r >= 0)
				t[r] = (double)(size * WINDOW) /
				       (now_us() - t0); /* bytes/us = MB/s */
		} else {
			for (int w = 0; w < WINDOW; w++)
				xrecv(x, TAG_BW, buf, size);
			xsend(x, TAG_ACK, NULL, 0);
		}
	}
	if (me == x)
		*bw_p = median(t, reps);
	free(t);
}

int main(int argc, char **argv)
{
	int iters = 200, reps = 10;
	size_t min = 8, max = 16u << 20;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--min") && i + 1 < argc)
			min = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--max") && i + 1 < argc)
			max = (size_t)atol(argv[++i]);
		else if (!strcmp(argv[i], "--smoke")) {
			iters = 5;
			reps = 2;
			max = 64 << 10;
		}
	}
	if (iters < 1 || reps < 1 || !min || min > max) {
		fprintf(stderr, "route_bench: bad arguments\n");
		return 2;
	}
	OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	if (pcor_nprocs() != 3) {
		fprintf(stderr, "route_bench: needs 3 processes\n");
		return 2;
	}
	char *buf = malloc(max);
	if (!buf)
		return 1;
	memset(buf, 0x5a, max);
	/* Pairs by leader: A-B, B-C, A-C. */
	static const int pairs[3][3] = {{0, 1, 1}, {1, 2, 1}, {0, 2, 2}};
	static const char *names[] = {"A-B", "B-C", "A-C"};
	if (me == 0)
		printf("pair,hops,size,lat_us,bw_MBps\n");
	for (int p = 0; p < 3; p++) {
		int x = pairs[p][0], y = pairs[p][1];
		for (size_t s = min; s <= max; s *= 8) {
			double lat = 0, bw = 0;
			/* Bounded: tiny sizes get the full count, big fewer. */
			int it = s >= (1u << 20) ? (iters + 9) / 10 : iters;
			if (me == x || me == y)
				measure(x, y, s, it, reps, buf, &lat, &bw);
			/* The leader reports through process 0. */
			if (me == x && x != 0) {
				double v[2] = {lat, bw};
				xsend(0, TAG_GO, v, sizeof(v));
			} else if (me == 0 && x != 0) {
				double v[2];
				xrecv(x, TAG_GO, v, sizeof(v));
				lat = v[0];
				bw = v[1];
			}
			if (me == 0)
				printf("%s,%d,%zu,%.2f,%.4g\n", names[p],
				       pairs[p][2], s, lat, bw);
			fflush(stdout);
			/* Everyone moves on together. */
			if (me == 0) {
				xsend(1, TAG_GO, NULL, 0);
				xsend(2, TAG_GO, NULL, 0);
			} else {
				xrecv(0, TAG_GO, NULL, 0);
			}
		}
	}
	/*
	 * The gateway leaves last: C's last send to A completes only when
	 * A's ack came back through B, and only then does C tell B (over
	 * their own link) that it is done; A tells B too.
	 */
	if (me == 2) {
		xsend(0, TAG_ACK, NULL, 0);
		xsend(1, TAG_ACK, NULL, 0);
	} else if (me == 0) {
		xrecv(2, TAG_ACK, NULL, 0);
		xsend(1, TAG_ACK, NULL, 0);
	} else {
		xrecv(0, TAG_ACK, NULL, 0);
		xrecv(2, TAG_ACK, NULL, 0);
	}
	free(buf);
	OK(pcor_finalize());
	return 0;
}
