/*
 * timers -- the heap of send streams' timers (frag/timers.c): against a
 * model over random arms, clears and runs, its shape after every step
 * (heap order, slots, the earliest key), that no stream due is ever
 * passed over, and the same with threads arming and running at once;
 * the back-off after a port's refusals.
 */
#include "frag/proto.h"

#include "../common.h"

#define NSTREAMS 300
#define STEPS	 30000

static pcori_txstream_t *streams[NSTREAMS];

static void setup(void)
{
	memset(&pcori_net, 0, sizeof(pcori_net));
	pcori_lock_init(&pcori_net.timer_lock);
	atomic_init(&pcori_net.timer_first, UINT64_MAX);
	for (int i = 0; i < NSTREAMS; i++) {
		CHECK(pcori_timers_reserve());
		pcori_txstream_t *ts = calloc(1, sizeof(*ts));
		CHECK(ts != NULL);
		pcori_lock_init(&ts->lock);
		pcori_list_init(&ts->timer_link);
		atomic_init(&ts->timer_slot, PCORI_TIMER_UNLISTED);
		streams[i] = ts;
	}
	CHECK(pcori_net.timers_cap >= NSTREAMS);
}

static void teardown(void)
{
	for (int i = 0; i < NSTREAMS; i++)
		free(streams[i]);
	pcori_timers_fini();
	CHECK(pcori_timers_first_in(0) == -1);
}

static uint64_t deadline_of(const pcori_txstream_t *ts)
{
	uint64_t r = atomic_load(&ts->resume_ns), t = atomic_load(&ts->rto_ns);
	return r && t ? (r < t ? r : t) : r | t;
}

/* Heap order, slots and keys as the streams see them; the root's key. */
static void check_shape(void)
{
	int n = pcori_net.ntimers;
	CHECK(n >= 0 && n <= pcori_net.timers_cap);
	uint64_t min = UINT64_MAX;
	for (int i = 0; i < n; i++) {
		pcori_timer_ent_t *e = &pcori_net.timers[i];
		CHECK(atomic_load(&e->ts->timer_slot) == i);
		CHECK(e->ts->timer_key == e->key);
		if (i)
			CHECK(pcori_net.timers[(i - 1) / 2].key <= e->key);
		if (e->key < min)
			min = e->key;
	}
	CHECK(atomic_load(&pcori_net.timer_first) == min);
}

/*
 * A stream that waits for something is listed, never later than it
 * waits for (keys may be early: see timers.c).
 */
static void check_listed(void)
{
	for (int i = 0; i < NSTREAMS; i++) {
		pcori_txstream_t *ts = streams[i];
		uint64_t d = deadline_of(ts);
		if (!d)
			continue;
		CHECK(atomic_load(&ts->timer_slot) >= 0);
		CHECK(ts->timer_key <= d);
	}
}

/*
 * What retx.c does with a due stream, reduced to the timer: a key that
 * was early is listed again; a stream due has what passed cleared and
 * is listed again if it still waits; one that waits for nothing stays
 * off.  Returns whether it was due.
 */
static bool run_one(pcori_txstream_t *ts, uint64_t now)
{
	pcori_lock(&ts->lock);
	uint64_t at = pcori_timer_taken(ts);
	bool due = at && at <= now; /* 0: it waits for nothing any more */
	if (due) {
		if (atomic_load(&ts->resume_ns) <= now)
			atomic_store(&ts->resume_ns, 0);
		if (atomic_load(&ts->rto_ns) <= now)
			atomic_store(&ts->rto_ns, 0);
	}
	if (deadline_of(ts))
		pcori_timer_list(ts);
	pcori_unlock(&ts->lock);
	return due;
}

static void test_model(void)
{
	setup();
	uint64_t now = 1000, rng = 12345;
	int runs = 0;
	for (int step = 0; step < STEPS; step++) {
		rng = th_mix(rng);
		pcori_txstream_t *ts = streams[rng % NSTREAMS];
		switch ((rng >> 20) % 6) {
		case 0: /* a refusal or a NACK's back-off */
			pcori_lock(&ts->lock);
			pcori_timer_arm(ts, now + (rng >> 32) % 1000);
			pcori_unlock(&ts->lock);
			break;
		case 1: /* a timeout armed, or restarted by an ack */
		case 2:
			pcori_lock(&ts->lock);
			pcori_timer_rto(ts, now + 1 + (rng >> 32) % 5000);
			pcori_unlock(&ts->lock);
			break;
		case 3: /* all acknowledged: nothing to wait for */
			pcori_lock(&ts->lock);
			atomic_store(&ts->resume_ns, 0);
			atomic_store(&ts->rto_ns, 0);
			pcori_unlock(&ts->lock);
			break;
		case 4: { /* run what is due, as whoever drives does */
			bool was_due[NSTREAMS];
			for (int i = 0; i < NSTREAMS; i++) {
				uint64_t d = deadline_of(streams[i]);
				was_due[i] = d && d <= now;
			}
			pcori_list_t due;
			pcori_list_init(&due);
			pcori_timers_due(now, &due);
			while (!pcori_list_empty(&due)) {
				pcori_txstream_t *t = PCORI_CONTAINER_OF(
				    due.next, pcori_txstream_t, timer_link);
				int k = 0;
				while (streams[k] != t)
					k++;
				if (run_one(t, now)) {
					CHECK(was_due[k]);
					was_due[k] = false;
					runs++;
				}
			}
			/* None that was due is passed over. */
			for (int i = 0; i < NSTREAMS; i++)
				CHECK(!was_due[i]);
			CHECK(pcori_timers_first_in(now) != 0);
			break;
		}
		default:
			now += (rng >> 32) % 400;
			break;
		}
		check_shape();
		check_listed();
	}
	CHECK(runs > STEPS / 20);
	teardown();
}

/*
 * Threads arm their own streams and run whatever is due, anyone's, at
 * once.  Each stream's last arm must be run: none is lost in a race
 * between an arm and a run taking the stream off.
 */
#define TTHREADS 4
#define TROUNDS	 3000

static _Atomic uint64_t ran_at[NSTREAMS]; /* deadline of the last run */

static int index_of(pcori_txstream_t *t)
{
	for (int k = 0; k < NSTREAMS; k++)
		if (streams[k] == t)
			return k;
	return -1;
}

static void run_due(void)
{
	uint64_t now = th_now_ns();
	pcori_list_t due;
	pcori_list_init(&due);
	pcori_timers_due(now, &due);
	while (!pcori_list_empty(&due)) {
		pcori_txstream_t *t =
		    PCORI_CONTAINER_OF(due.next, pcori_txstream_t, timer_link);
		int k = index_of(t);
		CHECK(k >= 0);
		pcori_lock(&t->lock);
		uint64_t at = pcori_timer_taken(t);
		if (at && at <= now) {
			atomic_store(&ran_at[k], at);
			atomic_store(&t->resume_ns, 0);
		} else if (at) {
			pcori_timer_list(t);
		}
		pcori_unlock(&t->lock);
	}
}

static void *arm_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t rng = (uint64_t)id * 7919 + 1;
	for (int r = 0; r < TROUNDS; r++) {
		rng = th_mix(rng);
		int k =
		    id + TTHREADS * (int)((rng >> 8) % (NSTREAMS / TTHREADS));
		pcori_txstream_t *ts = streams[k];
		pcori_lock(&ts->lock);
		/* Due within 0-50 us: early and late ones mix. */
		pcori_timer_arm(ts, th_now_ns() + (rng >> 40) % 50000);
		pcori_unlock(&ts->lock);
		run_due();
	}
	return NULL;
}

static void test_threads(void)
{
	setup();
	pthread_t th[TTHREADS];
	for (int i = 0; i < TTHREADS; i++)
		CHECK(pthread_create(&th[i], NULL, arm_thread,
				     (void *)(intptr_t)i) == 0);
	for (int i = 0; i < TTHREADS; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	/* Run out what is left: everything is due within 50 us. */
	uint64_t end = th_now_ns() + 10000000000ull;
	while (pcori_timers_first_in(UINT64_MAX) >= 0 && th_now_ns() < end)
		run_due();
	CHECK(pcori_timers_first_in(UINT64_MAX) == -1);
	int armed = 0;
	for (int k = 0; k < NSTREAMS; k++) {
		/* Every arm's time was run: nothing waits any more. */
		CHECK(atomic_load(&streams[k]->resume_ns) == 0);
		CHECK(atomic_load(&streams[k]->timer_slot) ==
		      PCORI_TIMER_UNLISTED);
		armed += atomic_load(&ran_at[k]) != 0;
	}
	CHECK(armed > NSTREAMS / 2);
	check_shape();
	teardown();
}

static void test_reserve(void)
{
	memset(&pcori_net, 0, sizeof(pcori_net));
	pcori_lock_init(&pcori_net.timer_lock);
	atomic_init(&pcori_net.timer_first, UINT64_MAX);
	for (int i = 0; i < 1000; i++)
		CHECK(pcori_timers_reserve());
	CHECK(pcori_net.nstreams == 1000 && pcori_net.timers_cap >= 1000);
	pcori_timers_unreserve();
	CHECK(pcori_net.nstreams == 999);
	pcori_timers_fini();
	CHECK(pcori_net.timers == NULL && pcori_net.nstreams == 0);
}

/*
 * A port's refusals: where the peer frees the room, the try again backs
 * off with refusals in a row and spreads over the streams to the same
 * peer refused too, and one taken ends both; elsewhere it stays 20 us.
 */
/* Refuse ts once; that its try again is wait ns after the call. */
static void check_refused(pcori_txstream_t *ts, uint64_t wait)
{
	pcori_lock(&ts->lock);
	uint64_t t0 = th_now_ns();
	pcori_timer_refused(ts);
	uint64_t t1 = th_now_ns(), at = atomic_load(&ts->resume_ns);
	pcori_unlock(&ts->lock);
	CHECK(at >= t0 + wait && at <= t1 + wait);
}

static void test_refused(void)
{
	setup();
	/* A peer reached through a port whose room its peer frees. */
	static pcori_port_t port;
	static pcori_route_t route = {.port = &port, .hops = 1};
	port.room_from_peer = true;
	pcori_peer_t *peer = calloc(1, sizeof(*peer));
	CHECK(peer != NULL);
	atomic_store(&peer->route, &route);
	for (int i = 0; i < NSTREAMS; i++)
		streams[i]->peer = peer;
	pcori_txstream_t *a = streams[0];
	for (int k = 0; k < 10; k++) {
		/* 20 us, doubling, up to 64 times that. */
		check_refused(a, 20000ull << (k < 6 ? k : 6));
		CHECK(atomic_load(&peer->nrefused) == 1);
	}
	/* 100 more streams refused: each waits for its turn among them. */
	for (int i = 1; i <= 100; i++) {
		pcori_lock(&streams[i]->lock);
		pcori_timer_refused(streams[i]);
		pcori_unlock(&streams[i]->lock);
	}
	CHECK(atomic_load(&peer->nrefused) == 101);
	pcori_txstream_t *b = streams[101];
	check_refused(b, 102 * 20000ull);
	pcori_lock(&b->lock);
	pcori_timer_accepted(b);
	pcori_timer_accepted(b); /* once only */
	pcori_unlock(&b->lock);
	CHECK(atomic_load(&peer->nrefused) == 101);
	for (int i = 0; i <= 100; i++) {
		pcori_lock(&streams[i]->lock);
		pcori_timer_accepted(streams[i]);
		CHECK(streams[i]->refused == 0);
		pcori_unlock(&streams[i]->lock);
	}
	CHECK(atomic_load(&peer->nrefused) == 0);

	/* A provider's queue: 20 us each time, nothing counted. */
	port.room_from_peer = false;
	for (int k = 0; k < 3; k++) {
		check_refused(a, 20000);
		CHECK(atomic_load(&peer->nrefused) == 0 && a->refused == 0);
	}
	check_shape();
	check_listed();
	teardown();
	free(peer);
}

int main(void)
{
	test_reserve();
	test_refused();
	test_model();
	test_threads();
	return 0;
}
