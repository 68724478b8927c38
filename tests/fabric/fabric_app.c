/*
 * fabric_app -- messaging between processes, run by pcorrun.
 *
 *   fabric_app sizes [max]      pid 0 <-> pid 1: every send/receive pair,
 *                               sizes 0 B .. max (default 64 MiB), posted
 *                               first and unexpected first, byte-exact;
 *                               truncation; wildcards; one 256 MiB message
 *   fabric_app order N          8 threads of pid 1 send N messages each to
 *                               pid 0; every sender's order is kept (with
 *                               PCOR_DROP_EVERY: at most 1.1 frames per
 *                               message, selective repeat)
 *   fabric_app alltoall T       T threads per process; every thread sends
 *                               to every thread of every process
 *   fabric_app flood N          pid 1 sends N messages to pid 0, which only
 *                               starts receiving once its message pool is
 *                               exhausted and it refused a message
 *   fabric_app kill             pid 1 dies during a large transfer; pid 0's
 *                               handles report PCOR_ERR_PEER_LOST
 *   fabric_app lostrecv-copy    pid 0 kills pid 1 while a rendezvous moves
 *   fabric_app lostrecv-dma     into its receive (recvCopy, recvDMA): after
 *                               the receive completes nothing writes into
 *                               its buffer, nor into a block of pcor's
 *                               the data landed in
 *   fabric_app lostrecv-bound   lostrecv-dma, the ports taken to return
 *                               every read: rxd's never come back, and the
 *                               receive completes a peer timeout later
 *   fabric_app finrecv          pid 0 leaves while a rendezvous moves into
 *                               its recvDMA: finalize frees it once
 *   fabric_app spawn            remote thread creation
 *   fabric_app mixed [ROUNDS]   one stream of fast, cell, multi-fragment
 *                               and rendezvous messages arrives in order
 *   fabric_app badhdr           pid 1 sends malformed headers to pid 0;
 *                               they are counted and dropped
 *   fabric_app stall            (PCOR_DROP_EVERY=1) a send nothing ever
 *                               acknowledges fails with UNREACHABLE once
 *                               the data path's resend bound is reached
 *   fabric_app lastack N        pid 0 takes 8 x N messages and leaves at
 *                               once: on a lossy fabric pid 1's sends all
 *                               still complete OK (final acks in the BYE)
 *   fabric_app fast             small sends complete at once on lossless
 *                               ports; a ping-pong costs a frame per
 *                               message and an ack per 64
 *   fabric_app fastgap          (lossless ports) a fast message of pid 1
 *                               never arrives; pid 0's receive behind the
 *                               gap fails with PCOR_ERR_PEER_LOST after
 *                               four stall bounds, instead of hanging
 *
 * Each process prints "<case>: ok" when every check held.
 */
#include "harness.h"
#include "member_wait.h"
#include "dispatch/dispatch.h"
#include "frag/proto.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_NOTE 2
#define TAG_READY 3
#define KiB 1024u
#define MiB (1024u * 1024u)

static int me, np;

/* ------------------------------------------------------------ helpers */

static void send_wait(int pid, int thid, int tag, const void *b, size_t n)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(pid, thid, tag, b, n, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

/*
 * send_wait where the receiver's pool may be full: a message for a
 * thread that has not posted its receive yet needs a block of that pool,
 * and while other processes flood it PCOR_ERR_AGAIN is back-pressure, not
 * a failure.  Retried for 60 s at most.
 */
static void send_wait_again(int pid, int thid, int tag, const void *b,
			    size_t n)
{
	pcor_handle_t h;
	uint64_t end = pcori_now_ns() + 60000000000ull;
	int rc;
	while ((rc = pcor_send_copy(pid, thid, tag, b, n, &h)) ==
		   PCOR_ERR_AGAIN &&
	       pcori_now_ns() < end)
		sched_yield();
	CHECK_OK(rc);
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void recv_wait(int pid, int thid, int tag, void *b, size_t n)
{
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(pid, thid, tag, b, n, NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

/* A zero-byte message as a signal between the two processes. */
static void note(int pid, int tag)
{
	send_wait(pid, 0, tag, NULL, 0);
}
static void await(int pid, int tag)
{
	recv_wait(pid, 0, tag, NULL, 0);
}
/* A thread of this process waits for a go from any local thread. */
static void await_local(void)
{
	recv_wait(me, PCOR_ANY_THID, TAG_NOTE, NULL, 0);
}

/*
 * pid 1's side of a large transfer: n bytes of DMA memory (the first
 * filled bytes patterned with seed) go to pid 0 once it says it is
 * ready.  Returns the buffer; the send is *h_p.
 */
static void *big_send_start(size_t n, size_t filled, uint64_t seed,
			    pcor_handle_t *h_p)
{
	void *d;
	CHECK_OK(pcor_dma_alloc(n, &d));
	th_fill(d, filled, seed);
	await(0, TAG_READY);
	CHECK_OK(pcor_send_dma(0, 0, TAG_DATA, d, n, 0, h_p));
	return d;
}

enum how { COPY, DMA, HANDOVER };

/*
 * Sender side of one transfer.  A sendDMA completes only once the data
 * was taken, so the caller may have to tell the receiver before waiting:
 * this starts the send; send_end waits for it.
 */
static void *send_dma_buf;
static pcor_handle_t send_start(enum how how, size_t n, uint64_t seed,
				uint8_t *copybuf)
{
	pcor_handle_t h;
	send_dma_buf = NULL;
	if (how == COPY) {
		th_fill(copybuf, n, seed);
		/*
		 * The send budget holds one copy this large at a time: on a
		 * loaded machine the last one may not be acknowledged within
		 * the back-pressure wait (PCOR_ERR_AGAIN).  Retry, bounded.
		 */
		int rc;
		for (int t = 0; t < 60; t++)
			if ((rc = pcor_send_copy(1 - me, 0, TAG_DATA, copybuf,
						 n, &h)) != PCOR_ERR_AGAIN)
				break;
		CHECK_OK(rc);
	} else {
		CHECK_OK(pcor_dma_alloc(n, &send_dma_buf));
		th_fill(send_dma_buf, n, seed);
		CHECK_OK(pcor_send_dma(1 - me, 0, TAG_DATA, send_dma_buf, n,
				       how == HANDOVER ? PCOR_SEND_HANDOVER : 0,
				       &h));
		if (how == HANDOVER)
			send_dma_buf = NULL; /* pcor's now */
	}
	return h;
}

static void send_end(pcor_handle_t h)
{
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK_OK(pcor_dma_free(send_dma_buf));
}

/* Receiver side: post (copy into cap bytes, or DMA), return the handle. */
static pcor_handle_t post_one(bool dma, uint8_t *buf, size_t cap,
			      void **dma_p, pcor_msginfo_t *info)
{
	pcor_handle_t h;
	if (dma)
		CHECK_OK(pcor_recv_dma(PCOR_ANY_PID, PCOR_ANY_THID, TAG_DATA,
				       dma_p, info, &h));
	else
		CHECK_OK(pcor_recv_copy(1 - me, 0, TAG_DATA, buf, cap, info,
					&h));
	return h;
}

static void check_one(pcor_handle_t h, bool dma, uint8_t *buf, size_t cap,
		      void **dma_p, pcor_msginfo_t *info, size_t n,
		      uint64_t seed)
{
	int want = !dma && n > cap ? PCOR_ERR_TRUNCATE : PCOR_OK;
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), want);
	CHECK(info->pid == 1 - me && info->thid == 0 && info->tag == TAG_DATA);
	CHECK(info->size == n);
	if (dma) {
		CHECK(n == 0 ? *dma_p == NULL : *dma_p != NULL);
		CHECK_PATTERN(*dma_p, n, seed);
		CHECK_OK(pcor_dma_free(*dma_p));
	} else {
		CHECK_PATTERN(buf, PCORI_MIN(n, cap), seed);
	}
}

/* ------------------------------------------------------------- sizes */

/*
 * Both processes walk the same list.  Posted first: the receiver posts,
 * then tells the sender to go.  Unexpected first: the sender sends, then
 * says so on another tag; from one thread the data is in place first.
 */
static void transfer_(enum how how, bool rdma, size_t n, size_t cap,
		      bool posted_first, uint64_t seed, uint8_t *a, uint8_t *b);

/* FABRIC_VERBOSE=1 prints each transfer's time (to find slow paths). */
static void transfer(enum how how, bool rdma, size_t n, size_t cap,
		     bool posted_first, uint64_t seed, uint8_t *a, uint8_t *b)
{
	static int verbose = -1;
	if (verbose < 0)
		verbose = getenv("FABRIC_VERBOSE") != NULL;
	uint64_t t0 = verbose ? pcori_now_ns() : 0;
	transfer_(how, rdma, n, cap, posted_first, seed, a, b);
	if (verbose)
		fprintf(stderr, "[%d] transfer %llu: how %d dma-recv %d size %zu "
				"%s: %.3f ms\n",
			me, (unsigned long long)seed, how, rdma, n,
			posted_first ? "posted" : "unexpected",
			(double)(pcori_now_ns() - t0) / 1e6);
}

/*
 * Bytes past the capacity of a truncated receive that must stay as they
 * were (the buffers of run_sizes have room for them).
 */
#define GUARD_BYTES 4096
#define GUARD_BYTE 0xa5

static void transfer_(enum how how, bool rdma, size_t n, size_t cap,
		      bool posted_first, uint64_t seed, uint8_t *a, uint8_t *b)
{
	int other = 1 - me;
	if (me == 1) { /* sender */
		if (posted_first)
			await(other, TAG_READY);
		pcor_handle_t h = send_start(how, n, seed, a);
		if (!posted_first)
			note(other, TAG_NOTE);
		send_end(h);
		return;
	}
	void *d = NULL;
	pcor_msginfo_t info;
	pcor_handle_t h;
	bool guard = !rdma && n > cap;
	if (guard)
		memset(b + cap, GUARD_BYTE, GUARD_BYTES);
	if (posted_first) {
		h = post_one(rdma, b, cap, &d, &info);
		note(other, TAG_READY);
	} else {
		await(other, TAG_NOTE);
		h = post_one(rdma, b, cap, &d, &info);
	}
	check_one(h, rdma, b, cap, &d, &info, n, seed);
	for (size_t i = 0; guard && i < GUARD_BYTES; i++)
		if (b[cap + i] != GUARD_BYTE) {
			fprintf(stderr, "[%d] truncated receive of %zu into %zu "
				"wrote byte %zu past the capacity\n",
				me, n, cap, i);
			CHECK(!"a truncated receive wrote past its buffer");
		}
}

static int run_sizes(size_t max)
{
	static const size_t base[] = {0, 1, 63, 64, 65, 4095, 4096, 65535,
				      65536, 65537};
	size_t sizes[64];
	int ns = 0;
	for (size_t i = 0; i < PCORI_ARRAY_LEN(base); i++)
		sizes[ns++] = base[i];
	for (size_t s = 256 * KiB; s <= max; s *= 4) {
		sizes[ns++] = s - 1;
		sizes[ns++] = s + 1;
	}
	sizes[ns++] = max;
	/* Room for the truncation cases below too, and their guards. */
	size_t room = PCORI_MAX(max + 1, 3 * MiB);
	PCORI_ASSERT(MiB + GUARD_BYTES <= room);
	uint8_t *a = malloc(room), *b = malloc(room);
	CHECK(a && b);
	uint64_t seed = 1;
	if (me > 1)
		goto done;
	for (int how = COPY; how <= HANDOVER; how++)
		for (int rdma = 0; rdma < 2; rdma++)
			for (int i = 0; i < ns; i++)
				for (int pf = 0; pf < 2; pf++)
					transfer(how, rdma, sizes[i], max + 1,
						 pf, seed++, a, b);
	/* Truncation, eager and rendezvous: what fits, then the status. */
	transfer(COPY, false, 5000, 100, true, seed++, a, b);
	transfer(COPY, false, 3 * MiB, MiB, false, seed++, a, b);
	/* The receiver may name the sender or use wildcards: done above. */
	free(a);
	free(b);
	/* One very large message (256 MiB) when the sweep goes to 64 MiB. */
	if (max >= 64 * MiB) {
		size_t big = 256 * MiB;
		if (me == 1) {
			pcor_handle_t h;
			void *d = big_send_start(big, big, 77, &h);
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK_OK(pcor_dma_free(d));
		} else {
			uint8_t *r = malloc(big);
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK(r);
			CHECK_OK(pcor_recv_copy(1, 0, TAG_DATA, r, big, &info,
						&h));
			note(1, TAG_READY);
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == big);
			CHECK_PATTERN(r, big, 77);
			free(r);
		}
	}
	return 0;
done:
	free(a);
	free(b);
	return 0;
}

/* ------------------------------------------------------------- order */

#define ORDER_SENDERS 8
static int order_n;

static void *order_sender(void *arg)
{
	int k = (int)(intptr_t)arg;
	uint32_t msg[2];
	pcor_handle_t *hs = malloc(sizeof(*hs) * (size_t)order_n);
	CHECK(hs);
	for (int i = 0; i < order_n; i++) {
		msg[0] = (uint32_t)k;
		msg[1] = (uint32_t)i;
		CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, msg, sizeof(msg),
					&hs[i]));
	}
	for (int i = 0; i < order_n; i++)
		CHECK_OK(pcor_handle_test(hs[i], PCOR_BLOCK));
	free(hs);
	return NULL;
}

static int run_order(int n)
{
	order_n = n;
	if (me == 1) {
		int t[ORDER_SENDERS];
		for (int k = 0; k < ORDER_SENDERS; k++)
			CHECK_OK(pcor_thread_create(order_sender,
						    (void *)(intptr_t)k, &t[k]));
		for (int k = 0; k < ORDER_SENDERS; k++)
			CHECK_OK(pcor_thread_join(t[k], NULL));
		/*
		 * Lossy (PCOR_DROP_EVERY): loss costs what was lost -- only
		 * the missing messages go again, not everything after them.
		 */
		int drop = pcori_rt.cfg.drop_every;
		if (drop >= 20) {
			uint64_t tx = pcori_port_tx_frames(pcori_net.ports[0]);
			uint64_t msgs = (uint64_t)n * ORDER_SENDERS;
			printf("order: %llu frames for %llu messages, 1 in %d "
			       "lost (%.3fx)\n",
			       (unsigned long long)tx, (unsigned long long)msgs,
			       drop, (double)tx / (double)msgs);
			CHECK(tx <= msgs + msgs / 10 + 64);
		}
	} else if (me == 0) {
		uint32_t next[ORDER_SENDERS] = {0};
		int thid_of[ORDER_SENDERS];
		for (int k = 0; k < ORDER_SENDERS; k++)
			thid_of[k] = -1;
		for (int i = 0; i < n * ORDER_SENDERS; i++) {
			uint32_t msg[2];
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
						PCOR_ANY_TAG, msg, sizeof(msg),
						&info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.pid == 1 && info.size == sizeof(msg));
			CHECK(msg[0] < ORDER_SENDERS);
			/* One sender thread per k, in order. */
			if (thid_of[msg[0]] < 0)
				thid_of[msg[0]] = info.thid;
			CHECK(thid_of[msg[0]] == info.thid);
			CHECK(msg[1] == next[msg[0]]);
			next[msg[0]]++;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ mixed */

/*
 * One stream that mixes every way a message travels: fast frames (0 to a
 * few bytes), messages through cells (above a ring's inline size),
 * several fragments, rendezvous -- a round of them in flight at once,
 * some with sendDMA.  The receiver takes them with one tag in order and
 * checks each one's size and every byte: nothing overtakes, nothing is
 * torn.
 */
static const size_t mixed_sizes[] = {
	0, 8, 31, 32, 1000, 9000, 32 * KiB, 64 * KiB, 70 * KiB,
	8, 300 * KiB, 1, 3 * MiB,
};
#define MIXED_N (sizeof(mixed_sizes) / sizeof(mixed_sizes[0]))
_Static_assert(MIXED_N % 3 != 0, "each size must meet both send kinds");

static uint8_t mixed_byte(int i, size_t k)
{
	return (uint8_t)(i * 131 + k * 7 + (k >> 8));
}

static int run_mixed(int rounds)
{
	size_t max = 3 * MiB;
	int total = rounds * (int)MIXED_N;
	if (me == 1) {
		/*
		 * A round's messages are all in flight together, so the ones
		 * sent from DMA memory each have their own place in it.
		 */
		size_t at[MIXED_N], dma_bytes = 0;
		for (size_t j = 0; j < MIXED_N; j++) {
			at[j] = dma_bytes;
			dma_bytes += mixed_sizes[j];
		}
		uint8_t *d;
		CHECK_OK(pcor_dma_alloc(dma_bytes, (void **)&d));
		uint8_t *b = malloc(max);
		CHECK(b);
		pcor_handle_t h[MIXED_N];
		for (int i = 0; i < total; i++) {
			size_t j = (size_t)i % MIXED_N;
			size_t n = mixed_sizes[j];
			/*
			 * Every third one from DMA memory, without a copy:
			 * MIXED_N is no multiple of 3, so each size goes
			 * both ways over the rounds.
			 */
			uint8_t *src = i % 3 == 2 ? d + at[j] : b;
			for (size_t k = 0; k < n; k++)
				src[k] = mixed_byte(i, k);
			if (src != b)
				CHECK_OK(pcor_send_dma(0, 0, TAG_DATA, src, n,
						       0, &h[j]));
			else
				CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, b, n,
							&h[j]));
			if (j + 1 < MIXED_N)
				continue;
			for (size_t w = 0; w < MIXED_N; w++)
				CHECK_OK(pcor_handle_test(h[w], PCOR_BLOCK));
		}
		free(b);
		CHECK_OK(pcor_dma_free(d));
	} else if (me == 0) {
		uint8_t *b = malloc(max + 64);
		CHECK(b);
		for (int i = 0; i < total; i++) {
			size_t n = mixed_sizes[i % MIXED_N];
			memset(b, 0xee, max + 64);
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK_OK(pcor_recv_copy(1, PCOR_ANY_THID, TAG_DATA, b,
						max, &info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == n);
			for (size_t k = 0; k < n; k++)
				if (b[k] != mixed_byte(i, k)) {
					fprintf(stderr,
						"message %d byte %zu: %02x\n",
						i, k, b[k]);
					CHECK(0);
				}
			/* Nothing written past the message. */
			CHECK(b[n] == 0xee && b[max] == 0xee);
		}
		free(b);
	}
	return 0;
}

/* ---------------------------------------------------------- alltoall */

static int a2a_t;
static int *a2a_thids; /* [pid * T + k]: the thread id of every thread */

static void *a2a_thread(void *arg)
{
	int k = (int)(intptr_t)arg;
	int total = np * a2a_t;
	/* Wait until main has every process's thread ids. */
	await_local();
	uint32_t (*in)[3] = calloc((size_t)total, sizeof(*in));
	pcor_handle_t *rh = malloc(sizeof(*rh) * (size_t)total);
	pcor_handle_t *sh = malloc(sizeof(*sh) * (size_t)total);
	char *seen = calloc((size_t)total, 1);
	CHECK(in && rh && sh && seen);
	for (int i = 0; i < total; i++)
		CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, TAG_DATA,
					in[i], sizeof(in[i]), NULL, &rh[i]));
	for (int i = 0; i < total; i++) {
		int dst = (me * a2a_t + k + i) % total; /* spread the load */
		uint32_t msg[3] = {(uint32_t)me, (uint32_t)k, (uint32_t)dst};
		int rc;
		/* A full receiver pool is back-pressure: retry, never lose. */
		for (int t = 0; t < 100000; t++)
			if ((rc = pcor_send_copy(dst / a2a_t, a2a_thids[dst],
						 TAG_DATA, msg, sizeof(msg),
						 &sh[i])) != PCOR_ERR_AGAIN)
				break;
		CHECK_OK(rc);
	}
	for (int i = 0; i < total; i++)
		CHECK_OK(pcor_handle_test(sh[i], PCOR_BLOCK));
	for (int i = 0; i < total; i++) {
		CHECK_OK(pcor_handle_test(rh[i], PCOR_BLOCK));
		CHECK(in[i][0] < (uint32_t)np && in[i][1] < (uint32_t)a2a_t);
		int src = (int)(in[i][0] * (uint32_t)a2a_t + in[i][1]);
		CHECK((int)in[i][2] == me * a2a_t + k);
		CHECK(!seen[src]);
		seen[src] = 1;
	}
	free(seen);
	free(in);
	free(rh);
	free(sh);
	return NULL;
}

static int run_alltoall(int t)
{
	a2a_t = t;
	a2a_thids = malloc(sizeof(int) * (size_t)(np * t));
	CHECK(a2a_thids);
	int *mine = &a2a_thids[me * t];
	for (int k = 0; k < t; k++)
		CHECK_OK(pcor_thread_create(a2a_thread, (void *)(intptr_t)k,
					    &mine[k]));
	/* Exchange the thread tables between the main threads. */
	/*
	 * The others' threads may be sending to ours already, filling our
	 * pool with messages for receives not posted yet (and theirs).
	 */
	for (int p = 0; p < np; p++)
		if (p != me)
			send_wait_again(p, 0, TAG_READY, mine,
					sizeof(int) * (size_t)t);
	for (int p = 0; p < np; p++)
		if (p != me)
			recv_wait(p, 0, TAG_READY, &a2a_thids[p * t],
				  sizeof(int) * (size_t)t);
	for (int k = 0; k < t; k++)
		send_wait_again(me, mine[k], TAG_NOTE, NULL, 0);
	for (int k = 0; k < t; k++)
		CHECK_OK(pcor_thread_join(mine[k], NULL));
	free(a2a_thids);
	return 0;
}

/* ------------------------------------------------------------- flood */

/*
 * pid 1 sends n messages without waiting; pid 0 receives nothing until
 * its pool of message control blocks is full (so it must refuse, and
 * pid 1 must resend), then takes them all: each once, in order.
 */
/* One counter of the ports' stats, summed over this process's ports. */
#define PORTS_STAT(field) ports_stat(offsetof(pcori_port_stats_t, field))
static uint64_t ports_stat(size_t off)
{
	uint64_t n = 0;
	for (int i = 0; i < pcori_net.nports; i++)
		n += atomic_load_explicit(
		    (_Atomic uint64_t *)((char *)&pcori_net.ports[i]->st + off),
		    memory_order_relaxed);
	return n;
}

/*
 * Times this process held a sender back: refusals (NACKs), and on a
 * lossless port fast messages left in the channel until there was room.
 */
static uint64_t held_back(void)
{
	return PORTS_STAT(nack_sent) + PORTS_STAT(parked);
}

static int run_flood(int n)
{
	if (me == 1) {
		pcor_handle_t *hs = malloc(sizeof(*hs) * (size_t)n);
		CHECK(hs);
		for (int i = 0; i < n; i++) {
			uint32_t v = (uint32_t)i;
			CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, &v, sizeof(v),
						&hs[i]));
		}
		for (int i = 0; i < n; i++)
			CHECK_OK(pcor_handle_test(hs[i], PCOR_BLOCK));
		free(hs);
	} else if (me == 0) {
		/* Bounded wait for the pool to fill (dispatchers fill it). */
		uint64_t end = pcori_now_ns() + 60000000000ull;
		while (pcori_mcb_pool_avail(&pcori_msg.pool) > 0 &&
		       pcori_now_ns() < end)
			sched_yield();
		CHECK(pcori_mcb_pool_avail(&pcori_msg.pool) == 0);
		/*
		 * And for the sender to be held back (a refusal, or a fast
		 * message left waiting in a lossless channel): the pool may
		 * run dry just as the sender pauses; starting to take
		 * messages then would race with what the test is about.
		 */
		while (held_back() == 0 && pcori_now_ns() < end)
			sched_yield();
		CHECK(held_back() > 0);
		for (int i = 0; i < n; i++) {
			uint32_t v = ~0u;
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK_OK(pcor_recv_copy(1, 0, TAG_DATA, &v, sizeof(v),
						&info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.size == sizeof(v));
			CHECK(v == (uint32_t)i);
		}
		/* Memory stayed within the pool: it never went below empty. */
		CHECK(pcori_mcb_pool_avail(&pcori_msg.pool) <=
		      pcori_msg.pool.cap);
	}
	return 0;
}

/* -------------------------------------------------------------- kill */

/* pid 1 starts sending 256 MiB and dies while pid 0 takes it. */
static int run_kill(void)
{
	size_t big = 256 * MiB;
	if (me == 1) {
		pcor_handle_t h;
		big_send_start(big, MiB, 5, &h);
		/* Die with the transfer under way (pid 0 asked for it). */
		await(0, TAG_NOTE);
		/* run.sh checks that nothing named after us outlives us. */
		printf("kill: os pid %d\n", (int)getpid());
		fflush(stdout);
		kill(getpid(), SIGKILL);
		return 1;
	}
	if (me != 0)
		return 0;
	uint8_t *r = malloc(big);
	pcor_handle_t h, hr, hs;
	CHECK(r);
	CHECK_OK(pcor_recv_copy(1, 0, TAG_DATA, r, big, NULL, &h));
	/*
	 * The go and the order to die travel together, so the sender dies
	 * right after announcing the data, long before 256 MiB can move.
	 */
	CHECK_OK(pcor_send_copy(1, 0, TAG_READY, NULL, 0, &hr));
	/*
	 * The clock starts when the order to die leaves, which is before
	 * the fault: what is measured bounds the detection time from above.
	 */
	uint64_t t_fault = pcori_now_ns();
	CHECK_OK(pcor_send_copy(1, 0, TAG_NOTE, NULL, 0, &hs));
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	uint64_t t_lost = pcori_now_ns();
	printf("kill: PEER_LOST %.1f ms after the order to die\n",
	       (double)(t_lost - t_fault) / 1e6);
	/*
	 * A killed process's sockets close at once: detection is bounded by
	 * the peer timeout's default (2 s; sanitizer builds get 5x).
	 */
	CHECK(t_lost - t_fault < (getenv("FABRIC_SLOW") ? 10 : 2) * 1000000000ull);
	/* Both notes were taken; their acks may have died with it. */
	int nrc = pcor_handle_test(hr, PCOR_BLOCK);
	CHECK(nrc == PCOR_OK || nrc == PCOR_ERR_PEER_LOST);
	nrc = pcor_handle_test(hs, PCOR_BLOCK);
	CHECK(nrc == PCOR_OK || nrc == PCOR_ERR_PEER_LOST);
	/* Sends to it and receives naming it now fail at once. */
	uint64_t t0 = pcori_now_ns();
	int rc = pcor_send_copy(1, 0, TAG_DATA, "x", 1, &hs);
	CHECK(rc == PCOR_ERR_PEER_LOST ||
	      (rc == PCOR_OK &&
	       pcor_handle_test(hs, PCOR_BLOCK) == PCOR_ERR_PEER_LOST));
	CHECK_OK(pcor_recv_copy(1, 0, TAG_DATA, r, 1, NULL, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	CHECK(pcori_now_ns() - t0 < 5000000000ull);
	free(r);
	return 0;
}

/* ---------------------------------------------------------- lostrecv */

/*
 * A receive whose sender is killed while the data moves.  pid 0 waits
 * until data lands, stops its ports (it holds their progress locks: what
 * arrives stays with the provider and the kernel), waits until the
 * kernel holds data for it not yet taken in, kills pid 1 and waits
 * until pcor has handled the loss.  Once the receive has completed, the
 * application reuses its buffer at once (fills it), and it must stay as
 * filled while the ports run dry.  Where the data landed in a block of
 * pcor's (recvDMA, or a recvCopy on a port whose reads may never come
 * back), that block must not be reused while the provider may still
 * write into it: a block allocated then is filled and checked the same
 * way.  The checks read, not fault: a provider that receives with
 * recv() into the buffer would only see EFAULT on a protected page.
 */
#define LOST_SIZE   (256 * MiB)
#define LOST_FILLED (16 * MiB)
#define LOST_SEED   91
#define LOST_POISON 0xa5

static uint64_t secs(int s)
{
	return (uint64_t)(getenv("FABRIC_SLOW") ? 5 * s : s) * 1000000000u;
}

/*
 * Where the data of the rendezvous from pid 1 lands: the receive's
 * buffer, or a block of pcor's (recvDMA; a recvCopy's on a port whose
 * reads may never come back); NULL before it has started.
 */
static const uint8_t *rndv_dst(void)
{
	pcori_peer_t *peer = pcori_peer_get(1);
	const uint8_t *dst = NULL;
	pcori_rndv_t *v, *tmp;
	CHECK(peer);
	pcori_lock(&peer->rx_lock);
	HASH_ITER(hh, peer->rndv, v, tmp)
	{
		dst = v->dst;
	}
	pcori_unlock(&peer->rx_lock);
	return dst;
}

/*
 * Has some of the data landed?  One word a page, compared with the
 * sender's pattern.  It reads while the fabric writes, on purpose: a
 * probe, whose answer only says when to stop the ports.
 */
__attribute__((no_sanitize("thread"))) static bool
landed(const volatile uint8_t *b, size_t n)
{
	for (size_t off = 0; off + 8 <= n; off += 4096) {
		uint64_t w = th_pattern_word(LOST_SEED, off / 8);
		int k = 0;
		while (k < 8 && b[off + (size_t)k] == (uint8_t)(w >> (8 * k)))
			k++;
		if (k == 8)
			return true;
	}
	return false;
}

/* Where the rendezvous lands, once its first bytes are in (bounded). */
static const uint8_t *await_landing(void)
{
	const uint8_t *dst = NULL;
	uint64_t end = pcori_now_ns() + secs(30);
	for (long i = 0; !dst || !landed(dst, LOST_FILLED); i++) {
		CHECK(pcori_now_ns() < end && i < 100000000);
		if (!dst)
			dst = rndv_dst();
		sched_yield();
	}
	return dst;
}

/* Is ino one of the socket inodes in ours[0..n)? */
static bool ino_in(unsigned long ino, const unsigned long *ours, int n)
{
	for (int i = 0; i < n; i++)
		if (ours[i] == ino)
			return true;
	return false;
}

/*
 * Bytes the kernel holds, not yet read, for this process's TCP and UDP
 * sockets: /proc/net lists every socket with its receive queue and
 * inode, and ours are the inodes our descriptors name.
 */
static long unread_bytes(void)
{
	unsigned long ours[256];
	int n = 0;
	char path[64], link[64];
	for (int fd = 0; fd < 1024 && n < (int)PCORI_ARRAY_LEN(ours); fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = 0;
		if (sscanf(link, "socket:[%lu]", &ours[n]) == 1)
			n++;
	}
	static const char *const tabs[] = {"/proc/net/tcp", "/proc/net/tcp6",
					   "/proc/net/udp", "/proc/net/udp6"};
	long total = 0;
	for (size_t t = 0; t < PCORI_ARRAY_LEN(tabs); t++) {
		FILE *f = fopen(tabs[t], "r");
		char line[512];
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long txq, rxq, ino;
			/* sl local rem st tx:rx tr:when retr uid tmo inode */
			if (sscanf(line,
				   " %*d: %*s %*s %*x %lx:%lx %*x:%*x %*x %*u "
				   "%*u %lu",
				   &txq, &rxq, &ino) == 3 &&
			    ino_in(ino, ours, n))
				total += (long)rxq;
		}
		fclose(f);
	}
	return total;
}

/* Poll every port once (their progress locks are ours). */
static int ports_progress(void)
{
	int n = 0;
	for (int i = 0; i < pcori_net.nports; i++)
		n += pcori_net.ports[i]->ops->progress(pcori_net.ports[i], 0);
	return n;
}

/* Poll until the providers have nothing left to hand up. */
static void ports_drain(void)
{
	uint64_t end = pcori_now_ns() + secs(5);
	int quiet = 0;
	for (long i = 0; quiet < 500 && i < 10000000; i++) {
		quiet = ports_progress() ? 0 : quiet + 1;
		CHECK(pcori_now_ns() < end);
	}
	CHECK(quiet >= 500);
}

/* Reuse len bytes at b (fill them); filled_still says if they stayed. */
static void fill(void *b, size_t len)
{
	memset(b, LOST_POISON, len);
}
static bool filled_still(const void *b, size_t len)
{
	uint64_t w;
	memset(&w, LOST_POISON, sizeof(w));
	for (size_t i = 0; i + sizeof(w) <= len; i += sizeof(w))
		if (memcmp((const uint8_t *)b + i, &w, sizeof(w)))
			return false;
	return true;
}

static int run_lostrecv(const char *name)
{
	bool dma = strcmp(name, "lostrecv-copy") != 0;
	/*
	 * bound: the ports say their reads come back, whatever the provider
	 * does (white box): over rxd, whose reads from a dead process never
	 * do, the receive must complete at the bound, a peer timeout after
	 * the loss, without its block.
	 */
	bool bound = !strcmp(name, "lostrecv-bound");
	if (me == 1) {
		int ospid = (int)getpid();
		/* run.sh checks that nothing named after us outlives us. */
		printf("%s: os pid %d\n", name, ospid);
		fflush(stdout);
		send_wait(0, 0, TAG_NOTE, &ospid, sizeof(ospid));
		pcor_handle_t h;
		big_send_start(LOST_SIZE, LOST_FILLED, LOST_SEED, &h);
		/* pid 0 kills us while it takes the data. */
		pcor_handle_test(h, PCOR_BLOCK);
		CHECK(!"pid 0 was to kill this process");
	}
	if (me != 0)
		return 0;
	th_watch_failure(1);
	for (int i = 0; bound && i < pcori_net.nports; i++)
		pcori_net.ports[i]->reads_may_hang = false;
	int ospid;
	recv_wait(1, 0, TAG_NOTE, &ospid, sizeof(ospid));
	uint8_t *buf = mmap(NULL, LOST_SIZE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED);

	pcor_handle_t h;
	pcor_msginfo_t info;
	void *block = buf; /* recvDMA: must come back NULL */
	if (dma)
		CHECK_OK(pcor_recv_dma(1, 0, TAG_DATA, &block, &info, &h));
	else
		CHECK_OK(
		    pcor_recv_copy(1, 0, TAG_DATA, buf, LOST_SIZE, &info, &h));
	note(1, TAG_READY);
	const uint8_t *dst = await_landing();
	for (int i = 0; i < pcori_net.nports; i++)
		pcori_lock(&pcori_net.ports[i]->progress_lock);
	/* 256 MiB cannot have moved yet; if it had, nothing is tested. */
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	/*
	 * The sender still sends (or sends again what we have not
	 * acknowledged): die once some of it waits in our sockets.
	 */
	long unread = 0;
	uint64_t end = pcori_now_ns() + secs(5);
	for (long i = 0;
	     !(unread = unread_bytes()) && i < 1000000 && pcori_now_ns() < end;
	     i++)
		sched_yield();
	uint64_t t_kill = pcori_now_ns();
	CHECK(kill(ospid, SIGKILL) == 0);
	th_await_failure((long)(secs(10) / 1000000000u));

	/*
	 * A receive whose reads are still with the provider waits for them
	 * (a recvDMA at most a peer timeout): let the ports run, ours still.
	 */
	int rc;
	bool at_once = true;
	end = pcori_now_ns() + secs(20);
	for (long i = 0;
	     (rc = pcor_handle_test(h, PCOR_NONBLOCK)) == PCOR_INPROGRESS;
	     i++) {
		CHECK(pcori_now_ns() < end && i < 1000000000);
		at_once = false;
		ports_progress();
	}
	CHECK_RC(rc, PCOR_ERR_PEER_LOST);
	double ms = (double)(pcori_now_ns() - t_kill) / 1e6;
	if (bound)
		CHECK(!at_once && ms >= (double)pcori_rt.cfg.peer_timeout_ms);
	/*
	 * The buffer is the application's again, and reused at once; so is
	 * the block of pcor's the data landed in, if pcor let it go.
	 */
	uint8_t *again = NULL;
	if (dma)
		CHECK(block == NULL);
	else
		fill(buf, LOST_SIZE);
	if (dst != buf) {
		CHECK_OK(pcor_dma_alloc(LOST_SIZE, (void **)&again));
		fill(again, LOST_SIZE);
	}
	ports_drain();
	if ((!dma && !filled_still(buf, LOST_SIZE)) ||
	    (again && !filled_still(again, LOST_SIZE))) {
		fprintf(stderr,
			"FAIL %s: written into after the receive "
			"completed\n",
			name);
		exit(1);
	}
	for (int i = 0; i < pcori_net.nports; i++)
		pcori_unlock(&pcori_net.ports[i]->progress_lock);
	printf("%s: %ld bytes were unread at the kill\n", name, unread);
	printf("%s: PEER_LOST %.1f ms after the kill%s\n", name, ms,
	       at_once ? "" : " (its reads were out at the loss)");
	if (again) {
		printf("%s: pcor's block was %s\n", name,
		       again < dst + LOST_SIZE && dst < again + LOST_SIZE
			   ? "reused"
			   : "kept");
		CHECK_OK(pcor_dma_free(again));
	}
	CHECK(munmap(buf, LOST_SIZE) == 0);
	return 0;
}

/* ----------------------------------------------------------- finrecv */

/*
 * pid 0 calls pcor_finalize while a rendezvous moves into a receive it
 * posted (its reads asked for): the handle is dropped, and the
 * rendezvous (with its block) is freed once, after the ports are closed.
 * pid 1's send ends either way.
 */
static int run_finrecv(void)
{
	if (me == 1) {
		pcor_handle_t h;
		void *d = big_send_start(LOST_SIZE, LOST_FILLED, LOST_SEED, &h);
		int rc = pcor_handle_test(h, PCOR_BLOCK);
		CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
		CHECK_OK(pcor_dma_free(d));
		return 0;
	}
	if (me != 0)
		return 0;
	/* pcor's until the handle completes, which may be in finalize. */
	static void *block;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_dma(1, 0, TAG_DATA, &block, NULL, &h));
	note(1, TAG_READY);
	/*
	 * In flight once its reads are asked for.  Not once its first bytes
	 * are in: that is the fabric's pace, and rxd's under load is slow
	 * (256 MiB in up to 23 s beside four busy loops; a CI run once saw
	 * none of the first 16 MiB within 20 s).
	 */
	uint64_t end = pcori_now_ns() + secs(30);
	for (long i = 0; !PORTS_STAT(rma_reads); i++) {
		CHECK(pcori_now_ns() < end && i < 100000000);
		sched_yield();
	}
	/* Leave with it in flight (a test that it still is would race). */
	return 0;
}

/* ------------------------------------------------------------- spawn */

/* Threads that ran "echo-reversed" here: one per request, never more. */
static _Atomic int spawns_run;

static void spawned(void *arg, size_t len)
{
	atomic_fetch_add(&spawns_run, 1);
	/* Answer the spawner with our id and its argument, reversed. */
	char out[64];
	CHECK(len < sizeof(out));
	for (size_t i = 0; i < len; i++)
		out[i] = ((char *)arg)[len - 1 - i];
	int id = pcor_self_thid();
	memcpy(out + len, &id, sizeof(id));
	send_wait(0, 0, TAG_DATA, out, len + sizeof(id));
}

/* Start echo-reversed in process p, check its answer and a bad name. */
static void spawn_one(int p)
{
	int thid = -1;
	CHECK_OK(pcor_thread_spawn(p, "echo-reversed", "abc", 3, &thid));
	CHECK(thid > 0);
	char in[64];
	pcor_msginfo_t info;
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(p, thid, TAG_DATA, in, sizeof(in), &info, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	int id;
	memcpy(&id, in + 3, sizeof(id));
	CHECK(!memcmp(in, "cba", 3) && id == thid);
	CHECK_RC(pcor_thread_spawn(p, "no-such-function", NULL, 0, &thid),
		 PCOR_ERR_NOTFOUND);
}

/* rounds: requests per peer (a lossy fabric must lose some of them). */
static int run_spawn(int rounds)
{
	CHECK_OK(pcor_function_register("echo-reversed", spawned));
	CHECK_RC(pcor_function_register("echo-reversed", spawned),
		 PCOR_ERR_EXISTS);
	/* Every process has registered before anyone spawns. */
	if (me != 0) {
		note(0, TAG_READY);
		await(0, TAG_NOTE);
		return 0;
	}
	for (int p = 1; p < np; p++)
		await(p, TAG_READY);
	for (int round = 0; round < rounds; round++)
		for (int p = 1; p < np; p++)
			spawn_one(p);
	CHECK_RC(pcor_thread_spawn(np, "echo-reversed", NULL, 0, &(int){0}),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_thread_spawn(1, NULL, NULL, 0, &(int){0}),
		 PCOR_ERR_INVAL);
	for (int p = 1; p < np; p++)
		note(p, TAG_NOTE);
	return 0;
}

/* -------------------------------------------------------------- fast */

#define FAST_ROUNDS 2000

/*
 * The lossless fast path's promises, read from the port's counters: on a
 * lossless port (every provider here but udp;ofi_rxd) a small send is
 * complete as soon as it returns, before the peer has posted anything; a
 * ping-pong of small messages costs one frame per message and an ack per
 * FAST_ACK_EVERY (64) of them at most, never a resend.  udp keeps the
 * full protocol: its sends complete on the ack.
 */
static int run_fast(void)
{
	int peer = 1 - me;
	pcori_peer_t *pp = pcori_peer_get(peer);
	CHECK(pp && pcori_peer_ready(pp) == PCOR_OK);
	pcori_port_t *port = pcori_peer_route(pp)->port;
	bool udp = strstr(port->info.provider, "rxd") != NULL;
	CHECK(port->lossless == !udp);
	/*
	 * A few round trips first: a provider may connect on first use (rxm
	 * refuses injects until then), and such a message takes the full
	 * path; its ack comes back on the answers.
	 */
	for (uint32_t i = 0; i < 8; i++) {
		if (me == 0) {
			note(1, TAG_DATA);
			await(1, TAG_DATA);
		} else {
			await(0, TAG_DATA);
			note(0, TAG_DATA);
		}
	}
	if (me == 1) {
		/* pid 0 posts nothing until it hears the note that follows. */
		pcor_handle_t h;
		uint64_t v = 0x0123456789abcdefull;
		CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, &v, sizeof(v), &h));
		int rc = pcor_handle_test(h, PCOR_NONBLOCK);
		if (port->lossless) {
			CHECK_OK(rc);
			/* A done token: its status once, then it is gone. */
			CHECK(pcori_req_is_token(h));
			CHECK_RC(pcor_handle_test(h, PCOR_BLOCK),
				 PCOR_ERR_BADHANDLE);
		} else if (rc == PCOR_INPROGRESS)
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		else
			CHECK_OK(rc);
		note(0, TAG_NOTE);
	} else {
		await(1, TAG_NOTE);
		uint64_t v = 0;
		recv_wait(1, 0, TAG_DATA, &v, sizeof(v));
		CHECK(v == 0x0123456789abcdefull);
	}
	uint64_t tx0 = pcori_port_tx_frames(port);
	uint64_t acks0 = atomic_load(&port->st.ack_tx);
	uint64_t retx0 = atomic_load(&port->st.retx);
	for (uint32_t i = 0; i < FAST_ROUNDS; i++) {
		uint32_t got = UINT32_MAX;
		if (me == 0) {
			send_wait(1, 0, TAG_DATA, &i, sizeof(i));
			recv_wait(1, 0, TAG_DATA, &got, sizeof(got));
		} else {
			recv_wait(0, 0, TAG_DATA, &got, sizeof(got));
			send_wait(0, 0, TAG_DATA, &i, sizeof(i));
		}
		CHECK(got == i);
	}
	uint64_t tx = pcori_port_tx_frames(port) - tx0;
	uint64_t acks = atomic_load(&port->st.ack_tx) - acks0;
	uint64_t retx = atomic_load(&port->st.retx) - retx0;
	printf("fast: %s lossless=%d frames=%llu acks=%llu resends=%llu "
	       "for %d messages\n",
	       port->info.provider, port->lossless, (unsigned long long)tx,
	       (unsigned long long)acks, (unsigned long long)retx,
	       FAST_ROUNDS);
	if (port->lossless) {
		CHECK(tx == FAST_ROUNDS);
		CHECK(acks <= FAST_ROUNDS / 64 + 2);
		CHECK(retx == 0);
	}
	return 0;
}

/* ------------------------------------------------------------- stall */

static _Atomic int stall_gone;

static void stall_event(int pid, pcor_member_event_t ev, void *arg)
{
	(void)arg;
	if (pid == 1 && (ev == PCOR_MEMBER_EXIT || ev == PCOR_MEMBER_FAILURE))
		atomic_store(&stall_gone, 1);
}

/*
 * Run with PCOR_DROP_EVERY=1: every frame is lost on arrival, while the
 * directory still sees both processes alive.  pid 1's message is resent
 * without ever being acknowledged; the data path's own bound fails it
 * with PCOR_ERR_UNREACHABLE (not PEER_LOST: the peer lives), and a later
 * send is refused the same way.  pid 0 waits for pid 1 to leave.
 */
static int run_stall(void)
{
	if (me == 0) {
		CHECK_OK(pcor_member_callback(stall_event, NULL));
		uint64_t end = pcori_now_ns() + 120000000000ull;
		while (!atomic_load(&stall_gone) && pcori_now_ns() < end)
			sched_yield();
		CHECK(atomic_load(&stall_gone));
		CHECK_OK(pcor_member_callback(NULL, NULL));
		return 0;
	}
	size_t n = 1 * MiB;
	uint8_t *b = malloc(n);
	CHECK(b);
	memset(b, 0x5a, n);
	for (int round = 0; round < 2; round++) {
		pcor_handle_t h;
		CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, b, n, &h));
		int rc = pcor_handle_wait(h, 120000000000ll);
		printf("stall: send %d ended with %s\n", round,
		       pcor_strerror(rc));
		CHECK(rc == PCOR_ERR_UNREACHABLE);
	}
	free(b);
	return 0;
}

/* ----------------------------------------------------------- fastgap */

/*
 * A fast message carries no copy at its sender: one the receiver never
 * gets (a frame dropped as malformed, a path that failed it) leaves a
 * gap nothing can fill.  Pid 1 skips a sequence number of its stream to
 * pid 0 as if that message had been lost on the way, then sends two
 * more.  Pid 0 takes the message before the gap; its receive of the next
 * one must end with PCOR_ERR_PEER_LOST after four stall bounds, not hang.
 * Pid 1 waits, alive, for pid 0's word through the directory.
 */
static int run_fastgap(void)
{
	char buf[16];
	if (me == 1) {
		send_wait(0, 0, TAG_DATA, "before", 7);
		pcori_peer_t *peer = pcori_peer_get(0);
		CHECK(peer);
		pcori_route_t *rt = pcori_peer_route(peer);
		CHECK(rt && rt->port->lossless);
		pcori_txstream_t *ts = atomic_load(&peer->tx[pcor_self_thid()]);
		CHECK(ts);
		pcori_lock(&ts->lock);
		ts->next_seq++; /* the message that was lost */
		pcori_unlock(&ts->lock);
		send_wait(0, 0, TAG_DATA, "after1", 7);
		send_wait(0, 0, TAG_DATA, "after2", 7);
		/*
		 * Pid 0 publishes and leaves: a name dies with its publisher,
		 * so a lookup after that says PEER_LOST (never before the
		 * name was published: that would wait).
		 */
		int pid = -1;
		int rc = pcor_name_lookup("fastgap-seen", 200 * 1000000000ll,
					  &pid, NULL);
		CHECK((rc == PCOR_OK && pid == 0) || rc == PCOR_ERR_PEER_LOST);
		return 0;
	}
	recv_wait(1, 0, TAG_DATA, buf, sizeof(buf));
	CHECK(!strcmp(buf, "before"));
	pcor_handle_t h;
	uint64_t t0 = pcori_now_ns();
	CHECK_OK(pcor_recv_copy(1, 0, TAG_DATA, buf, sizeof(buf), NULL, &h));
	CHECK_RC(pcor_handle_test(h, PCOR_BLOCK), PCOR_ERR_PEER_LOST);
	uint64_t waited = pcori_now_ns() - t0;
	printf("fastgap: the receive behind the gap failed after %llu ms "
	       "(stall bound %llu ms)\n",
	       (unsigned long long)(waited / 1000000u),
	       (unsigned long long)(pcori_stall_bound_ns() / 1000000u));
	/* Not before a lossless gap's bound, four stall bounds. */
	CHECK(waited >= 4 * pcori_stall_bound_ns());
	CHECK_OK(pcor_name_publish("fastgap-seen", 0, 0));
	return 0;
}

/* ------------------------------------------------------------ badhdr */

/* Garbage of every kind, straight onto the fabric, from pid 1. */
static int run_badhdr(void)
{
	int sent = 0;
	if (me == 1) {
		pcori_peer_t *peer = pcori_peer_get(0);
		CHECK(peer && pcori_peer_ready(peer) == PCOR_OK);
		pcori_route_t *rt = pcori_peer_route(peer);
		pcori_port_t *p = rt->port;
		uint8_t good[PCORI_WIRE_HDR_SIZE + 8], bad[sizeof(good)];
		pcori_wire_hdr_t h = {.version = PCORI_WIRE_VERSION,
				      .type = PCORI_W_DATA,
				      .hops = 1,
				      .key_check = pcori_net.lim.key_check,
				      .src_pid = 1,
				      .dst_pid = 0,
				      .tag = 5,
				      .frag_count = 1,
				      .frag_len = 8,
				      .total_size = 8};
		pcori_wire_encode(&h, good);
		struct {
			int off, val;
			size_t len;
		} mut[] = {
			{0, 9, sizeof(good)},   /* version */
			{4, 0x55, sizeof(good)}, /* job key */
			{1, 0, sizeof(good)},   /* type */
			{1, 99, sizeof(good)},  /* type */
			{3, 200, sizeof(good)}, /* hops */
			{8, 0x7f, sizeof(good)}, /* src pid */
			{23, 0x80, sizeof(good)}, /* dst thid negative */
			{36, 3, sizeof(good)},  /* frag index past count */
			{44, 9, sizeof(good)},  /* frag length */
			{0, 1, 10},             /* shorter than a header */
			{0, 1, sizeof(good) - 1}, /* payload shorter */
		};
		for (size_t i = 0; i < PCORI_ARRAY_LEN(mut); i++) {
			memcpy(bad, good, sizeof(good));
			bad[mut[i].off] = (uint8_t)mut[i].val;
			/*
			 * The job key is random: its byte may already hold the
			 * value, and an unchanged frame is a good one (seq 0,
			 * taking the place of the real first message).
			 */
			if (bad[mut[i].off] == good[mut[i].off])
				bad[mut[i].off] ^= 0xff;
			struct iovec iov = {bad, mut[i].len};
			/* The port frees a control context at completion. */
			pcori_ctx_t *ctx = malloc(sizeof(*ctx));
			CHECK(ctx);
			ctx->kind = PCORI_CTX_TXCTL;
			int rc = PCOR_ERR_AGAIN;
			/*
			 * A full queue drains only as the port progresses, and
			 * libfabric's shm takes nothing until pid 0 has opened
			 * its port (it may still be starting): bound by time.
			 */
			uint64_t until = pcori_now_ns() + 30000000000ull;
			while (rc == PCOR_ERR_AGAIN && pcori_now_ns() < until)
				if ((rc = p->ops->sendv(p, rt->dest, &iov, 1,
							ctx)) == PCOR_ERR_AGAIN)
					pcori_progress();
			CHECK_OK(rc);
			sent++;
		}
		/* Then a normal message, which must arrive intact. */
		send_wait(0, 0, TAG_DATA, "intact", 7);
		uint32_t n = (uint32_t)sent;
		send_wait(0, 0, TAG_NOTE, &n, sizeof(n));
	} else if (me == 0) {
		char buf[16];
		uint32_t n;
		recv_wait(1, 0, TAG_DATA, buf, sizeof(buf));
		CHECK(!strcmp(buf, "intact"));
		recv_wait(1, 0, TAG_NOTE, &n, sizeof(n));
		/*
		 * The garbage took another path through the provider than the
		 * note and may still be on its way: wait (bounded) for it.
		 */
		uint64_t bad = 0, end = pcori_now_ns() + 10000000000ull;
		do {
			bad = PORTS_STAT(bad_hdr);
			if (bad < n)
				sched_yield();
		} while (bad < n && pcori_now_ns() < end);
		CHECK(bad == n);
	}
	return 0;
}

/* ----------------------------------------------------------- lastack */

/*
 * Pid 0 takes 8 x N messages and leaves at once, without waiting for its
 * senders: on a lossy fabric its last acks may be lost.  Every send of
 * pid 1 must still complete OK -- the messages were delivered -- never
 * PCOR_ERR_PEER_LOST (the leaving side's BYE carries its final acks and
 * is itself acknowledged, as TCP's TIME_WAIT).
 */
static int lastack_n;

static void *lastack_sender(void *arg)
{
	uint32_t k = (uint32_t)(intptr_t)arg;
	pcor_handle_t *hs = malloc(sizeof(*hs) * (size_t)lastack_n);
	CHECK(hs);
	for (int i = 0; i < lastack_n; i++) {
		uint32_t msg[2] = {k, (uint32_t)i};
		CHECK_OK(pcor_send_copy(0, 0, TAG_DATA, msg, sizeof(msg),
					&hs[i]));
	}
	for (int i = 0; i < lastack_n; i++)
		CHECK_OK(pcor_handle_test(hs[i], PCOR_BLOCK));
	free(hs);
	return NULL;
}

static int run_lastack(int n)
{
	lastack_n = n;
	if (me == 1) {
		int t[ORDER_SENDERS];
		for (int k = 0; k < ORDER_SENDERS; k++)
			CHECK_OK(pcor_thread_create(lastack_sender,
						    (void *)(intptr_t)k, &t[k]));
		for (int k = 0; k < ORDER_SENDERS; k++)
			CHECK_OK(pcor_thread_join(t[k], NULL));
	} else if (me == 0) {
		uint32_t next[ORDER_SENDERS] = {0};
		for (int i = 0; i < n * ORDER_SENDERS; i++) {
			uint32_t msg[2];
			recv_wait(1, PCOR_ANY_THID, TAG_DATA, msg, sizeof(msg));
			CHECK(msg[0] < ORDER_SENDERS && msg[1] == next[msg[0]]);
			next[msg[0]]++;
		}
	}
	return 0;
}

/* -------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fabric_app CASE [ARG]\n");
		return 2;
	}
	CHECK_OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	np = pcor_nprocs();
	CHECK(np >= 2);
	/* The fenced cases run the fallback they name, not the fast fences. */
	const char *mb = getenv("PCOR_MEMBARRIER");
	if (mb && !strcmp(mb, "0"))
		CHECK(!pcori_asym_local && !pcori_asym_global);
	const char *c = argv[1];
	/* An optional number; a trailing non-number (a marker) is ignored. */
	long arg = argc > 2 ? atol(argv[2]) : 0;
	int rc;
	if (!strcmp(c, "sizes"))
		rc = run_sizes(arg ? (size_t)arg : 64 * MiB);
	else if (!strcmp(c, "order"))
		rc = run_order(arg ? (int)arg : 10000);
	else if (!strcmp(c, "alltoall"))
		rc = run_alltoall(arg ? (int)arg : 250);
	else if (!strcmp(c, "mixed"))
		rc = run_mixed(arg ? (int)arg : 20);
	else if (!strcmp(c, "flood"))
		rc = run_flood(arg ? (int)arg : 100000);
	else if (!strcmp(c, "kill"))
		rc = run_kill();
	else if (!strcmp(c, "lostrecv-copy") || !strcmp(c, "lostrecv-dma") ||
		 !strcmp(c, "lostrecv-bound"))
		rc = run_lostrecv(c);
	else if (!strcmp(c, "finrecv"))
		rc = run_finrecv();
	else if (!strcmp(c, "spawn"))
		rc = run_spawn(arg ? (int)arg : 1);
	else if (!strcmp(c, "badhdr"))
		rc = run_badhdr();
	else if (!strcmp(c, "fastgap"))
		rc = run_fastgap();
	else if (!strcmp(c, "fast"))
		rc = run_fast();
	else if (!strcmp(c, "stall"))
		rc = run_stall();
	else if (!strcmp(c, "lastack"))
		rc = run_lastack(arg ? (int)arg : 50);
	else
		SKIP("unknown case %s", c);
	/* Nobody leaves while others may still talk to them. */
	if (strcmp(c, "kill") && strncmp(c, "lostrecv", 8) &&
	    strcmp(c, "finrecv") && strcmp(c, "stall") &&
	    strcmp(c, "lastack") && strcmp(c, "fastgap")) {
		if (me == 0) {
			for (int p = 1; p < np; p++)
				await(p, TAG_READY);
			for (int p = 1; p < np; p++)
				note(p, TAG_NOTE);
		} else {
			note(0, TAG_READY);
			await(0, TAG_NOTE);
		}
	}
	CHECK_OK(pcor_finalize());
	/* Finalize waited for the threads peers started: all have run. */
	if (!strcmp(c, "spawn") && me != 0)
		CHECK(atomic_load(&spawns_run) == (arg ? (int)arg : 1));
	printf("%s: ok\n", c);
	return rc;
}
