/*
 * route_app -- forwarding through gateways, run by pcorrun over network
 * namespaces (see run.sh for the networks).  Public API only.
 *
 *   route_app relay [max]     pid 0 (A, net1) <-> pid 2 (C, net2) through
 *                             pid 1 (B, both): every size 0 B .. max
 *                             (default 64 MiB) both ways, posted and
 *                             unexpected, wildcard receives, byte-exact;
 *                             4 threads' order kept; B sends nothing
 *   route_app join HOST       A streams to C while it spawns D on HOST
 *                             (net2 only); A and D then talk through B;
 *                             placement near D picks B and C, not A
 *   route_app gwkill          pids A, B, C, E (net1): B dies with A's
 *                             sends to C pending; they fail, A <-> E works
 *   route_app twogw           pids A, B, C, G (both nets): killing B moves
 *                             A <-> C onto G
 *   route_app api             bad input to the routing calls, one process
 *
 * Each process prints "<case>: ok" when every check held.
 */
#include "harness.h"
#include "member_wait.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

#define TAG_DATA 1
#define TAG_NOTE 2
#define TAG_READY 3
#define TAG_ORDER 4
#define TAG_DIE 5
#define TAG_BIG 6
#define TAG_NEVER 7
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define A 0
#define B 1
#define C 2

static int me;
static const char *marker = "";

/* ------------------------------------------------------------ helpers */

static void send_wait(int pid, int tag, const void *b, size_t n)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(pid, 0, tag, b, n, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void note(int pid, int tag)
{
	send_wait(pid, tag, NULL, 0);
}

static void await(int pid, int tag)
{
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(pid, 0, tag, NULL, 0, NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
}

static void route_is(int pid, int next_hop, int hops)
{
	pcor_route_info_t r;
	CHECK_OK(pcor_route_info(pid, &r));
	if (r.next_hop != next_hop || r.hops != hops)
		fprintf(stderr, "route to %d: next hop %d, %d hops (%s)\n", pid,
			r.next_hop, r.hops, r.network);
	CHECK(r.pid == pid && r.next_hop == next_hop && r.hops == hops);
	CHECK(r.port >= 0 && r.network[0] && r.provider[0]);
	CHECK(r.link_class == PCOR_LINK_TCP || r.link_class == PCOR_LINK_UDP);
}

/*
 * One message from `from` to `to`, byte-exact.  The receiver uses
 * wildcards for pid and thread (only one sender is active at a time).
 * Posted first: the receiver posts, then says go.  Unexpected first:
 * the sender sends, then says so on another tag (same stream: in order).
 */
static void transfer(int from, int to, size_t n, bool dma, bool posted,
		     uint64_t seed, uint8_t *buf)
{
	if (me == from) {
		pcor_handle_t h;
		void *d = NULL;
		if (posted)
			await(to, TAG_READY);
		if (dma) {
			CHECK_OK(pcor_dma_alloc(n, &d));
			th_fill(d, n, seed);
			CHECK_OK(pcor_send_dma(to, 0, TAG_DATA, d, n, 0, &h));
		} else {
			th_fill(buf, n, seed);
			CHECK_OK(pcor_send_copy(to, 0, TAG_DATA, buf, n, &h));
		}
		if (!posted)
			note(to, TAG_NOTE);
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK_OK(pcor_dma_free(d));
	} else if (me == to) {
		pcor_handle_t h;
		pcor_msginfo_t info;
		void *d = NULL;
		if (!posted)
			await(from, TAG_NOTE);
		if (dma)
			CHECK_OK(pcor_recv_dma(PCOR_ANY_PID, PCOR_ANY_THID,
					       TAG_DATA, &d, &info, &h));
		else
			CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
						TAG_DATA, buf, n, &info, &h));
		if (posted)
			note(from, TAG_READY);
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
		CHECK(info.pid == from && info.thid == 0 && info.size == n);
		CHECK_PATTERN(dma ? d : buf, n, seed);
		CHECK_OK(pcor_dma_free(d));
	}
}

/* Byte-exact exchanges in both directions over a few sizes. */
static void exchange(int x, int y, size_t max, uint64_t seed)
{
	static const size_t sizes[] = {0, 1, 65537, MiB + 1, 16 * MiB + 1};
	uint8_t *buf = malloc(max + 1);
	CHECK(buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i] > max)
			break;
		transfer(x, y, sizes[i], i & 1, true, seed++, buf);
		transfer(y, x, sizes[i], !(i & 1), false, seed++, buf);
	}
	free(buf);
}

/*
 * Everyone alive reports to pid 0, which then lets them go in the order
 * given: gateways last, or the ends behind them would lose their route.
 */
static void barrier(const int *pids, int n)
{
	if (me == 0) {
		for (int i = 0; i < n; i++)
			if (pids[i] != 0)
				await(pids[i], TAG_READY);
		for (int i = 0; i < n; i++)
			if (pids[i] != 0)
				note(pids[i], TAG_NOTE);
	} else {
		note(0, TAG_READY);
		await(0, TAG_NOTE);
	}
}

/* ---------------------------------------------------------- ordering */

#define ORDER_THREADS 4
static int order_to, order_n;

static void *order_sender(void *arg)
{
	uint32_t msg[2] = {(uint32_t)(intptr_t)arg, 0};
	pcor_handle_t *hs = malloc(sizeof(*hs) * (size_t)order_n);
	CHECK(hs);
	for (int i = 0; i < order_n; i++) {
		msg[1] = (uint32_t)i;
		CHECK_OK(pcor_send_copy(order_to, 0, TAG_ORDER, msg,
					sizeof(msg), &hs[i]));
	}
	for (int i = 0; i < order_n; i++)
		CHECK_OK(pcor_handle_test(hs[i], PCOR_BLOCK));
	free(hs);
	return NULL;
}

/* ORDER_THREADS threads of `from` send n each; `to` checks each order. */
static void order(int from, int to, int n)
{
	order_to = to;
	order_n = n;
	if (me == from) {
		int t[ORDER_THREADS];
		for (int k = 0; k < ORDER_THREADS; k++)
			CHECK_OK(pcor_thread_create(order_sender,
						    (void *)(intptr_t)k, &t[k]));
		for (int k = 0; k < ORDER_THREADS; k++)
			CHECK_OK(pcor_thread_join(t[k], NULL));
	} else if (me == to) {
		uint32_t next[ORDER_THREADS] = {0};
		int thid_of[ORDER_THREADS] = {-1, -1, -1, -1};
		for (int i = 0; i < n * ORDER_THREADS; i++) {
			uint32_t msg[2];
			pcor_msginfo_t info;
			pcor_handle_t h;
			/* Not ANY_TAG: other processes' barrier notes. */
			CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
						TAG_ORDER, msg, sizeof(msg),
						&info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			if (info.pid != from || info.tag != TAG_ORDER)
				fprintf(stderr, "message %d: from %d.%d tag %d "
						"size %zu\n",
					i, info.pid, info.thid, info.tag,
					info.size);
			CHECK(info.pid == from && info.tag == TAG_ORDER);
			CHECK(msg[0] < ORDER_THREADS);
			if (thid_of[msg[0]] < 0)
				thid_of[msg[0]] = info.thid;
			CHECK(thid_of[msg[0]] == info.thid);
			CHECK(msg[1] == next[msg[0]]);
			next[msg[0]]++;
		}
	}
}

/* ------------------------------------------------------------- relay */

static int run_relay(size_t max)
{
	static const size_t base[] = {0,     1,     63,    64,   65,
				      4095,  4096,  65535, 65536, 65537};
	size_t sizes[64];
	int ns = 0;
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		sizes[ns++] = base[i];
	for (size_t s = 256 * KiB; s < max; s *= 4) {
		sizes[ns++] = s - 1;
		sizes[ns++] = s + 1;
	}
	sizes[ns++] = max;
	if (me == A) {
		route_is(B, B, 1);
		route_is(C, B, 2);
	} else if (me == C) {
		route_is(B, B, 1);
		route_is(A, B, 2);
	}
	uint8_t *buf = me == B ? NULL : malloc(max + 1);
	CHECK(me == B || buf);
	uint64_t seed = 1;
	for (int i = 0; i < ns; i++)
		for (int posted = 0; posted < 2; posted++) {
			transfer(A, C, sizes[i], i & 1, posted, seed++, buf);
			transfer(C, A, sizes[i], !(i & 1), posted, seed++, buf);
		}
	free(buf);
	/*
	 * 4 x 200 in flight at once: udp;ofi_rxd (libfabric 1.17) stalls its
	 * transmit window with a few thousand.
	 */
	order(A, C, 200);
	order(C, A, 200);
	barrier((int[]){A, C, B}, 3);
	return 0;
}

/* -------------------------------------------------------------- join */

static int stream_n = 3000;

/* A's background traffic to C while D joins. */
static void *streamer(void *arg)
{
	(void)arg;
	for (int i = 0; i < stream_n; i++) {
		uint32_t v = (uint32_t)i;
		pcor_handle_t h;
		CHECK_OK(pcor_send_copy(C, 0, TAG_ORDER, &v, sizeof(v), &h));
		CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	}
	return NULL;
}

#define TAG_SPAWNED 8

/* Started by A near D: tells A where it runs. */
static void where_am_i(void *arg, size_t len)
{
	int self = pcor_self_pid(), to;
	CHECK(len == sizeof(to));
	memcpy(&to, arg, sizeof(to));
	send_wait(to, TAG_SPAWNED, &self, sizeof(self));
}

/*
 * Placement near D (on net2 only): B and C are one link away, A two.
 * thread_spawn_near among A and C picks C.
 */
static void place_near(int d)
{
	int best[3], nbest = 0, cls = -1;
	CHECK_OK(pcor_place_best(d, (int[]){A, B, C}, 3, best, &nbest, &cls));
	CHECK(nbest == 2 && best[0] == B && best[1] == C);
	CHECK(cls == PCOR_LINK_TCP || cls == PCOR_LINK_UDP);
	CHECK_OK(pcor_place_best(d, (int[]){A}, 1, best, &nbest, NULL));
	CHECK(nbest == 1 && best[0] == A);
	int where = -1, thid = -1, from = -1, me_ = A;
	CHECK_OK(pcor_thread_spawn_near(d, (int[]){A, C}, 2, "where-am-i",
					&me_, sizeof(me_), &where, &thid));
	CHECK(where == C && thid > 0);
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(C, thid, TAG_SPAWNED, &from, sizeof(from),
				NULL, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	CHECK(from == C);
}

static int run_join(char **argv, const char *host)
{
	int d = -1;
	CHECK_OK(pcor_function_register("where-am-i", where_am_i));
	if (me == C) /* registered: A may start it here */
		note(A, TAG_READY);
	if (me == A) {
		await(C, TAG_READY);
		int t;
		CHECK_OK(pcor_thread_create(streamer, NULL, &t));
		char *args[] = {argv[0], "joined", (char *)marker, NULL};
		CHECK_OK(pcor_spawn(host, args, &d));
		CHECK(d == 3 && pcor_nprocs() >= 4);
		route_is(d, B, 2);
		exchange(A, d, MiB + 1, 100);
		place_near(d);
		CHECK_OK(pcor_thread_join(t, NULL));
	} else if (me == C) {
		for (int i = 0; i < stream_n; i++) {
			uint32_t v;
			pcor_msginfo_t info;
			pcor_handle_t h;
			CHECK_OK(pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID,
						TAG_ORDER, &v, sizeof(v),
						&info, &h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			CHECK(info.pid == A && v == (uint32_t)i);
		}
	}
	barrier((int[]){A, C, 3, B}, 4);
	return 0;
}

/* The process A spawned: talks to A through B. */
static int run_joined(void)
{
	CHECK(me == 3);
	route_is(A, B, 2);
	exchange(A, me, MiB + 1, 100);
	barrier((int[]){A, C, 3, B}, 4);
	return 0;
}

/* ------------------------------------------------- membership events */

/* A tells B to die; B may die before its ack is out. */
static void order_death(void)
{
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(B, 0, TAG_DIE, NULL, 0, &h));
	int rc = pcor_handle_test(h, PCOR_BLOCK);
	CHECK(rc == PCOR_OK || rc == PCOR_ERR_PEER_LOST);
}

/* B on A's word: dies. */
static void die_on_word(void)
{
	await(A, TAG_DIE);
	kill(getpid(), SIGKILL);
}

/* ------------------------------------------------------------ gwkill */

#define E 3
#define NBIG 4
#define NSMALL 16

static bool lost(int rc)
{
	return rc == PCOR_ERR_UNREACHABLE || rc == PCOR_ERR_PEER_LOST;
}

static int run_gwkill(void)
{
	th_watch_failure(B);
	/* Warm up: every pair in use has its route. */
	if (me == A || me == C)
		exchange(A, C, 65537, 1);
	if (me == A || me == E)
		exchange(A, E, 65537, 10);
	if (me == B) {
		die_on_word();
		return 1;
	}
	if (me == A) {
		route_is(C, B, 2);
		route_is(E, E, 1);
		/*
		 * Rendezvous sends C never receives: they cannot complete
		 * but by failing.  Small ones may be taken before B dies.
		 */
		void *big[NBIG];
		pcor_handle_t hb[NBIG], hs[NSMALL];
		for (int i = 0; i < NBIG; i++) {
			CHECK_OK(pcor_dma_alloc(8 * MiB, &big[i]));
			th_fill(big[i], 8 * MiB, 50 + (uint64_t)i);
			CHECK_OK(pcor_send_dma(C, 0, TAG_BIG, big[i], 8 * MiB,
					       0, &hb[i]));
		}
		for (int i = 0; i < NSMALL; i++)
			CHECK_OK(pcor_send_copy(C, 0, TAG_BIG, "x", 1, &hs[i]));
		order_death();
		for (int i = 0; i < NBIG; i++) {
			int rc = pcor_handle_wait(hb[i], 60 * 1000000000ll);
			if (!lost(rc))
				fprintf(stderr, "big send %d: %s\n", i,
					pcor_status_name(rc));
			CHECK(lost(rc));
			CHECK_OK(pcor_dma_free(big[i]));
		}
		for (int i = 0; i < NSMALL; i++) {
			int rc = pcor_handle_wait(hs[i], 60 * 1000000000ll);
			CHECK(rc == PCOR_OK || lost(rc));
		}
		th_await_failure(60);
		/* New sends to C fail too, at once or through the handle. */
		pcor_handle_t h;
		int rc = pcor_send_copy(C, 0, TAG_BIG, "y", 1, &h);
		CHECK(lost(rc) ||
		      (rc == PCOR_OK &&
		       lost(pcor_handle_wait(h, 60 * 1000000000ll))));
		pcor_route_info_t r;
		CHECK(lost(pcor_route_info(C, &r)));
		CHECK_RC(pcor_route_info(B, &r), PCOR_ERR_PEER_LOST);
		/* net1 still works. */
		exchange(A, E, 16 * MiB + 1, 20);
	} else if (me == E) {
		exchange(A, E, 16 * MiB + 1, 20);
	} else if (me == C) {
		/* A receive naming A fails once A is out of reach. */
		pcor_handle_t h;
		CHECK_OK(pcor_recv_copy(A, 0, TAG_NEVER, NULL, 0, NULL, &h));
		int rc = pcor_handle_wait(h, 60 * 1000000000ll);
		if (!lost(rc))
			fprintf(stderr, "receive from A: %s\n",
				pcor_status_name(rc));
		CHECK(lost(rc));
		return 0; /* cut off from everyone: no barrier */
	}
	barrier((int[]){A, E}, 2);
	return 0;
}

/* ------------------------------------------------------------- twogw */

#define G 3

static int run_twogw(void)
{
	th_watch_failure(B);
	if (me == A || me == C)
		exchange(A, C, MiB + 1, 1);
	if (me == A) {
		/* Equal paths: the lower gateway wins, everywhere alike. */
		route_is(C, B, 2);
		order_death();
	} else if (me == C) {
		route_is(A, B, 2);
	} else if (me == B) {
		die_on_word();
		return 1;
	}
	if (me == A || me == C) {
		/*
		 * A keeps sending while B dies: what B took with it is sent
		 * again on the new route, every sender's order intact.
		 */
		order(A, C, 300);
		th_await_failure(60);
		exchange(A, C, 16 * MiB + 1, 30);
		order(A, C, 1000);
		order(C, A, 1000);
		/* What just worked went through G. */
		route_is(me == A ? C : A, G, 2);
	}
	barrier((int[]){A, C, G}, 3);
	return 0;
}

/* --------------------------------------------------------------- api */

static int run_api(void)
{
	pcor_route_info_t r;
	int best[4], nbest = 0, cls = -1;
	CHECK_RC(pcor_route_info(0, NULL), PCOR_ERR_INVAL);
	CHECK_RC(pcor_route_info(-1, &r), PCOR_ERR_BADPID);
	CHECK_RC(pcor_route_info(pcor_nprocs(), &r), PCOR_ERR_BADPID);
	CHECK_OK(pcor_route_info(me, &r));
	CHECK(r.pid == me && r.next_hop == me && r.hops == 0 &&
	      r.port == -1 && r.link_class == PCOR_LINK_SELF);
	CHECK_RC(pcor_route_dump(-1), PCOR_ERR_INVAL);
	CHECK_OK(pcor_route_dump(2));
	int cand[] = {me, me};
	CHECK_RC(pcor_place_best(me, NULL, 1, best, &nbest, NULL),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_place_best(me, cand, 0, best, &nbest, NULL),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_place_best(me, cand, 2, NULL, &nbest, NULL),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_place_best(me, cand, 2, best, NULL, NULL),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_place_best(-1, cand, 2, best, &nbest, NULL),
		 PCOR_ERR_BADPID);
	CHECK_RC(pcor_place_best(me, (int[]){me, 1 << 20}, 2, best, &nbest,
				 NULL),
		 PCOR_ERR_BADPID);
	CHECK_OK(pcor_place_best(me, cand, 2, best, &nbest, &cls));
	CHECK(nbest == 2 && best[0] == me && best[1] == me &&
	      cls == PCOR_LINK_SELF);
	int pid = -1, thid = -1;
	CHECK_RC(pcor_thread_spawn_near(me, cand, 2, "x", NULL, 0, NULL,
					&thid),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_thread_spawn_near(me, cand, 2, "no-such-function", NULL,
					0, &pid, &thid),
		 PCOR_ERR_NOTFOUND);
	const char *hosts[] = {"localhost", ""};
	char *args[] = {"true", NULL};
	CHECK_RC(pcor_spawn_near(me, hosts, cand, 2, args, &pid),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_spawn_near(me, NULL, cand, 1, args, &pid),
		 PCOR_ERR_INVAL);
	CHECK_RC(pcor_spawn_near(-1, hosts, cand, 1, args, &pid),
		 PCOR_ERR_BADPID);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: route_app CASE [ARG] [MARKER]\n");
		return 2;
	}
	const char *c = argv[1];
	/* Before init: the calls answer NOTINIT. */
	pcor_route_info_t r;
	CHECK_RC(pcor_route_info(0, &r), PCOR_ERR_NOTINIT);
	CHECK_RC(pcor_route_dump(2), PCOR_ERR_NOTINIT);
	CHECK_OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	marker = argv[argc - 1];
	int rc;
	if (!strcmp(c, "api"))
		rc = run_api();
	else if (pcor_nprocs() < 3)
		SKIP("case %s needs pcorrun and 3 processes or more", c);
	else if (!strcmp(c, "relay"))
		rc = run_relay(argc > 3 ? (size_t)atol(argv[2]) : 64 * MiB);
	else if (!strcmp(c, "join"))
		rc = run_join(argv, argc > 3 ? argv[2] : NULL);
	else if (!strcmp(c, "joined"))
		rc = run_joined();
	else if (!strcmp(c, "gwkill"))
		rc = run_gwkill();
	else if (!strcmp(c, "twogw"))
		rc = run_twogw();
	else
		SKIP("unknown case %s", c);
	CHECK_OK(pcor_finalize());
	printf("%s: ok\n", c);
	return rc;
}
