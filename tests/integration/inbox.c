/*
 * inbox -- short messages between threads of one process travel in the
 * receiver's inbox line when a receive is posted first.  Checked through
 * the public API, in spin mode and (argument "sleep", PCOR_SPIN_NS=0)
 * with every blocking test asleep:
 *   - a ping-pong of every size from 0 to 40 B (both sides of the inline
 *     limit): bytes, reported sender, tag and size;
 *   - many senders racing for one wildcard receive at a time: each message
 *     delivered once, each sender's in order;
 *   - the posted order: an armed wildcard is older than a later exact
 *     receive; a long message or a hand-over takes an armed receive too;
 *   - truncation, recvDMA, a stale handle, a receive tested by a thread
 *     that did not post it;
 *   - a thread that ends with a receive armed (canceled) or filled but
 *     never tested (delivered): both handles settle for another tester;
 *     finalize with a receive armed.
 */
#include "../common.h"

#define PP_ROUNDS 4000
#define MAX_SHORT 40
#define NSEND	  6
#define PER_SEND  3000

static int me;

static void fill(uint8_t *b, size_t len, uint32_t key)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(th_mix(key * 131u + i) | 1u);
}

static void check(const uint8_t *b, size_t len, uint32_t key)
{
	for (size_t i = 0; i < len; i++)
		CHECK(b[i] == (uint8_t)(th_mix(key * 131u + i) | 1u));
}

/* ---- ping-pong ---- */

static int pp_peer[2];
static pthread_barrier_t bar;

static void *pp_side(void *arg)
{
	const int side = (int)(intptr_t)arg;
	th_barrier_wait(&bar);
	const int peer = pp_peer[1 - side];
	uint8_t out[MAX_SHORT], in[MAX_SHORT + 8];
	pcor_msginfo_t info;
	pcor_handle_t r = 0, s = 0;
	for (int i = 0; i < PP_ROUNDS; i++) {
		size_t len = (size_t)i % (MAX_SHORT + 1);
		uint32_t key = (uint32_t)(2 * i + side);
		memset(in, 0xEE, sizeof(in));
		CHECK_OK(pcor_recv_copy(0, peer, i, in, MAX_SHORT, &info, &r));
		if (side == 0) {
			fill(out, len, key);
			CHECK_OK(pcor_send_copy(0, peer, i, out, len, &s));
			CHECK_OK(pcor_handle_test(s, PCOR_BLOCK));
			CHECK_OK(pcor_handle_test(r, PCOR_BLOCK));
		} else {
			CHECK_OK(pcor_handle_test(r, PCOR_BLOCK));
			fill(out, len, key);
			CHECK_OK(pcor_send_copy(0, peer, i, out, len, &s));
			CHECK_OK(pcor_handle_test(s, PCOR_BLOCK));
		}
		CHECK(info.pid == 0 && info.thid == peer && info.tag == i);
		CHECK(info.size == len);
		check(in, len, (uint32_t)(2 * i + 1 - side));
		for (size_t g = len; g < sizeof(in); g++)
			CHECK(in[g] == 0xEE);
		/* Released: the handle is stale now. */
		CHECK_RC(pcor_handle_test(r, PCOR_NONBLOCK),
			 PCOR_ERR_BADHANDLE);
	}
	return NULL;
}

static void test_pingpong(void)
{
	th_barrier_init(&bar, 3);
	for (int i = 0; i < 2; i++)
		CHECK_OK(pcor_thread_create(pp_side, (void *)(intptr_t)i,
					    &pp_peer[i]));
	th_barrier_wait(&bar);
	for (int i = 0; i < 2; i++)
		CHECK_OK(pcor_thread_join(pp_peer[i], NULL));
	pthread_barrier_destroy(&bar);
}

/* ---- many senders, one wildcard receive at a time ---- */

typedef struct msg {
	uint32_t sender, seq;
	uint8_t pad[MAX_SHORT - 8];
} msg_t;

static int rcv_thid;

static void *many_sender(void *arg)
{
	uint32_t who = (uint32_t)(intptr_t)arg;
	th_barrier_wait(&bar);
	for (uint32_t seq = 0; seq < PER_SEND; seq++) {
		msg_t m = {who, seq, {0}};
		/* 8 to 40 bytes: inline and too long for the inbox alike. */
		size_t len = 8 + (th_mix(who * 7919u + seq) % (MAX_SHORT - 7));
		fill(m.pad, len - 8, who << 16 | seq);
		pcor_handle_t h =
		    th_send_copy(0, rcv_thid, (int)(seq % 3), &m, len);
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	return NULL;
}

static void test_many(void)
{
	int t[NSEND];
	uint32_t next[NSEND] = {0};
	rcv_thid = me;
	th_barrier_init(&bar, NSEND + 1);
	for (int i = 0; i < NSEND; i++)
		CHECK_OK(pcor_thread_create(many_sender, (void *)(intptr_t)i,
					    &t[i]));
	th_barrier_wait(&bar);
	for (int n = 0; n < NSEND * PER_SEND; n++) {
		msg_t m;
		pcor_msginfo_t info;
		pcor_handle_t h;
		int pid = n % 2 ? PCOR_ANY_PID : 0;
		CHECK_OK(pcor_recv_copy(pid, PCOR_ANY_THID, PCOR_ANY_TAG, &m,
					sizeof(m), &info, &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK(info.size >= 8 && info.size <= sizeof(m));
		CHECK(m.sender < NSEND && info.thid == t[m.sender]);
		CHECK(m.seq == next[m.sender]);
		CHECK(info.tag == (int)(m.seq % 3));
		check(m.pad, info.size - 8, m.sender << 16 | m.seq);
		next[m.sender]++;
	}
	for (int i = 0; i < NSEND; i++) {
		CHECK(next[i] == PER_SEND);
		CHECK_OK(pcor_thread_join(t[i], NULL));
	}
	pthread_barrier_destroy(&bar);
}

/* ---- one thread: order, long messages, truncation, recvDMA ---- */

static pcor_handle_t post(int thid, int tag, void *buf, size_t cap,
			  pcor_msginfo_t *info)
{
	pcor_handle_t h = 0;
	CHECK_OK(pcor_recv_copy(0, thid, tag, buf, cap, info, &h));
	return h;
}

static void send_self(int tag, const void *buf, size_t len)
{
	pcor_handle_t h = 0;
	CHECK_OK(pcor_send_copy(0, me, tag, buf, len, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void test_single(void)
{
	uint8_t a[64], b[64], out[200];
	pcor_msginfo_t ia, ib;

	/* The wildcard, posted first (and armed), is the older receive. */
	pcor_handle_t ha = post(PCOR_ANY_THID, PCOR_ANY_TAG, a, sizeof(a), &ia);
	pcor_handle_t hb = post(me, 5, b, sizeof(b), &ib);
	fill(out, 12, 1);
	send_self(5, out, 12);
	CHECK_RC(pcor_handle_test(hb, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_handle_test(ha, PCOR_BLOCK));
	CHECK(ia.tag == 5 && ia.size == 12 && ia.thid == me);
	check(a, 12, 1);
	fill(out, 3, 2);
	send_self(5, out, 3);
	CHECK_OK(pcor_handle_test(hb, PCOR_BLOCK));
	CHECK(ib.size == 3);
	check(b, 3, 2);

	/* Too long for the inbox: the armed receive is taken all the same. */
	uint8_t big[200];
	pcor_msginfo_t ig;
	pcor_handle_t hg = post(me, 9, big, sizeof(big), &ig);
	hb = post(me, 9, b, sizeof(b), &ib);
	fill(out, 200, 3);
	send_self(9, out, 200);
	fill(out, 33, 4);
	send_self(9, out, 33);
	CHECK_OK(pcor_handle_test(hg, PCOR_BLOCK));
	CHECK(ig.size == 200);
	check(big, 200, 3);
	CHECK_OK(pcor_handle_test(hb, PCOR_BLOCK));
	CHECK(ib.size == 33);
	check(b, 33, 4);

	/* Truncation: what fits, the full size, nothing past the capacity. */
	memset(a, 0xEE, sizeof(a));
	ha = post(me, 11, a, 5, &ia);
	fill(out, 20, 5);
	send_self(11, out, 20);
	CHECK_RC(pcor_handle_test(ha, PCOR_BLOCK), PCOR_ERR_TRUNCATE);
	CHECK(ia.size == 20);
	check(a, 5, 5);
	for (size_t g = 5; g < sizeof(a); g++)
		CHECK(a[g] == 0xEE);
	/* An empty message, into a receive without a buffer. */
	ha = post(me, 12, NULL, 0, &ia);
	send_self(12, NULL, 0);
	CHECK_OK(pcor_handle_test(ha, PCOR_BLOCK));
	CHECK(ia.size == 0 && ia.tag == 12);

	/* recvDMA: a block of its own holding the bytes; none for 0 B. */
	void *d = NULL;
	pcor_handle_t hd;
	CHECK_OK(pcor_recv_dma(0, me, 13, &d, &ia, &hd));
	fill(out, 17, 6);
	send_self(13, out, 17);
	CHECK_OK(pcor_handle_test(hd, PCOR_BLOCK));
	size_t u = 0;
	CHECK(d != NULL && d != out);
	CHECK_OK(pcor_dma_size(d, &u));
	CHECK(u >= 17 && ia.size == 17);
	check(d, 17, 6);
	CHECK_OK(pcor_dma_free(d));
	d = out;
	CHECK_OK(pcor_recv_dma(0, me, 14, &d, &ia, &hd));
	send_self(14, NULL, 0);
	CHECK_OK(pcor_handle_test(hd, PCOR_BLOCK));
	CHECK(d == NULL && ia.size == 0);

	/* sendDMA into an armed receive: the sender's buffer stays its own;
	 * a handed-over block reaches a recvDMA as itself. */
	void *sb;
	CHECK_OK(pcor_dma_alloc(24, &sb));
	fill(sb, 24, 7);
	ha = post(me, 15, a, sizeof(a), &ia);
	pcor_handle_t hs;
	CHECK_OK(pcor_send_dma(0, me, 15, sb, 24, 0, &hs));
	CHECK_OK(pcor_handle_test(hs, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(ha, PCOR_BLOCK));
	check(a, 24, 7);
	check(sb, 24, 7);
	CHECK_OK(pcor_recv_dma(0, me, 16, &d, &ia, &hd));
	CHECK_OK(pcor_send_dma(0, me, 16, sb, 24, PCOR_SEND_HANDOVER, &hs));
	CHECK_OK(pcor_handle_test(hs, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(hd, PCOR_BLOCK));
	CHECK(d == sb && ia.size == 24);
	check(d, 24, 7);
	CHECK_OK(pcor_dma_free(d));

	/* A message that came first is taken before anything is armed. */
	fill(out, 8, 8);
	send_self(17, out, 8);
	ha = post(me, 17, a, sizeof(a), &ia);
	CHECK_OK(pcor_handle_test(ha, PCOR_NONBLOCK));
	check(a, 8, 8);
}

/* ---- testers other than the poster, threads that end ---- */

static pcor_handle_t shared_h;
static uint8_t shared_buf[MAX_SHORT];
static pcor_msginfo_t shared_info;
static _Atomic int tester_rc = 1;

static void *tester(void *arg)
{
	(void)arg;
	th_barrier_wait(&bar);
	atomic_store(&tester_rc, pcor_handle_test(shared_h, PCOR_BLOCK));
	return NULL;
}

static void *poster_leaves(void *arg)
{
	/* Posts, lets main see the handle, then ends without testing. */
	int tag = (int)(intptr_t)arg;
	CHECK_OK(pcor_recv_copy(0, PCOR_ANY_THID, tag, shared_buf,
				sizeof(shared_buf), &shared_info, &shared_h));
	th_barrier_wait(&bar);
	if (tag != 22)
		th_barrier_wait(&bar); /* main has sent */
	return NULL;
}

static void test_others(void)
{
	/* Another thread blocks on our receive and delivers it. */
	int t;
	th_barrier_init(&bar, 2);
	memset(shared_buf, 0, sizeof(shared_buf));
	CHECK_OK(pcor_recv_copy(0, me, 20, shared_buf, sizeof(shared_buf),
				&shared_info, &shared_h));
	CHECK_OK(pcor_thread_create(tester, NULL, &t));
	th_barrier_wait(&bar);
	uint8_t out[MAX_SHORT];
	fill(out, 30, 20);
	send_self(20, out, 30);
	CHECK_OK(pcor_thread_join(t, NULL));
	CHECK_OK(atomic_load(&tester_rc));
	CHECK(shared_info.size == 30 && shared_info.tag == 20);
	check(shared_buf, 30, 20);
	CHECK_RC(pcor_handle_test(shared_h, PCOR_NONBLOCK), PCOR_ERR_BADHANDLE);

	/* Filled, never tested by its poster, which ends: delivered. */
	CHECK_OK(pcor_thread_create(poster_leaves, (void *)21, &t));
	th_barrier_wait(&bar);
	fill(out, 16, 21);
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(0, t, 21, out, 16, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	th_barrier_wait(&bar);
	CHECK_OK(pcor_thread_join(t, NULL));
	CHECK_OK(pcor_handle_test(shared_h, PCOR_BLOCK));
	CHECK(shared_info.size == 16 && shared_info.thid == me);
	check(shared_buf, 16, 21);

	/* Armed and never filled, its poster ends: canceled. */
	CHECK_OK(pcor_thread_create(poster_leaves, (void *)22, &t));
	th_barrier_wait(&bar);
	CHECK_OK(pcor_thread_join(t, NULL));
	CHECK_RC(pcor_handle_test(shared_h, PCOR_BLOCK), PCOR_ERR_CANCELED);
	CHECK_RC(pcor_handle_test(shared_h, PCOR_BLOCK), PCOR_ERR_BADHANDLE);
	/* The id's inbox works for whoever comes next. */
	CHECK_OK(pcor_thread_create(poster_leaves, (void *)23, &t));
	th_barrier_wait(&bar);
	fill(out, 4, 23);
	CHECK_OK(pcor_send_copy(0, t, 23, out, 4, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	th_barrier_wait(&bar);
	CHECK_OK(pcor_thread_join(t, NULL));
	CHECK_OK(pcor_handle_test(shared_h, PCOR_BLOCK));
	check(shared_buf, 4, 23);
	pthread_barrier_destroy(&bar);
}

int main(int argc, char **argv)
{
	/* sleep: every blocking test sleeps at once (the wake-up paths). */
	if (argc > 1 && !strcmp(argv[1], "sleep"))
		setenv("PCOR_SPIN_NS", "0", 1);
	CHECK_OK(pcor_init(NULL, NULL));
	me = pcor_self_thid();
	test_single();
	test_pingpong();
	test_many();
	test_others();
	/* Finalize settles a receive still armed (and our own inbox). */
	uint8_t last[8];
	pcor_handle_t h = post(me, 30, last, sizeof(last), NULL);
	CHECK_RC(pcor_handle_test(h, PCOR_NONBLOCK), PCOR_INPROGRESS);
	CHECK_OK(pcor_finalize());
	return 0;
}
