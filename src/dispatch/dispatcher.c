/*
 * dispatcher.c -- bringing ports up and down, the dispatcher threads, and
 * progress shared with waiting threads.
 *
 * Design notes
 *  - One dispatcher per port.  poll: it spins on the port.  block (the
 *    paper's design): one thread sleeps in the fabric's wait object for
 *    arrivals and one on the send queue for timed resends.  adaptive:
 *    spins PCOR_DISPATCH_SPIN_NS after the last event, then blocks.
 *  - A thread waiting for a remote request drives its own progress, in
 *    every mode.  For PCOR_SPIN_NS it polls the port its message comes
 *    through (every port for a wildcard source), so the message needs
 *    no thread switch and no other port's dispatcher is kept from
 *    serving, or sleeping in, its own port.  Then it sleeps in that
 *    port, where the sender sees it asleep and wakes it: one wake-up
 *    per message, and the waiter matches for itself.  One such sleeper
 *    per port; other waiters sleep on their request word.  A port that
 *    cannot be slept in (libfabric) has its one sleeper spin instead for
 *    as long as its dispatcher would have spun (drive_spin), then sleep
 *    on its word.  The modes differ in what dispatchers do when nobody
 *    waits.
 *  - Meanwhile the dispatchers of those ports step aside, parked on
 *    drive_word: while a waiter spins on their port or sleeps in it,
 *    and for DRIVE_GRACE_NS after (a ping-pong comes back within it) --
 *    but never while a waiter sleeps on its word, since nobody else
 *    would complete it.  A dispatcher never sleeps holding a port that
 *    waiters could poll.
 *  - Whoever goes to sleep first sends every held-back ack, so a peer
 *    never waits on an ack from a process that sleeps.
 */
#include "dispatch.h"

#include <sched.h>
#include <time.h>

#define DRIVE_GRACE_NS 200000
/*
 * A parked dispatcher looks again after this while a waiter is at work
 * on its port (a waiter that starts sleeping on its word calls it back
 * at once): each look is a thread switch on a core the waiters spin on;
 * one a millisecond took a tcp ping-pong's 99th percentile from about 8
 * to 17 us.  A rendezvous in flight looks every
 * PARK_BUSY_NS: its data moves only while both ends make progress.
 */
#define PARK_MAX_NS 10000000
#define PARK_BUSY_NS 1000000
#define BLOCK_MAX_MS 100
#define SLEEP_MAX_NS 100000000 /* a sleeping waiter looks around after */
/* A waiter spinning in a dispatcher's place reads the clock every this
 * many polls, and yields its CPU this often (as in pcor_handle_test). */
#define SPIN_CLOCK_POLLS 16u
#define SPIN_YIELD_NS 2000

static _Atomic bool port_waiting[PCORI_MAX_PORTS];
/*
 * Guards ports_open: a membership event may come from the directory's
 * thread while finalize closes the ports (pcori_net_peer_gone).
 */
static pcori_lock_t gone_lock = PCORI_LOCK_INITIALIZER;
static bool ports_open;

int pcori_progress(void)
{
	int n = 0;
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		if (pcori_trylock(&p->progress_lock)) {
			n += p->ops->progress(p, 0);
			pcori_unlock(&p->progress_lock);
		}
	}
	n += pcori_timers_run();
	n += pcori_acks_flush(false);
	return n;
}

/* ---------------------------------------------------------- driving */

/* The ports this thread spin-polls between drive begin and end. */
static _Thread_local uint32_t driving __attribute__((tls_model("initial-exec")));
/*
 * The port, when driving names only one (a wait for a named process,
 * the common case): its polls and its end then skip the loop over the
 * ports, which is on the path of every answer.
 */
static _Thread_local pcori_port_t *drive_one
	__attribute__((tls_model("initial-exec")));
/*
 * And what drive_one's kind watches of the awaited peer (its watch op;
 * 0: nothing): most polls look only there, every DRIVE_TIMER_EVERY-th
 * at the whole port.
 */
static _Thread_local uint64_t drive_watch
	__attribute__((tls_model("initial-exec")));
/* This thread's byte in the driven ports' drive_slot; -1: counted. */
static _Thread_local int drive_me __attribute__((tls_model("initial-exec")));
/* Polls since this thread last looked at timers and held-back acks. */
static _Thread_local uint32_t drive_ticks __attribute__((tls_model("initial-exec")));
/*
 * A spinning waiter looks at timed work every this many polls: none of it
 * is due within a poll, and skipping it keeps each round to the port's
 * own check (a message that lands mid-round waits less for its turn).
 */
#define DRIVE_TIMER_EVERY 16u

/*
 * The ports r's message can come through, one bit per port: its peer's
 * route port when it names a process (polling the others would cost the
 * waiter a fabric call each round -- a system call on tcp -- and
 * keep their dispatchers from sleeping in them); every port otherwise.
 */
static uint32_t drive_mask(const pcori_req_t *r, pcori_route_t **rt_p)
{
	uint32_t all = (1u << pcori_net.nports) - 1;
	*rt_p = NULL;
	if (!r || r->pid < 0 || r->pid == pcori_rt.pid)
		return all;
	pcori_peer_t *peer = pcori_peer_get(r->pid);
	pcori_route_t *rt = peer ? pcori_peer_route(peer) : NULL;
	*rt_p = rt;
	return rt ? 1u << rt->port->index : all;
}

/*
 * When a driver last read the clock.  A wait that ends within its first
 * polls reads none (a clock read costs as much as a round of polling):
 * its end is stamped with this, refreshed every DRIVE_CLOCK_EVERY such
 * waits, so the stamp lags by a few microseconds, far inside the grace.
 */
static _Thread_local uint64_t drive_clock __attribute__((tls_model("initial-exec")));
static _Thread_local uint32_t drive_clock_age __attribute__((tls_model("initial-exec")));
#define DRIVE_CLOCK_EVERY 16u

/*
 * While noted as driving it, a port needs no time stamp.  A byte's store
 * is fenced by the caller before drive_nudge looks (port_block stores,
 * then looks at us); the count's add is a fence.
 */
static inline void drive_note(pcori_port_t *p)
{
	if (drive_me >= 0)
		atomic_store_explicit(&p->drive_slot[drive_me], 1,
				      memory_order_relaxed);
	else
		atomic_fetch_add(&p->drivers, 1);
}

/*
 * A dispatcher asleep in a port we poll without it would be woken by
 * every sender there: send it to its parking place.  (One asleep inside
 * progress holds the port; it serves it.)
 */
static inline void drive_nudge(pcori_port_t *p)
{
	if (p->ops->wait &&
	    atomic_load_explicit(&port_waiting[p->index], memory_order_relaxed))
		p->ops->signal(p);
}

void pcori_drive_begin(pcori_req_t *r)
{
	pcori_route_t *rt;
	uint32_t mask = drive_mask(r, &rt);
	driving = mask;
	drive_one = mask && !(mask & (mask - 1))
			    ? pcori_net.ports[__builtin_ctz(mask)]
			    : NULL;
	/* Only a direct route's port carries what its peer writes. */
	drive_watch = rt && rt->hops == 1 && rt->port->ops->watch
			  ? rt->port->ops->watch(rt->port, rt->dest)
			  : 0;
	int me = pcori_self_thid();
	drive_me = me >= 0 && me < PCORI_DRIVE_SLOTS ? me : -1;
	/* One port, the usual case: no loop over the ports. */
	if (drive_one) {
		drive_note(drive_one);
		if (drive_me >= 0)
			pcori_fence_full();
		drive_nudge(drive_one);
		return;
	}
	for (int i = 0; i < pcori_net.nports; i++)
		if (mask & (1u << i))
			drive_note(pcori_net.ports[i]);
	if (drive_me >= 0)
		pcori_fence_full();
	for (int i = 0; i < pcori_net.nports; i++)
		if (mask & (1u << i))
			drive_nudge(pcori_net.ports[i]);
}

/* One look at p, unless another thread is polling it. */
static inline int drive_port(pcori_port_t *p)
{
	if (!pcori_trylock(&p->progress_lock))
		return 0;
	int n = p->ops->progress(p, 0);
	pcori_unlock(&p->progress_lock);
	return n;
}

/* A poll of every port driven, with timed work when due. */
static PCORI_NOINLINE int drive_poll_whole(pcori_req_t *r)
{
	int n = 0;
	if (PCORI_LIKELY(drive_one)) {
		n = drive_port(drive_one);
	} else {
		pcori_route_t *rt;
		uint32_t mask = driving ? driving : drive_mask(r, &rt);
		for (int i = 0; i < pcori_net.nports; i++)
			if (mask & (1u << i))
				n += drive_port(pcori_net.ports[i]);
	}
	if (++drive_ticks >= DRIVE_TIMER_EVERY) {
		drive_ticks = 0;
		n += pcori_timers_run();
		n += pcori_acks_flush(false);
	}
	return n;
}

/* A tail call either way: the watched look needs no frame of ours. */
static int drive_poll(pcori_req_t *r)
{
	if (PCORI_LIKELY(drive_watch) && drive_ticks < DRIVE_TIMER_EVERY - 1) {
		drive_ticks++;
		return drive_one->ops->progress_watched(drive_one, drive_watch);
	}
	return drive_poll_whole(r);
}

/*
 * The grace period of p runs from here (stamped before the count drops,
 * so a dispatcher never sees neither).
 */
static inline void drive_leave(pcori_port_t *p)
{
	atomic_store_explicit(&p->drive_ns, drive_clock, memory_order_relaxed);
	if (drive_me >= 0)
		atomic_store_explicit(&p->drive_slot[drive_me], 0,
				      memory_order_release);
	else
		atomic_fetch_sub(&p->drivers, 1);
}

void pcori_drive_end(uint64_t now)
{
	if (now) {
		drive_clock = now;
		drive_clock_age = 0;
	} else if (++drive_clock_age >= DRIVE_CLOCK_EVERY || !drive_clock) {
		drive_clock = pcori_now_ns();
		drive_clock_age = 0;
	}
	if (drive_one) {
		drive_leave(drive_one);
	} else {
		for (int i = 0; i < pcori_net.nports; i++)
			if (driving & (1u << i))
				drive_leave(pcori_net.ports[i]);
	}
	driving = 0;
	drive_one = NULL;
	drive_watch = 0;
}

/*
 * The port a request's message comes through, where a waiter sleeps (or,
 * without a wait op, spins in the dispatcher's place): the route's port
 * for a known peer, the only port for any.
 */
static pcori_port_t *sleep_port(int pid)
{
	pcori_port_t *p = NULL;
	if (pid >= 0) {
		if (pid == pcori_rt.pid)
			return NULL;
		pcori_peer_t *peer = pcori_peer_get(pid);
		pcori_route_t *rt = peer ? pcori_peer_route(peer) : NULL;
		p = rt ? rt->port : NULL;
	} else if (pcori_net.nports == 1) {
		p = pcori_net.ports[0];
	}
	return p;
}

/*
 * A port that cannot be slept in (libfabric): a waiter that slept on its
 * word would leave its message to the dispatcher, which spins anyway
 * (PCOR_DISPATCH_SPIN_NS in adaptive mode, always in poll mode) before it
 * sleeps in the fabric -- the same spin, plus a thread switch and a futex
 * wake-up before the waiter runs.  So the port's one sleeper spins that
 * window itself, the dispatcher parked as for a sleeper, and sleeps on
 * its word only after it.  Block mode keeps its sleeping dispatcher.
 * Returns false: the caller sleeps on its word if still pending.
 */
static bool drive_spin(pcori_req_t *r, pcori_port_t *p, uint32_t pending,
		       uint64_t deadline)
{
	int none = 0;
	if (pcori_net.mode == PCORI_DISPATCH_BLOCK ||
	    !atomic_compare_exchange_strong(&p->sleeper, &none, 1))
		return false;
	uint64_t now = pcori_now_ns(), end = deadline;
	if (pcori_net.mode == PCORI_DISPATCH_ADAPTIVE &&
	    now + (uint64_t)pcori_net.spin_ns < end)
		end = now + (uint64_t)pcori_net.spin_ns;
	uint64_t yield_at = now + SPIN_YIELD_NS;
	driving = 1u << p->index;
	for (unsigned i = 1; atomic_load_explicit(&r->state,
						 memory_order_acquire) == pending;
	     i++) {
		drive_poll(r);
		if (i % SPIN_CLOCK_POLLS)
			continue;
		now = pcori_now_ns();
		if (now >= end || atomic_load_explicit(&p->stop,
						       memory_order_relaxed))
			break;
		if (now >= yield_at) { /* as the spinning dispatcher does */
			sched_yield();
			yield_at = now + SPIN_YIELD_NS;
		}
	}
	driving = 0;
	atomic_store_explicit(&p->sleeper_ns, pcori_now_ns(),
			      memory_order_relaxed);
	atomic_store(&p->sleeper, 0);
	return false;
}

static bool drive_sleep(pcori_req_t *r, uint32_t pending, uint64_t deadline)
{
	pcori_port_t *p = sleep_port(r->pid);
	int none = 0;
	if (p && !p->ops->wait)
		return drive_spin(r, p, pending, deadline);
	if (!p || !atomic_compare_exchange_strong(&p->sleeper, &none, 1))
		return false;
	uint64_t now = pcori_now_ns();
	if (now >= deadline) {
		atomic_store(&p->sleeper, 0);
		return false;
	}
	/* Peers must not wait for an ack of ours while we sleep. */
	pcori_acks_flush(true);
	/* Nor must timed work wait: we stand in for the dispatcher. */
	uint64_t left = PCORI_MIN(deadline - now, (uint64_t)SLEEP_MAX_NS);
	int64_t t = pcori_timers_next();
	if (t >= 0 && (uint64_t)t < left)
		left = (uint64_t)t;
	if (left >= 1000000) {
		/*
		 * Whoever completes r wakes us here (pcori_req_wake): named,
		 * counted, fenced before the port's last look at r's word
		 * (the completer's side is pcori_req_complete_nowake).
		 */
		atomic_store(&r->wake_alt, p->wake_word);
		atomic_fetch_add(&r->sleepers, 1);
		int ms = pcori_fence_heavy_local() ? (int)(left / 1000000) : 1;
		p->ops->wait(p, ms, &r->state, pending);
		/* Awake: our own completion need not wake anybody. */
		atomic_fetch_sub(&r->sleepers, 1);
		atomic_store(&r->wake_alt, NULL);
	}
	/* Take what arrived, and what is due. */
	if (pcori_trylock(&p->progress_lock)) {
		p->ops->progress(p, 0);
		pcori_unlock(&p->progress_lock);
	}
	pcori_timers_run();
	pcori_acks_flush(false);
	atomic_store_explicit(&p->sleeper_ns, pcori_now_ns(),
			      memory_order_relaxed);
	atomic_store(&p->sleeper, 0);
	return true;
}

static void drive_word_sleep(int delta)
{
	/* The first to sleep on its word calls parked dispatchers back. */
	if (atomic_fetch_add(&pcori_net.word_sleepers, delta) == 0 &&
	    delta > 0 && atomic_load(&pcori_net.parked)) {
		atomic_fetch_add(&pcori_net.drive_word, 1);
		pcori_futex_wake(&pcori_net.drive_word, INT_MAX);
	}
}

#define UNTIL_SLICE_NS 1000000 /* drive_until looks again after */

/* pcori_drive_ops_t.until */
static bool drive_until(bool (*try_fn)(void *), void *arg,
			pcori_wake_word_t *ww, uint64_t deadline)
{
	uint64_t now = pcori_now_ns();
	uint64_t spin_end = now + (uint64_t)pcori_rt.cfg.spin_ns;
	if (spin_end > deadline)
		spin_end = deadline;
	bool ok = false;
	/* Spin on every port: what we wait for may come through any. */
	pcori_drive_begin(NULL);
	for (unsigned i = 1; !(ok = try_fn(arg)); i++) {
		drive_poll(NULL);
		if ((i & 15) == 0) {
			if (pcori_now_ns() >= spin_end)
				break;
			sched_yield(); /* the peer may wait for this CPU */
		}
	}
	pcori_drive_end(0);
	/* Read before each try: a change after the try shows below. */
	uint32_t w = atomic_load(&ww->word);
	for (unsigned i = 1; !ok; i++) {
		if ((ok = try_fn(arg)))
			break;
		/*
		 * Bumped since that read: something was released after or
		 * during the try.  Look again without a system call -- the
		 * word moves on every release under load, and a sleep per
		 * release would be a thread switch per message.  The clock
		 * is read only every so many of those looks.
		 */
		uint32_t seen = atomic_load(&ww->word);
		bool moved = seen != w;
		w = seen;
		if (!moved || (i & 63) == 0) {
			now = pcori_now_ns();
			if (now >= deadline)
				break;
		}
		if (moved) {
			pcori_progress();
			continue;
		}
		/* Peers must not wait for an ack of ours while we sleep. */
		pcori_acks_flush(true);
		drive_word_sleep(1);
		atomic_fetch_add(&ww->sleepers, 1);
		pcori_futex_wait(&ww->word, w,
				 (int64_t)PCORI_MIN(deadline - now,
						    (uint64_t)UNTIL_SLICE_NS));
		atomic_fetch_sub(&ww->sleepers, 1);
		drive_word_sleep(-1);
		w = atomic_load(&ww->word);
		pcori_progress();
	}
	return ok;
}

static const pcori_drive_ops_t drive_ops = {
	.begin = pcori_drive_begin,
	.poll = drive_poll,
	.end = pcori_drive_end,
	.sleep = drive_sleep,
	.word_sleep = drive_word_sleep,
	.until = drive_until,
};

/* Does a waiter spin-poll p itself?  (Acquire: then its stamp is seen.) */
static bool port_has_driver(const pcori_port_t *p)
{
	if (atomic_load_explicit(&p->drivers, memory_order_relaxed))
		return true;
	for (int i = 0; i < PCORI_DRIVE_SLOTS; i++)
		if (atomic_load_explicit(&p->drive_slot[i],
					 memory_order_acquire))
			return true;
	return false;
}

/* When a waiter last stopped spinning on p or sleeping in it (0: never). */
static uint64_t driven_last(const pcori_port_t *p)
{
	return PCORI_MAX(
		atomic_load_explicit(&p->drive_ns, memory_order_relaxed),
		atomic_load_explicit(&p->sleeper_ns, memory_order_relaxed));
}

/*
 * Does p's dispatcher step aside?  While a waiter spin-polls every port,
 * or one sleeps in p, and for a grace period after (a ping-pong comes
 * back within it) -- unless a waiter sleeps on its word and needs it.
 */
static bool port_driven(pcori_port_t *p)
{
	if (port_has_driver(p))
		return true;
	if (atomic_load_explicit(&pcori_net.word_sleepers,
				 memory_order_relaxed))
		return false;
	if (atomic_load_explicit(&p->sleeper, memory_order_relaxed))
		return true;
	uint64_t last = driven_last(p);
	return last && pcori_now_ns() - last < DRIVE_GRACE_NS;
}

/* How long a parked dispatcher of p may wait before it looks again. */
static int64_t park_ns(pcori_port_t *p)
{
	if (port_has_driver(p) ||
	    atomic_load_explicit(&p->sleeper, memory_order_relaxed))
		return atomic_load_explicit(&p->busy, memory_order_relaxed)
			       ? PARK_BUSY_NS
			       : PARK_MAX_NS;
	/* Only the grace period is left: wait out what remains of it. */
	uint64_t last = driven_last(p);
	uint64_t now = pcori_now_ns();
	if (!last || now - last >= DRIVE_GRACE_NS)
		return 1000; /* already over: just a look */
	return (int64_t)(DRIVE_GRACE_NS - (now - last));
}

static int block_timeout_ms(void)
{
	int64_t t = pcori_timers_next();
	if (t < 0)
		return BLOCK_MAX_MS;
	int ms = (int)((t + 999999) / 1000000);
	return ms < 1 ? 1 : PCORI_MIN(ms, BLOCK_MAX_MS);
}

/* Sleep in the port until something arrives or timed work is due. */
static void port_block(pcori_port_t *p)
{
	pcori_acks_flush(true);
	if (p->ops->wait) {
		/* Not holding the port: a waiter may poll it meanwhile. */
		atomic_store(&port_waiting[p->index], true);
		if (!port_driven(p) && !atomic_load(&p->stop))
			p->ops->wait(p, block_timeout_ms(), NULL, 0);
		atomic_store(&port_waiting[p->index], false);
		return;
	}
	if (!pcori_trylock(&p->progress_lock)) {
		sched_yield();
		return;
	}
	atomic_store(&port_waiting[p->index], true);
	/* A driver that began meanwhile would not have signalled us. */
	if (!port_driven(p) && !atomic_load(&p->stop))
		p->ops->progress(p, block_timeout_ms());
	atomic_store(&port_waiting[p->index], false);
	pcori_unlock(&p->progress_lock);
}

/*
 * Poll mode: does a thread of ours spin on another port, or did one
 * within the grace period?  This port's dispatcher, spinning meanwhile,
 * would only take CPU from it: with few cores it shares one with that
 * waiter or with its peer, and a ping-pong then waits for thread
 * switches (one run in four to ten settled there, 20 times slower).  So
 * it spins and blocks as in adaptive mode until they stop; an arrival on
 * its own port wakes it.
 */
static bool driven_elsewhere(const pcori_port_t *p)
{
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *q = pcori_net.ports[i];
		if (q == p)
			continue;
		if (port_has_driver(q))
			return true;
		uint64_t last = driven_last(q);
		if (last && pcori_now_ns() - last < DRIVE_GRACE_NS)
			return true;
	}
	return false;
}

static void *rx_main(void *arg)
{
	pcori_port_t *p = arg;
	uint64_t idle_since = pcori_now_ns();
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		if (port_driven(p)) {
			uint32_t w = atomic_load(&pcori_net.drive_word);
			atomic_fetch_add(&pcori_net.parked, 1);
			if (port_driven(p))
				pcori_futex_wait(&pcori_net.drive_word, w,
						 park_ns(p));
			atomic_fetch_sub(&pcori_net.parked, 1);
			idle_since = pcori_now_ns();
			continue;
		}
		int n = 0;
		if (pcori_trylock(&p->progress_lock)) {
			n = p->ops->progress(p, 0);
			pcori_unlock(&p->progress_lock);
		}
		if (p->mode != PCORI_DISPATCH_BLOCK)
			n += pcori_timers_run() + pcori_acks_flush(false);
		if (n) {
			idle_since = pcori_now_ns();
			continue;
		}
		/* Not idle while a rendezvous moves: its data needs us. */
		if ((p->mode == PCORI_DISPATCH_POLL && !driven_elsewhere(p)) ||
		    atomic_load_explicit(&p->busy, memory_order_relaxed) ||
		    (p->mode != PCORI_DISPATCH_BLOCK &&
		     pcori_now_ns() - idle_since <
			     (uint64_t)pcori_net.spin_ns)) {
			/*
			 * Yield, not just pause: a thread it has just woken
			 * may be waiting for this very CPU (few cores, or
			 * PCOR_AFFINITY), and would otherwise wait out the
			 * whole spin window.
			 */
			sched_yield();
			continue;
		}
		port_block(p);
		idle_since = pcori_now_ns();
	}
	return NULL;
}

/* Block mode: the paper's second thread, sleeping on the send queue. */
static void *tx_main(void *arg)
{
	pcori_port_t *p = arg;
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		uint32_t w = pcori_timers_kick_seen();
		if (pcori_timers_run() + pcori_acks_flush(false))
			continue;
		pcori_timers_sleep(p->index, w, (int64_t)BLOCK_MAX_MS * 1000000);
	}
	return NULL;
}

/* -------------------------------------------------------- lifecycle */

static int parse_mode(const char *s, pcori_dispatch_mode_t *m)
{
	if (!strcmp(s, "poll"))
		*m = PCORI_DISPATCH_POLL;
	else if (!strcmp(s, "block"))
		*m = PCORI_DISPATCH_BLOCK;
	else if (!strcmp(s, "adaptive"))
		*m = PCORI_DISPATCH_ADAPTIVE;
	else
		return -1;
	return 0;
}

int pcori_net_init(const pcori_config_t *cfg, const pcori_boot_t *boot,
		   pcori_member_t *self)
{
	pcori_net_t *n = &pcori_net;
	memset(n, 0, sizeof(*n));
	if (parse_mode(cfg->dispatch, &n->mode)) {
		PCORI_ERROR(PCORI_SUB_DISPATCH,
			    "PCOR_DISPATCH=\"%s\": use poll, block or adaptive",
			    cfg->dispatch);
		return PCOR_ERR_INVAL;
	}
	if (strcmp(cfg->rndv, "read") && strcmp(cfg->rndv, "stream")) {
		PCORI_ERROR(PCORI_SUB_DISPATCH,
			    "PCOR_RNDV=\"%s\": use read or stream", cfg->rndv);
		return PCOR_ERR_INVAL;
	}
	n->force_stream = !strcmp(cfg->rndv, "stream");
	n->one_host = boot->one_host && !boot->spawned;
	n->frag_size = (size_t)cfg->frag_size;
	n->eager_max = PCORI_MIN((size_t)cfg->eager_max,
				 PCORI_FRAG_WINDOW * n->frag_size);
	/* One fragment: a fast message is one frame. */
	n->fast_max = PCORI_MIN(n->eager_max, n->frag_size);
	n->txb.max = cfg->send_bytes;
	n->spin_ns = cfg->dispatch_spin_ns;
	n->lim.key_check = boot->key_check;
	n->lim.max_threads = pcori_rt.max_threads;
	n->lim.frag_size = (uint32_t)n->frag_size;
	n->lim.nprocs = pcori_rt.nprocs;
	pcori_lock_init(&n->peers_lock);
	pcori_lock_init(&n->timer_lock);
	atomic_init(&n->timer_first, UINT64_MAX);
	pcori_list_init(&n->readq);
	pcori_list_init(&n->rndvs);

	pcori_affinity_apply(cfg->affinity);
	const pcori_port_params_t par = {
	    .frag_size = n->frag_size,
	    .key_check = n->lim.key_check,
	    .one_host = n->one_host,
	};
	char list[sizeof(cfg->providers)];
	snprintf(list, sizeof(list), "%s", cfg->providers);
	for (char *save = NULL, *prov = strtok_r(list, ",", &save);
	     prov && n->nports < PCORI_MAX_PORTS;
	     prov = strtok_r(NULL, ",", &save)) {
		int got = 0;
		pcori_port_open(prov, n->nports, &par, &n->ports[n->nports],
				PCORI_MAX_PORTS - n->nports, &got);
		n->nports += got;
	}
	if (!n->nports) {
		PCORI_ERROR(PCORI_SUB_DISPATCH,
			    "no usable fabric port among PCOR_PROVIDERS=\"%s\"",
			    cfg->providers);
		return PCOR_ERR_FABRIC;
	}
	self->nports = n->nports;
	for (int i = 0; i < n->nports; i++) {
		n->ports[i]->mode = n->mode;
		self->ports[i] = n->ports[i]->info;
	}
	n->up = true;
	pcori_lock(&gone_lock);
	ports_open = true;
	pcori_unlock(&gone_lock);
	return PCOR_OK;
}

int pcori_net_start(void)
{
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		char name[32]; /* i < PCORI_MAX_PORTS: fits in 16 */
		if (pthread_create(&p->rx_thread, NULL, rx_main, p))
			return PCOR_ERR_SYSTEM;
		p->rx_started = true;
		/* Named for ps, top and gdb: the port's dispatcher. */
		snprintf(name, sizeof(name), "pcor-disp%d", i);
		pthread_setname_np(p->rx_thread, name);
		if (p->mode == PCORI_DISPATCH_BLOCK) {
			if (pthread_create(&p->tx_thread, NULL, tx_main, p))
				return PCOR_ERR_SYSTEM;
			p->tx_started = true;
			snprintf(name, sizeof(name), "pcor-send%d", i);
			pthread_setname_np(p->tx_thread, name);
		}
	}
	atomic_store_explicit(&pcori_drive, &drive_ops, memory_order_release);
	return PCOR_OK;
}

/*
 * Messages to live peers not yet acknowledged or taken, and FINs to them
 * not yet acknowledged.
 */
static size_t unsettled(void)
{
	size_t n = (size_t)pcori_rndv_unsettled();
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		if (p->ops->unsettled)
			n += p->ops->unsettled(p);
	}
	int np = atomic_load(&pcori_net.npeers);
	pcori_peer_t **peers = atomic_load(&pcori_net.peers);
	for (int i = 0; i < np; i++) {
		pcori_peer_t *p = pcori_peer_slot(peers, i);
		if (!p || atomic_load(&p->state) == PCORI_PEER_LOST)
			continue;
		/*
		 * Fast messages are only known taken from their acks where
		 * the port cannot say it (no `unsettled`).
		 */
		pcori_route_t *rt = pcori_peer_route(p);
		bool fast_acked = rt && !rt->port->ops->unsettled;
		for (int t = 0; t < pcori_rt.max_threads; t++) {
			pcori_txstream_t *ts = atomic_load(&p->tx[t]);
			if (!ts)
				continue;
			pcori_lock(&ts->lock);
			n += !pcori_list_empty(&ts->sent) +
			     !pcori_list_empty(&ts->waiting) +
			     !pcori_list_empty(&ts->waiting_fin) +
			     (fast_acked && ts->next_seq != ts->acked);
			pcori_unlock(&ts->lock);
		}
	}
	return n;
}

/* Ready peers that have not acknowledged our BYE. */
static int bye_unacked(void)
{
	pcori_peer_t *p;
	int n = 0;
	for (int i = 0; (p = pcori_peer_next_ready(&i));)
		n += pcori_peer_route(p) && !atomic_load(&p->bye_acked);
	return n;
}

/*
 * Before leaving: send the acks peers wait for, and let live peers take
 * what we sent them (a completed sendCopy may still be pulled from our
 * memory), for at most PCOR_LINGER_MS.
 */
void pcori_net_quiesce(void)
{
	if (!pcori_net.up)
		return;
	uint64_t end = pcori_now_ns() +
		       (uint64_t)pcori_rt.cfg.linger_ms * 1000000u;
	size_t left;
	while ((left = unsettled()) && pcori_now_ns() < end) {
		pcori_drive_begin(NULL);
		for (int i = 0; i < 1000; i++) {
			pcori_acks_flush(true);
			pcori_progress();
		}
		pcori_drive_end(0);
	}
	/*
	 * The BYE goes last, after every ack, queued or being sent by
	 * another thread: a peer fails what is unacked when it arrives.
	 */
	for (int round = 0; round < 2; round++) {
		if (round) /* each ack a second time: the fabric may lose one */
			pcori_acks_repeat();
		do {
			pcori_acks_flush(true);
			pcori_progress();
		} while (!pcori_ctl_drained() && pcori_now_ns() < end);
	}
	/*
	 * TIME_WAIT: a BYE lost by the fabric would leave the peer to learn
	 * of our exit from the directory, and fail as lost what its lost
	 * acks covered.  So the BYE goes again until acknowledged, for at
	 * most a peer timeout.
	 */
	uint64_t now = pcori_now_ns();
	uint64_t every = PCORI_MIN((uint64_t)pcori_rt.cfg.rto_ms, 50u) *
			 1000000u;
	uint64_t tw_end = PCORI_MIN(
	    end, now + (uint64_t)pcori_rt.cfg.peer_timeout_ms * 1000000u);
	uint64_t again = now + every;
	int waiting = pcori_peers_bye();
	while (waiting && (now = pcori_now_ns()) < tw_end) {
		pcori_progress();
		if (now >= again) {
			waiting = pcori_peers_bye();
			again = now + every;
		} else {
			waiting = bye_unacked();
		}
	}
	while (pcori_timers_next() == 0 && pcori_now_ns() < end)
		pcori_progress();
	if (left)
		PCORI_WARN(PCORI_SUB_DISPATCH,
			   "finalize: %zu streams still had messages not taken "
			   "by their receivers after %lld ms; dropped",
			   left, (long long)pcori_rt.cfg.linger_ms);
}

static uint64_t thread_cpu_ns(bool started, pthread_t t)
{
	clockid_t c;
	struct timespec ts;
	if (!started || pthread_getcpuclockid(t, &c) ||
	    clock_gettime(c, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* PCOR_STATS=1: one machine-readable line per port (benchmarks read it). */
static void print_stats(const pcori_port_t *p)
{
	const pcori_port_stats_t *st = &p->st;
	fprintf(stderr,
		"pcor-stats,pid=%d,port=%s,tx=%llu,rx=%llu,acks=%llu,"
		"retx=%llu,nacks=%llu,parked=%llu,queue_full=%llu,"
		"dispatcher_cpu_ns=%llu,spilled=%llu\n",
		pcori_rt.pid, p->info.provider, (unsigned long long)st->tx,
		(unsigned long long)st->rx, (unsigned long long)st->ack_tx,
		(unsigned long long)st->retx,
		(unsigned long long)st->nack_sent,
		(unsigned long long)st->parked,
		(unsigned long long)st->eagain, (unsigned long long)p->cpu_ns,
		(unsigned long long)st->spilled);
}

void pcori_net_peer_gone(int pid, bool failed)
{
	pcori_lock(&gone_lock);
	for (int i = 0; ports_open && i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		if (p->ops->peer_gone)
			p->ops->peer_gone(p, pid, failed);
	}
	pcori_unlock(&gone_lock);
}

void pcori_net_fini(void)
{
	if (!pcori_net.up)
		return;
	atomic_store(&pcori_drive, NULL);
	for (int i = 0; i < pcori_net.nports; i++)
		atomic_store(&pcori_net.ports[i]->stop, true);
	atomic_fetch_add(&pcori_net.drive_word, 1);
	pcori_futex_wake(&pcori_net.drive_word, INT_MAX);
	pcori_timers_kick_all();
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		p->ops->signal(p);
		/* The dispatchers' CPU time, before they are gone. */
		p->cpu_ns = thread_cpu_ns(p->rx_started, p->rx_thread) +
			    thread_cpu_ns(p->tx_started, p->tx_thread);
		if (p->rx_started)
			pthread_join(p->rx_thread, NULL);
		if (p->tx_started)
			pthread_join(p->tx_thread, NULL);
	}
	pcori_peers_fini();
	pcori_lock(&gone_lock);
	ports_open = false;
	pcori_unlock(&gone_lock);
	for (int i = 0; i < pcori_net.nports; i++) {
		pcori_port_t *p = pcori_net.ports[i];
		pcori_port_stats_t *st = &p->st;
		if (pcori_rt.cfg.stats)
			print_stats(p);
		PCORI_INFO(PCORI_SUB_DISPATCH,
			   "port %d: rx %llu tx %llu bad headers %llu nacks "
			   "sent %llu received %llu resends %llu duplicates "
			   "%llu held %llu queue full %llu reads %llu "
			   "forwarded %llu forward drops %llu test drops %llu "
			   "parked %llu acks sent %llu",
			   i, (unsigned long long)st->rx,
			   (unsigned long long)st->tx,
			   (unsigned long long)st->bad_hdr,
			   (unsigned long long)st->nack_sent,
			   (unsigned long long)st->nack_rcvd,
			   (unsigned long long)st->retx,
			   (unsigned long long)st->dup,
			   (unsigned long long)st->held,
			   (unsigned long long)st->eagain,
			   (unsigned long long)st->rma_reads,
			   (unsigned long long)st->fwd,
			   (unsigned long long)st->fwd_drop,
			   (unsigned long long)st->test_drop,
			   (unsigned long long)st->parked,
			   (unsigned long long)st->ack_tx);
		p->ops->close(p);
	}
	pcori_rndv_reap();
	pcori_timers_fini();
	pcori_ctlq_fini();
	memset(&pcori_net, 0, sizeof(pcori_net));
}
