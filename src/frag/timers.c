/*
 * timers.c -- when each send stream wants its timer run: a binary heap of
 * streams keyed by deadline, earliest first, so that whoever makes
 * progress finds what is due without walking every stream.
 *
 * A stream's deadline is the earlier of its resume and retransmission
 * times (retx.c runs what is due).  Keys are lazy: a deadline that moves
 * later (each ack restarts the timeout) leaves the key where it was, and
 * the stream is looked at once at the old time and listed again at the
 * new one.  Only a deadline that moves earlier than the key, or a stream
 * not listed, takes timer_lock.  So with thousands of streams busy, an
 * ack costs no lock here and a drive with nothing due costs one load.
 *
 * A stream's key and its being listed change only under its own lock
 * (and timer_lock); the heap moves it between slots under timer_lock
 * alone.  A stream taken off as due is marked so until retx.c has run
 * it and listed it again if it still waits.
 *
 * The heap never grows on the way to a timer: a slot is reserved for
 * each stream when it is made, where running out of memory can still
 * be reported.
 *
 * Calls no other part of the protocol: when timed work is next due
 * (pcori_timers_next) is read from pcori_net's counters and the heap.
 */
#include "proto.h"

#define SLOT_DUE (-2) /* taken off as due; retx.c lists it again */

/*
 * Block mode: the send threads sleep on the kick word until their next
 * timer is due; new timed work that comes first bumps it.  Each says when
 * it wakes by itself (0: it is awake; UINT64_MAX: it is reading the timers
 * before it sleeps).
 */
static _Atomic uint32_t kick_word;
static _Atomic uint64_t wakes_at[PCORI_MAX_PORTS];

void pcori_timers_kick(void)
{
	if (pcori_net.mode == PCORI_DISPATCH_BLOCK)
		pcori_timers_kick_all();
}

void pcori_timers_kick_all(void)
{
	atomic_fetch_add(&kick_word, 1);
	pcori_futex_wake(&kick_word, INT_MAX);
}

/* Timed work due at `at` was listed: wake a send thread that sleeps past it. */
static void kick_before(uint64_t at)
{
	if (pcori_net.mode != PCORI_DISPATCH_BLOCK)
		return;
	/* The timer was listed before this look; pcori_timers_sleep's side
	 * mirrors it. */
	pcori_fence_full();
	for (int i = 0; i < pcori_net.nports; i++)
		if (atomic_load_explicit(&wakes_at[i], memory_order_relaxed) <=
		    at)
			return; /* that thread looks again by then */
	pcori_timers_kick();
}

uint32_t pcori_timers_kick_seen(void)
{
	return atomic_load(&kick_word);
}

void pcori_timers_sleep(int idx, uint32_t seen, int64_t max_ns)
{
	/* Said before the timers are read: see kick_before. */
	atomic_store(&wakes_at[idx], UINT64_MAX);
	int64_t t = pcori_timers_next();
	if (t < 0)
		t = max_ns;
	if (t > 0) {
		atomic_store(&wakes_at[idx], pcori_now_ns() + (uint64_t)t);
		pcori_futex_wait(&kick_word, seen, t);
	}
	atomic_store(&wakes_at[idx], 0);
}

/*
 * A stream whose message the port refused (no room) tries again after
 * 20 us.  Where room comes only from the peer's reading (pcor-shm), that
 * doubles for each refusal in a row up to 64x, and is spread by the
 * number of streams to the same peer refused too, so that together they
 * try about once per 20 us: hundreds of threads sending to one peer
 * through a full ring otherwise each try every 20 us, and the tries,
 * not the messages, take the CPU.  A libfabric provider's queue empties
 * with this process's own progress, within microseconds: there a
 * stream waiting longer only lost time (all to all over net took
 * 1.5x as long).
 */
#define REFUSED_FIRST_NS  20000u
#define REFUSED_SHIFT_MAX 6u
#define REFUSED_MAX_NS	  5000000u

static inline int slot_of(const pcori_txstream_t *ts)
{
	return atomic_load_explicit(&ts->timer_slot, memory_order_relaxed);
}

static inline void slot_set(pcori_txstream_t *ts, int s)
{
	atomic_store_explicit(&ts->timer_slot, s, memory_order_relaxed);
}

/* Put e in slot i.  timer_lock held. */
static inline void heap_put(int i, pcori_timer_ent_t e)
{
	pcori_net.timers[i] = e;
	slot_set(e.ts, i);
}

static void sift_up(int i)
{
	pcori_timer_ent_t e = pcori_net.timers[i];
	while (i > 0) {
		int up = (i - 1) / 2;
		if (pcori_net.timers[up].key <= e.key)
			break;
		heap_put(i, pcori_net.timers[up]);
		i = up;
	}
	heap_put(i, e);
}

static void sift_down(int i)
{
	int n = pcori_net.ntimers;
	pcori_timer_ent_t e = pcori_net.timers[i];
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n &&
		    pcori_net.timers[c + 1].key < pcori_net.timers[c].key)
			c++;
		if (e.key <= pcori_net.timers[c].key)
			break;
		heap_put(i, pcori_net.timers[c]);
		i = c;
	}
	heap_put(i, e);
}

/* The earliest key, for the lock-free look.  timer_lock held. */
static void first_update(void)
{
	uint64_t f = pcori_net.ntimers ? pcori_net.timers[0].key : UINT64_MAX;
	atomic_store_explicit(&pcori_net.timer_first, f, memory_order_relaxed);
}

/* Take the root off.  timer_lock held, heap not empty. */
static pcori_txstream_t *heap_pop(void)
{
	pcori_txstream_t *ts = pcori_net.timers[0].ts;
	int n = --pcori_net.ntimers;
	if (n > 0) {
		pcori_net.timers[0] = pcori_net.timers[n];
		sift_down(0);
	}
	return ts;
}

/* When ts wants its timer run: 0 if at once (nothing left to wait for). */
static uint64_t deadline(const pcori_txstream_t *ts)
{
	uint64_t r = atomic_load_explicit(&ts->resume_ns, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&ts->rto_ns, memory_order_relaxed);
	return r && t ? PCORI_MIN(r, t) : r | t;
}

/*
 * Have ts's timer run no later than at.  Stream lock held.  When at is
 * now the earliest of all, a send thread of block mode that would sleep
 * past it is woken.
 */
static void want(pcori_txstream_t *ts, uint64_t at)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	int s = slot_of(ts);
	/* Due already, and run with the stream's times as they are then. */
	if (s == SLOT_DUE)
		return;
	if (s != PCORI_TIMER_UNLISTED && ts->timer_key <= at)
		return; /* looked at earlier anyway */
	pcori_lock(&pcori_net.timer_lock);
	s = slot_of(ts);
	bool first = false;
	if (s != SLOT_DUE) {
		ts->timer_key = at;
		if (s == PCORI_TIMER_UNLISTED) {
			s = pcori_net.ntimers++;
			PCORI_ASSERT(s < pcori_net.timers_cap);
			pcori_net.timers[s] = (pcori_timer_ent_t){at, ts};
		} else {
			pcori_net.timers[s].key = at;
		}
		sift_up(s);
		first = pcori_net.timers[0].ts == ts;
		if (first)
			first_update();
	}
	pcori_unlock(&pcori_net.timer_lock);
	if (first)
		kick_before(at);
}

bool pcori_timers_reserve(void)
{
	bool ok = true;
	pcori_lock(&pcori_net.timer_lock);
	if (pcori_net.nstreams == pcori_net.timers_cap) {
		int cap = pcori_net.timers_cap ? 2 * pcori_net.timers_cap : 64;
		pcori_timer_ent_t *t =
		    realloc(pcori_net.timers, (size_t)cap * sizeof(*t));
		if (t) {
			pcori_net.timers = t;
			pcori_net.timers_cap = cap;
		}
		ok = t != NULL;
	}
	if (ok)
		pcori_net.nstreams++;
	pcori_unlock(&pcori_net.timer_lock);
	return ok;
}

void pcori_timers_unreserve(void)
{
	pcori_lock(&pcori_net.timer_lock);
	pcori_net.nstreams--;
	pcori_unlock(&pcori_net.timer_lock);
}

void pcori_timers_fini(void)
{
	free(pcori_net.timers);
	pcori_net.timers = NULL;
	pcori_net.timers_cap = pcori_net.ntimers = pcori_net.nstreams = 0;
	atomic_store(&pcori_net.timer_first, UINT64_MAX);
}

void pcori_timer_list(pcori_txstream_t *ts)
{
	want(ts, deadline(ts));
}

void pcori_timer_arm(pcori_txstream_t *ts, uint64_t when)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	when = when ? when : 1;
	atomic_store_explicit(&ts->resume_ns, when, memory_order_relaxed);
	want(ts, when);
}

void pcori_timer_refused(pcori_txstream_t *ts)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	const pcori_route_t *rt = pcori_peer_route(ts->peer);
	uint64_t wait = REFUSED_FIRST_NS;
	if (rt && rt->port->room_from_peer) {
		if (!ts->refused++)
			atomic_fetch_add_explicit(&ts->peer->nrefused, 1,
						  memory_order_relaxed);
		uint64_t spread = (uint64_t)atomic_load_explicit(
		    &ts->peer->nrefused, memory_order_relaxed);
		uint64_t k = PCORI_MIN(ts->refused - 1, REFUSED_SHIFT_MAX);
		wait = PCORI_MIN(REFUSED_FIRST_NS *
				     PCORI_MAX((uint64_t)1 << k, spread),
				 REFUSED_MAX_NS);
	}
	pcori_timer_arm(ts, pcori_now_ns() + wait);
}

void pcori_timer_accepted(pcori_txstream_t *ts)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	if (ts->refused) {
		ts->refused = 0;
		atomic_fetch_sub_explicit(&ts->peer->nrefused, 1,
					  memory_order_relaxed);
	}
}

void pcori_timer_rto(pcori_txstream_t *ts, uint64_t at)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	atomic_store_explicit(&ts->rto_ns, at, memory_order_relaxed);
	want(ts, at);
}

int pcori_timers_due(uint64_t now, pcori_list_t *due)
{
	uint64_t f =
	    atomic_load_explicit(&pcori_net.timer_first, memory_order_relaxed);
	if (f > now)
		return 0;
	/*
	 * Another thread taking due streams off runs them: no need to
	 * wait for it.  Hundreds of threads driving on two cores would
	 * otherwise queue here on every drive once anything is due.
	 */
	if (!pcori_trylock(&pcori_net.timer_lock))
		return 0;
	int n = 0;
	while (pcori_net.ntimers && pcori_net.timers[0].key <= now) {
		pcori_txstream_t *ts = heap_pop();
		slot_set(ts, SLOT_DUE);
		pcori_list_push_back(due, &ts->timer_link);
		n++;
	}
	first_update();
	pcori_unlock(&pcori_net.timer_lock);
	return n;
}

bool pcori_timers_none(void)
{
	return atomic_load_explicit(&pcori_net.timer_first,
				    memory_order_relaxed) == UINT64_MAX;
}

int64_t pcori_timers_first_in(uint64_t now)
{
	uint64_t f =
	    atomic_load_explicit(&pcori_net.timer_first, memory_order_relaxed);
	if (f == UINT64_MAX)
		return -1;
	return f > now ? (int64_t)(f - now) : 0;
}

/* Timed work of every part: the streams' heap, ctl.c's queue, acks owed. */
int64_t pcori_timers_next(void)
{
	if (atomic_load(&pcori_net.nreadq) || atomic_load(&pcori_net.nctlq))
		return 0;
	if (atomic_load(&pcori_net.nleaving))
		return 10000000; /* look again in 10 ms */
	int64_t best = INT64_MAX;
	uint64_t now = pcori_now_ns();
	uint64_t watch = atomic_load(&pcori_net.nwatched)
			     ? atomic_load(&pcori_net.watch_next_ns)
			     : 0;
	if (watch)
		best = watch > now ? (int64_t)(watch - now) : 0;
	/* Lazy acks are not sent before sleeping: wake for them. */
	if (atomic_load(&pcori_net.acks_lazy))
		best = PCORI_MIN(best, (int64_t)PCORI_FAST_ACK_DELAY_NS);
	/* Nor are gaps asked again: look at them as often as they could be. */
	if (atomic_load(&pcori_net.gaps_pending))
		best = PCORI_MIN(best, (int64_t)PCORI_REASK_NS);
	int64_t t = pcori_timers_first_in(now);
	if (t >= 0)
		best = PCORI_MIN(best, t);
	return best == INT64_MAX ? -1 : best;
}

uint64_t pcori_timer_taken(pcori_txstream_t *ts)
{
	PCORI_ASSERT_LOCKED(&ts->lock);
	pcori_list_remove(&ts->timer_link);
	slot_set(ts, PCORI_TIMER_UNLISTED);
	return deadline(ts);
}
