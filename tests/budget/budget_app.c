/*
 * budget_app -- the sending side's memory budget (PCOR_SEND_BYTES), run
 * by pcorrun through tests/fabric/run.sh:
 *
 *   budget_app budget  2 processes.  pid 0 sends two rounds to thread 1
 *                      of pid 1: 100,000 messages of 4 B, then 10,000 of
 *                      64 KiB.  Thread 1 receives nothing of a round until
 *                      its end: the receiver's pool fills and it refuses;
 *                      then pid 0's budget fills and its sends wait
 *                      PCOR_BACKPRESSURE_MS and return PCOR_ERR_AGAIN.
 *                      After REFUSALS refusals in a row (or MAX_REFUSED in
 *                      all) pid 0 publishes a
 *                      name; thread 1 then drains the round while pid 0
 *                      sends the rest of it (retrying refused sends now)
 *                      and an end marker carrying the count and a hash of
 *                      what it sent.  Thread 1 checks that every message
 *                      sent (not refused) arrived once, intact and in
 *                      order, and no refused one.
 *
 * Both processes sample their resident memory (VmRSS) throughout: pid 0
 * inline every 64 sends and at each refusal, pid 1 from its main thread
 * (every millisecond, waiting on the drain thread's word).  The growth
 * over the start must stay within
 *
 *   sender:   PCOR_SEND_BYTES + ALLOWANCE
 *   receiver: PCOR_UNEXP_BYTES + PCOR_MCB_POOL MCBs + ALLOWANCE, plus on
 *             a lossless port one fast window (256 messages and their
 *             MCBs), which a receiver takes in beyond its pool (see
 *             PCOR_MCB_POOL)
 *
 * plus, on a libfabric port, OFI_ALLOWANCE.  ALLOWANCE (16 MiB) covers
 * what no budget counts: the handle table grows 4096 requests (768 KiB)
 * at a time, the pcor-shm cells (2 MiB) and rings touched, malloc's and
 * the DMA allocator's slack.  OFI_ALLOWANCE (48 MiB) is libfabric's: rxm
 * holds every frame it has not handed up yet, or not yet sent, in a
 * 16 KiB bounce buffer (FI_OFI_RXM_BUFFER_SIZE), and grows its pools
 * 1024 buffers (16.5 MiB) at a time; two such chunks were measured on
 * either side.  Sanitizer builds report the figures without checking
 * them (their quarantine keeps freed memory).
 *
 * Every process prints "budget: ok" when all its checks held.
 */
#include "harness.h"
#include "dispatch/dispatch.h"

#include <pthread.h>
#include <sched.h>

#define TAG_DATA 1
#define TAG_DONE 2
#define MiB ((int64_t)1 << 20)
#define SEC 1000000000ull
#define ALLOWANCE (16 * MiB)
#define OFI_ALLOWANCE (48 * MiB)
/* Sanitizers keep freed memory and shadow it: resident size says little. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif
#define REFUSALS 4
/*
 * Refusals recorded: acks that trickle in between (a loaded machine) can
 * let a send through after a refusal, so refusals need not come in a row.
 */
#define MAX_REFUSED 64
#define END_MAGIC 0x454e4421u /* "END!" */
#define FAST_WINDOW 256       /* frag/proto.h: fast messages per stream */

static int me, np;

typedef struct round {
	int count;
	size_t size;
} round_t;

/*
 * Each round runs to its count after the refusals.  Sanitized, a quarter
 * (with the budgets a quarter, tests/meson.build): the refusals still
 * come within the first quarter of the round.
 */
#if RSS_CHECKED
static const round_t rounds[] = {{100000, 4}, {10000, 64 << 10}};
#else
static const round_t rounds[] = {{25000, 4}, {2500, 64 << 10}};
#endif
#define NROUNDS ((int)(sizeof(rounds) / sizeof(rounds[0])))

/* The end of a round: what the sender sent, so the receiver can check. */
typedef struct end_marker {
	uint32_t magic;
	uint32_t round;
	uint64_t count;
	uint64_t hash;
	uint32_t nrefused;
	uint32_t refused[MAX_REFUSED];
} end_marker_t;

/* ------------------------------------------------------------ memory */

static int64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	CHECK(f);
	char line[256];
	long long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	CHECK(kb > 0);
	return kb * 1024;
}

static int64_t rss_base, rss_peak;

static void sample(void)
{
	int64_t r = rss_bytes();
	if (r > rss_peak)
		rss_peak = r;
}

/* What comes on top of the budgets on the port to the peer. */
static int64_t port_allowance(const pcori_port_t *port)
{
	bool ofi = strcmp(port->info.provider, "pcor-shm") != 0;
	return ALLOWANCE + (ofi ? OFI_ALLOWANCE : 0);
}

static pcori_port_t *port_to(int pid)
{
	pcori_peer_t *peer = pcori_peer_get(pid);
	CHECK(peer && pcori_peer_ready(peer) == PCOR_OK);
	pcori_route_t *rt = pcori_peer_route(peer);
	CHECK(rt);
	return rt->port;
}

static void check_rss(int64_t bound)
{
	if (RSS_CHECKED)
		CHECK(rss_peak - rss_base <= bound);
	else
		printf("sanitizer build: resident memory not checked\n");
}

/* ---------------------------------------------------------- messages */

static uint64_t seed_of(int round, uint32_t idx)
{
	return ((uint64_t)round << 32 | idx) * 2 + 1;
}

/* Message idx of a round: its index, then (64 KiB) a pattern. */
static void fill(uint8_t *b, int round, uint32_t idx)
{
	memcpy(b, &idx, sizeof(idx));
	size_t n = rounds[round].size;
	if (n > sizeof(idx))
		th_fill(b + sizeof(idx), n - sizeof(idx), seed_of(round, idx));
}

static uint64_t hash_add(uint64_t h, uint32_t idx)
{
	return (h ^ (idx + 0x9e3779b97f4a7c15ull)) * 0x100000001b3ull;
}

static void round_name(char *buf, size_t cap, int round)
{
	snprintf(buf, cap, "budget-drain-%d", round);
}

/* ----------------------------------------------------------- sender */

typedef struct sender {
	pcor_handle_t *hs; /* handles of accepted sends, in order */
	int head, tail;    /* tested to completion: [0, head) */
	uint8_t *buf;
	uint64_t again_ns_min, again_ns_max;
	int refusals, retries;
	double worst_fill; /* least held/max seen at a refusal */
} sender_t;

/* Release the completed handles at the front (they complete in order). */
static void reap(sender_t *s)
{
	while (s->head < s->tail) {
		int rc = pcor_handle_test(s->hs[s->head], PCOR_NONBLOCK);
		if (rc == PCOR_INPROGRESS)
			break;
		CHECK_OK(rc);
		s->head++;
	}
}

/*
 * One send; PCOR_ERR_AGAIN is checked: it came after the wait and, while
 * the receiver takes nothing (full), with the budget full.
 */
static int send_one(sender_t *s, const void *b, size_t n, bool full)
{
	pcor_handle_t h;
	uint64_t t0 = pcori_now_ns();
	int rc = pcor_send_copy(1, 1, TAG_DATA, b, n, &h);
	uint64_t dt = pcori_now_ns() - t0;
	if (rc == PCOR_OK) {
		s->hs[s->tail++] = h;
		return rc;
	}
	CHECK_RC(rc, PCOR_ERR_AGAIN);
	/*
	 * Past the budget: held plus this message would not fit.  (While the
	 * receiver drains, acks may have made room since.)
	 */
	if (full) {
		int64_t held = atomic_load(&pcori_net.txb.held);
		int64_t max = pcori_net.txb.max;
		CHECK(held + (int64_t)pcori_tx_cost(1, true, n) > max);
		double fill_ = (double)held / (double)max;
		if (s->worst_fill == 0 || fill_ < s->worst_fill)
			s->worst_fill = fill_;
	}
	/* It waited PCOR_BACKPRESSURE_MS first (the clock's grain aside). */
	uint64_t bp = (uint64_t)pcori_rt.cfg.backpressure_ms * 1000000u;
	CHECK(dt + 1000000 >= bp);
	CHECK(dt <= bp + 10 * SEC);
	if (!s->again_ns_min || dt < s->again_ns_min)
		s->again_ns_min = dt;
	if (dt > s->again_ns_max)
		s->again_ns_max = dt;
	return rc;
}

static void send_round(sender_t *s, int round, uint64_t deadline)
{
	const round_t *rd = &rounds[round];
	end_marker_t end = {.magic = END_MAGIC, .round = (uint32_t)round};
	int i = 0, in_row = 0;
	int64_t held_at_full = 0, msgs_at_full = 0, rss_at_full = 0;
	/* Phase 1: the receiver takes nothing; go until refused in a row. */
	for (; i < rd->count && in_row < REFUSALS &&
	       end.nrefused < MAX_REFUSED;
	     i++) {
		fill(s->buf, round, (uint32_t)i);
		int rc = send_one(s, s->buf, rd->size, true);
		if (rc == PCOR_OK) {
			in_row = 0;
			end.count++;
			end.hash = hash_add(end.hash, (uint32_t)i);
			reap(s);
		} else {
			if (!in_row) {
				held_at_full = atomic_load(&pcori_net.txb.held);
				msgs_at_full = s->tail - s->head;
				rss_at_full = rss_bytes();
			}
			in_row++;
			s->refusals++;
			end.refused[end.nrefused++] = (uint32_t)i;
			sample();
		}
		if ((i & 63) == 0)
			sample();
		CHECK(pcori_now_ns() < deadline);
	}
	/* The budgets are far below a round: it must have been refused. */
	CHECK(in_row == REFUSALS || end.nrefused == MAX_REFUSED);
	sample();
	CHECK(msgs_at_full > 0);
	printf("round %d (%d x %zu B): refused at message %d; %lld bytes "
	       "held for %lld messages not yet acknowledged (%lld per "
	       "message; pcori_tx_cost %zu), resident %.1f MiB over the "
	       "start (%lld per message)\n",
	       round, rd->count, rd->size, i - REFUSALS,
	       (long long)held_at_full, (long long)msgs_at_full,
	       (long long)(held_at_full / msgs_at_full),
	       pcori_tx_cost(1, true, rd->size),
	       (double)(rss_at_full - rss_base) / (double)MiB,
	       (long long)((rss_at_full - rss_base) / msgs_at_full));
	char name[64];
	round_name(name, sizeof(name), round);
	CHECK_OK(pcor_name_publish(name, me, 0));
	/* Phase 2: the receiver drains; a refused send is tried again. */
	for (; i < rd->count; i++) {
		fill(s->buf, round, (uint32_t)i);
		while (send_one(s, s->buf, rd->size, false) != PCOR_OK) {
			s->retries++;
			sample();
			CHECK(pcori_now_ns() < deadline);
		}
		end.count++;
		end.hash = hash_add(end.hash, (uint32_t)i);
		reap(s);
		if ((i & 63) == 0)
			sample();
	}
	while (send_one(s, &end, sizeof(end), false) != PCOR_OK) {
		s->retries++;
		CHECK(pcori_now_ns() < deadline);
	}
	for (; s->head < s->tail; s->head++)
		CHECK_OK(pcor_handle_test(s->hs[s->head], PCOR_BLOCK));
	sample();
}

static void run_sender(uint64_t deadline)
{
	sender_t s = {0};
	int most = 0;
	for (int r = 0; r < NROUNDS; r++)
		most = rounds[r].count > most ? rounds[r].count : most;
	s.hs = malloc(sizeof(*s.hs) * (size_t)(most + 1));
	s.buf = malloc(64 << 10);
	CHECK(s.hs && s.buf);
	/* Touched now, so the baseline has them. */
	memset(s.hs, 0, sizeof(*s.hs) * (size_t)(most + 1));
	memset(s.buf, 0, 64 << 10);
	rss_base = rss_peak = rss_bytes();
	for (int r = 0; r < NROUNDS; r++) {
		s.head = s.tail = 0;
		send_round(&s, r, deadline);
	}
	pcori_port_t *port = port_to(1);
	int64_t bound = pcori_net.txb.max + port_allowance(port);
	printf("sender (%s): budget %lld MiB, peak resident %.1f MiB over the "
	       "start (bound %lld MiB); %d refusals after %.1f..%.1f ms "
	       "(PCOR_BACKPRESSURE_MS %lld) with the budget at least %.1f %% "
	       "full, %d retries while draining\n",
	       port->info.provider, (long long)(pcori_net.txb.max / MiB),
	       (double)(rss_peak - rss_base) / (double)MiB,
	       (long long)(bound / MiB), s.refusals,
	       (double)s.again_ns_min / 1e6, (double)s.again_ns_max / 1e6,
	       (long long)pcori_rt.cfg.backpressure_ms, 100 * s.worst_fill,
	       s.retries);
	CHECK(s.refusals >= NROUNDS * REFUSALS);
	check_rss(bound);
	/*
	 * Everything went: nothing is held any more, once the provider gave
	 * back what a resend still had in flight when its ack came.
	 */
	uint64_t drained = pcori_now_ns() + 10 * 1000000000ull;
	while (atomic_load(&pcori_net.txb.held) && pcori_now_ns() < drained)
		pcori_progress();
	CHECK(atomic_load(&pcori_net.txb.held) == 0);
	free(s.buf);
	free(s.hs);
}

/* --------------------------------------------------------- receiver */

static uint64_t recv_deadline;

/* Thread 1 of pid 1: takes nothing of a round until told, then all. */
static void *drain_thread(void *arg)
{
	(void)arg;
	size_t cap = (64 << 10) + sizeof(end_marker_t);
	uint8_t *buf = malloc(cap);
	uint8_t *seen = malloc((size_t)rounds[0].count); /* by index */
	CHECK(buf && seen);
	for (int r = 0; r < NROUNDS; r++) {
		char name[64];
		int pid, thid;
		round_name(name, sizeof(name), r);
		CHECK_OK(pcor_name_lookup(
			name, (int64_t)(recv_deadline - pcori_now_ns()), &pid,
			&thid));
		CHECK(pid == 0);
		uint64_t count = 0, hash = 0;
		int64_t last = -1;
		memset(seen, 0, (size_t)rounds[0].count);
		for (;;) {
			pcor_handle_t h;
			pcor_msginfo_t info;
			CHECK_OK(pcor_recv_copy(0, 0, TAG_DATA, buf, cap, &info,
						&h));
			CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
			if (info.size == sizeof(end_marker_t)) {
				end_marker_t end;
				memcpy(&end, buf, sizeof(end));
				CHECK(end.magic == END_MAGIC);
				CHECK(end.round == (uint32_t)r);
				CHECK(end.count == count);
				CHECK(end.hash == hash);
				CHECK(end.nrefused >= REFUSALS &&
				      end.nrefused <= MAX_REFUSED);
				printf("round %d: %llu messages arrived in order "
				       "and intact, none of the %u refused\n",
				       r, (unsigned long long)count,
				       end.nrefused);
				for (uint32_t k = 0; k < end.nrefused; k++)
					CHECK(end.refused[k] <
						      (uint32_t)rounds[r].count &&
					      !seen[end.refused[k]]);
				break;
			}
			CHECK(info.size == rounds[r].size);
			uint32_t idx;
			memcpy(&idx, buf, sizeof(idx));
			CHECK((int64_t)idx > last && idx < (uint32_t)rounds[r].count);
			if (info.size > sizeof(idx))
				CHECK_PATTERN(buf + sizeof(idx),
					      info.size - sizeof(idx),
					      seed_of(r, idx));
			last = idx;
			seen[idx] = 1;
			count++;
			hash = hash_add(hash, idx);
		}
	}
	free(seen);
	free(buf);
	pcor_handle_t h;
	CHECK_OK(pcor_send_copy(1, 0, TAG_DONE, NULL, 0, &h));
	CHECK_OK(pcor_handle_test(h, PCOR_BLOCK));
	return NULL;
}

static void run_receiver(uint64_t deadline)
{
	recv_deadline = deadline;
	pcori_port_t *port = port_to(0);
	rss_base = rss_peak = rss_bytes();
	int th;
	CHECK_OK(pcor_thread_create(drain_thread, NULL, &th));
	CHECK(th == 1);
	pcor_handle_t h;
	CHECK_OK(pcor_recv_copy(1, 1, TAG_DONE, NULL, 0, NULL, &h));
	for (;;) {
		sample();
		int rc = pcor_handle_wait(h, 1000000);
		if (rc == PCOR_OK)
			break;
		CHECK_RC(rc, PCOR_ERR_TIMEDOUT);
		CHECK(pcori_now_ns() < deadline);
	}
	sample();
	CHECK_OK(pcor_thread_join(th, NULL));
	const pcori_config_t *cfg = &pcori_rt.cfg;
	int64_t fast = port->lossless
			       ? FAST_WINDOW * ((int64_t)pcori_net.fast_max +
						(int64_t)sizeof(pcori_mcb_t))
			       : 0;
	int64_t bound = cfg->unexp_bytes +
			cfg->mcb_pool * (int64_t)sizeof(pcori_mcb_t) + fast +
			port_allowance(port);
	printf("receiver (%s): peak resident %.1f MiB over the start "
	       "(bound %lld MiB: unexpected bytes %lld MiB, %lld MCBs of "
	       "%zu B, fast window %lld MiB), %llu refusals sent\n",
	       port->info.provider,
	       (double)(rss_peak - rss_base) / (double)MiB,
	       (long long)(bound / MiB), (long long)(cfg->unexp_bytes / MiB),
	       (long long)cfg->mcb_pool, sizeof(pcori_mcb_t),
	       (long long)(fast / MiB),
	       (unsigned long long)atomic_load(&port->st.nack_sent));
	check_rss(bound);
}

/* -------------------------------------------------------------- main */

/* Zero-byte messages both ways between the main threads. */
static void barrier(int tag)
{
	pcor_handle_t s, r;
	int peer = 1 - me;
	CHECK_OK(pcor_recv_copy(peer, 0, tag, NULL, 0, NULL, &r));
	CHECK_OK(pcor_send_copy(peer, 0, tag, NULL, 0, &s));
	CHECK_OK(pcor_handle_test(s, PCOR_BLOCK));
	CHECK_OK(pcor_handle_test(r, PCOR_BLOCK));
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: budget_app budget\n");
		return 2;
	}
	CHECK_OK(pcor_init(&argc, &argv));
	me = pcor_self_pid();
	np = pcor_nprocs();
	if (strcmp(argv[1], "budget"))
		SKIP("unknown case %s", argv[1]);
	CHECK(np == 2);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Slow (sanitizer) builds get more time; the test's own bound. */
	uint64_t deadline = pcori_now_ns() + 240 * SEC;
	barrier(90);
	if (me == 0)
		run_sender(deadline);
	else
		run_receiver(deadline);
	barrier(91);
	printf("budget: ok\n");
	CHECK_OK(pcor_finalize());
	return 0;
}
