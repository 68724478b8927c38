/*
 * shm_unit -- the pcor-shm data structures alone: segment layout, the SPSC
 * ring (one thread, two threads, malformed contents) and the cell pool.
 */
#include "harness.h"
#include "port/shm.h"

#include <pthread.h>

/* A ring in ordinary memory (garbage in it at first), and its head. */
typedef struct test_ring {
	pcori_shm_ring_t r;
	_Atomic uint64_t head;
	uint8_t *mem;
} test_ring_t;

static void ring_make(test_ring_t *t, uint32_t size)
{
	t->mem = aligned_alloc(64, size);
	CHECK(t->mem);
	memset(t->mem, 0xee, size);
	atomic_init(&t->head, 0);
	t->r.buf = t->mem;
	t->r.size = size;
	t->r.head = &t->head;
}

static void test_layout(void)
{
	pcori_shm_geom_t g = {.nslots = 4, .ring_size = 32768,
			      .cell_size = 8192, .ncells = 128};
	CHECK(pcori_shm_layout(&g) == 0);
	CHECK(g.off_owner >= sizeof(pcori_shm_hdr_t));
	CHECK(g.off_head >= g.off_owner + 4 * 8);
	CHECK(g.off_head % 64 == 0);
	CHECK(g.off_mark >= g.off_head + 4 * 8);
	CHECK(g.off_ring % 4096 == 0 && g.off_cell % 64 == 0);
	CHECK(g.off_cell == g.off_ring + 4 * 32768);
	CHECK(g.size >= g.off_cell + 128 * 8192 && g.size % 4096 == 0);
	/* Out of range: every size is checked. */
	pcori_shm_geom_t bad[] = {
		{.nslots = 0, .ring_size = 32768, .cell_size = 8192, .ncells = 1},
		{.nslots = 4, .ring_size = 30000, .cell_size = 8192, .ncells = 1},
		{.nslots = 4, .ring_size = 2048, .cell_size = 8192, .ncells = 1},
		{.nslots = 4, .ring_size = 32768, .cell_size = 8190, .ncells = 1},
		{.nslots = 4, .ring_size = 32768, .cell_size = 8192, .ncells = 0},
		{.nslots = 5000, .ring_size = 32768, .cell_size = 8192,
		 .ncells = 1},
		{.nslots = 4096, .ring_size = 16 << 20, .cell_size = 8192,
		 .ncells = 1},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(pcori_shm_layout(&bad[i]) == -1);
}

/* Write one inline record of len bytes of pattern seed. */
static bool put(test_ring_t *t, pcori_shm_prod_t *pr, uint32_t len,
		uint64_t seed)
{
	uint8_t *d = pcori_shm_ring_reserve(&t->r, pr, PCORI_SHM_REC_INLINE,
					    len, len);
	if (!d)
		return false;
	th_fill(d, len, seed);
	pcori_shm_ring_commit(&t->r, pr);
	return true;
}

static void set_word(test_ring_t *t, uint64_t pos, uint64_t w)
{
	memcpy(t->mem + (pos & (t->r.size - 1)), &w, 8);
}

static void test_ring_basic(void)
{
	test_ring_t t;
	ring_make(&t, 4096);
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	uint64_t head = 0;
	pcori_shm_rec_t rec;
	uint64_t next;
	CHECK(pcori_shm_inline_max(4096) == 1024 + 64 - 8);
	CHECK(pcori_shm_inline_sure(4096) == 512 - 8);
	/* The garbage is no record. */
	CHECK(!pcori_shm_ring_ready(&t.r, 0));
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == 0);
	/* Fill: 56-byte payloads take one line each, the whole ring. */
	int n = 0;
	while (put(&t, &pr, 56, (uint64_t)n))
		n++;
	CHECK(n == 4096 / 64);
	/* Consume all, in order; then there is nothing, until room is given. */
	for (int i = 0; i < n; i++) {
		CHECK(pcori_shm_ring_ready(&t.r, head));
		CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
		CHECK(rec.kind == PCORI_SHM_REC_INLINE && rec.len == 56);
		CHECK_PATTERN(rec.data, 56, (uint64_t)i);
		head = next;
	}
	CHECK(head == 4096);
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 0);
	CHECK(!put(&t, &pr, 0, 0)); /* head not given back yet */
	atomic_store(&t.head, head);
	CHECK(put(&t, &pr, 0, 0));
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
	CHECK(rec.len == 0 && next == head + 32);
	head = next;
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 0);
	/* A line of the lap before, where the next record goes: not taken. */
	set_word(&t, head, pcori_shm_hdr_word(head - 4096,
					      PCORI_SHM_REC_INLINE, 8));
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 0);
	atomic_store(&t.head, head);

	/* A record that does not fit before the end wraps. */
	head = 4096 * 3 + 4096 - 128;
	pr.tail = pr.head = head;
	atomic_store(&t.head, head);
	CHECK(put(&t, &pr, 500, 7));
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
	CHECK(rec.kind == PCORI_SHM_REC_WRAP && next == head + 128);
	head = next;
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
	CHECK(rec.len == 500 && next == pr.tail);
	CHECK(rec.data == t.mem + 8);
	CHECK_PATTERN(rec.data, 500, 7);

	/* The largest inline record, and a cells record. */
	head = next;
	atomic_store(&t.head, head);
	CHECK(put(&t, &pr, pcori_shm_inline_max(4096), 9));
	uint8_t *d = pcori_shm_ring_reserve(&t.r, &pr, PCORI_SHM_REC_CELLS,
					    100000, 8);
	CHECK(d);
	uint64_t run = (uint64_t)3 << 32 | 17;
	memcpy(d, &run, 8);
	pcori_shm_ring_commit(&t.r, &pr);
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
	CHECK_PATTERN(rec.data, pcori_shm_inline_max(4096), 9);
	head = next;
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
	CHECK(rec.kind == PCORI_SHM_REC_CELLS && rec.len == 100000 &&
	      rec.first == 17 && rec.count == 3 && next == pr.tail);
	CHECK(pcori_shm_ring_next(&t.r, next, &rec, &next) == 0);
	/* A reset ring is empty at 0 again, whatever it held. */
	set_word(&t, 0, pcori_shm_hdr_word(0, PCORI_SHM_REC_INLINE, 8));
	CHECK(pcori_shm_ring_ready(&t.r, 0));
	pcori_shm_ring_reset(&t.r);
	CHECK(!pcori_shm_ring_ready(&t.r, 0));
	free(t.mem);
}

/*
 * At 0 of a fresh ring, a 200-byte record of zeros but for the word at
 * off from the record's start: lap 1's header there.
 */
static void put_faking(test_ring_t *t, pcori_shm_prod_t *pr, uint32_t off)
{
	uint64_t fake = pcori_shm_hdr_word(4096 + off, PCORI_SHM_REC_INLINE, 8);
	uint8_t *d = pcori_shm_ring_reserve(&t->r, pr, PCORI_SHM_REC_INLINE,
					    200, 200);
	CHECK(d);
	memset(d, 0, 200);
	memcpy(d + off - PCORI_SHM_REC_HDR, &fake, 8);
	pcori_shm_ring_commit(&t->r, pr);
	pcori_shm_rec_t rec;
	uint64_t next;
	CHECK(pcori_shm_ring_next(&t->r, 0, &rec, &next) == 1 && next == 256);
}

/*
 * The bytes a record's payload leaves at the start of a line never pass
 * for a header in a later lap, once the consumer is done with the record;
 * nor, after a reset, does anything a departed producer left.
 */
static void test_ring_stale(void)
{
	test_ring_t t;
	ring_make(&t, 4096);
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	pcori_shm_rec_t rec;
	uint64_t next;
	/* Payload whose word at the start of line 1 is lap 1's header there. */
	put_faking(&t, &pr, 64);
	/* Not yet consumed: in lap 1 it would be taken for a record. */
	CHECK(pcori_shm_ring_next(&t.r, 4096 + 64, &rec, &next) == 1);
	pcori_shm_ring_consumed(&t.r, 0, 256);
	CHECK(pcori_shm_ring_next(&t.r, 4096 + 64, &rec, &next) == 0);
	/* The record's own header stays: an old lap's, never taken. */
	CHECK(pcori_shm_ring_next(&t.r, 4096, &rec, &next) == 0);
	/* What a producer left anywhere is gone after a reset. */
	set_word(&t, 5 * 64, pcori_shm_hdr_word(5 * 64, PCORI_SHM_REC_INLINE,
						 8));
	CHECK(pcori_shm_ring_next(&t.r, 5 * 64, &rec, &next) == 1);
	set_word(&t, 5 * 64 + 32, pcori_shm_hdr_word(5 * 64 + 32,
						      PCORI_SHM_REC_INLINE, 8));
	CHECK(pcori_shm_ring_next(&t.r, 5 * 64 + 32, &rec, &next) == 1);
	pcori_shm_ring_reset(&t.r);
	for (uint64_t at = 0; at < 4096; at += PCORI_SHM_SLOT)
		CHECK(pcori_shm_ring_next(&t.r, at, &rec, &next) == 0);
	free(t.mem);
}

/* The word at pos, as the consumer would load it. */
static uint64_t get_word(const test_ring_t *t, uint64_t pos)
{
	uint64_t w;
	memcpy(&w, t->mem + (pos & (t->r.size - 1)), 8);
	return w;
}

/*
 * Records of a slot pair up in a line; a record of lines after a lone
 * slot starts on the next line, behind a PAD.
 */
static void test_ring_slots(void)
{
	test_ring_t t;
	ring_make(&t, 4096);
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	pcori_shm_rec_t rec;
	uint64_t next;
	static const struct {
		uint32_t len;
		uint64_t at, next; /* where it lands, where the next one may */
	} want[] = {{24, 0, 32}, {0, 32, 64}, {25, 64, 128},
		    {10, 128, 160}, {100, 192, 320}, {1, 320, 352}};
	size_t n = sizeof(want) / sizeof(want[0]);
	for (size_t i = 0; i < n; i++)
		CHECK(put(&t, &pr, want[i].len, i));
	CHECK(pr.tail == want[n - 1].next);
	uint64_t head = 0;
	for (size_t i = 0; i < n; i++) {
		CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
		if (head != want[i].at) {
			CHECK(rec.kind == PCORI_SHM_REC_PAD && next == want[i].at);
			head = next;
			CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 1);
		}
		CHECK(rec.kind == PCORI_SHM_REC_INLINE &&
		      rec.len == want[i].len && next == want[i].next);
		CHECK(rec.data == t.mem + want[i].at + 8);
		CHECK_PATTERN(rec.data, rec.len, i);
		pcori_shm_ring_consumed(&t.r, head, next);
		head = next;
	}
	CHECK(pcori_shm_ring_next(&t.r, head, &rec, &next) == 0);

	/*
	 * A slot at a line's start needs the whole line free: it clears the
	 * second slot, which may hold a record not yet read.
	 */
	pr.tail = 4096 + 640;
	pr.head = 640 + 32;
	atomic_store(&t.head, pr.head);
	uint64_t unread = pcori_shm_hdr_word(640 + 32, PCORI_SHM_REC_INLINE, 8);
	set_word(&t, 640 + 32, unread);
	CHECK(!put(&t, &pr, 8, 1));
	CHECK(pr.tail == 4096 + 640 && get_word(&t, 640 + 32) == unread);
	atomic_store(&t.head, 640 + 64);
	CHECK(put(&t, &pr, 8, 1));

	/*
	 * What a record of lines left in a line's second slot is lap 1's
	 * header there: the consumer does not clear it, the producer of a
	 * slot at the line's start in lap 1 does.
	 */
	pcori_shm_prod_init(&pr);
	atomic_store(&t.head, 0);
	put_faking(&t, &pr, 32);
	pcori_shm_ring_consumed(&t.r, 0, 256);
	CHECK(pcori_shm_ring_next(&t.r, 4096 + 32, &rec, &next) == 1);
	pr.tail = pr.head = 4096;
	atomic_store(&t.head, 4096);
	CHECK(put(&t, &pr, 8, 2));
	CHECK(pcori_shm_ring_next(&t.r, 4096, &rec, &next) == 1 &&
	      next == 4096 + 32);
	CHECK(pcori_shm_ring_next(&t.r, 4096 + 32, &rec, &next) == 0);
	free(t.mem);
}

/* Garbage written by a peer is refused, never followed. */
static void test_ring_malformed(void)
{
	test_ring_t t;
	ring_make(&t, 4096);
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	pcori_shm_rec_t rec;
	uint64_t next;
	CHECK(put(&t, &pr, 10, 1));

	set_word(&t, 0, pcori_shm_hdr_word(0, 9, 10)); /* unknown kind */
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == -1);
	set_word(&t, 0, pcori_shm_hdr_word(0, PCORI_SHM_REC_INLINE,
					   PCORI_SHM_LEN_MAX)); /* too long */
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == -1);
	set_word(&t, 0, pcori_shm_hdr_word(0, PCORI_SHM_REC_INLINE,
					   4096 - 8)); /* no free line left */
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == -1);
	set_word(&t, 0, pcori_shm_hdr_word(0, PCORI_SHM_REC_WRAP, 4096));
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == -1); /* wrap at 0 */
	set_word(&t, 0, pcori_shm_hdr_word(0, PCORI_SHM_REC_INLINE, 10));
	CHECK(pcori_shm_ring_next(&t.r, 8, &rec, &next) == -1); /* align */
	CHECK(pcori_shm_ring_next(&t.r, 4096, &rec, &next) == 0); /* lap */
	CHECK(pcori_shm_ring_next(&t.r, 0, &rec, &next) == 1);

	/* A wrap whose length is not the rest of the ring. */
	set_word(&t, 4096 - 64,
		 pcori_shm_hdr_word(4096 - 64, PCORI_SHM_REC_WRAP, 32));
	CHECK(pcori_shm_ring_next(&t.r, 4096 - 64, &rec, &next) == -1);
	set_word(&t, 4096 - 64,
		 pcori_shm_hdr_word(4096 - 64, PCORI_SHM_REC_WRAP, 64));
	CHECK(pcori_shm_ring_next(&t.r, 4096 - 64, &rec, &next) == 1);
	CHECK(rec.kind == PCORI_SHM_REC_WRAP && next == 4096);

	/* A PAD anywhere but a line's middle, or of more than a slot. */
	set_word(&t, 64, pcori_shm_hdr_word(64, PCORI_SHM_REC_PAD, 32));
	CHECK(pcori_shm_ring_next(&t.r, 64, &rec, &next) == -1);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_PAD, 64));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == -1);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_PAD, 32));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == 1);
	CHECK(rec.kind == PCORI_SHM_REC_PAD && next == 128);
	/* A record of lines in a line's middle; one of a slot is fine. */
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_INLINE, 25));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == -1);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_INLINE, 24));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == 1 && next == 128);
	/* A one-slot fast record shorter than its fields or past its slot. */
	uint32_t fs = (uint32_t)sizeof(pcori_shm_fast_s_t);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_FAST_S, fs - 1));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == -1);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_FAST_S,
					    fs + PCORI_SHM_FAST_S_MAX + 1));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == -1);
	set_word(&t, 96, pcori_shm_hdr_word(96, PCORI_SHM_REC_FAST_S,
					    fs + PCORI_SHM_FAST_S_MAX));
	CHECK(pcori_shm_ring_next(&t.r, 96, &rec, &next) == 1 && next == 128);
	CHECK(rec.kind == PCORI_SHM_REC_FAST_S && rec.data == t.mem + 104);
	free(t.mem);
}

/* One producer thread, one consumer thread: order and bytes. */
#define SPSC_N 50000
static test_ring_t spsc;

/* Half of them of a slot (so some lines pair two, some take a PAD). */
static uint32_t spsc_len(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull;
	return (uint32_t)((x >> 40) % (x >> 63 ? 300 : 25));
}

static void *spsc_producer(void *arg)
{
	(void)arg;
	pcori_shm_prod_t pr;
	pcori_shm_prod_init(&pr);
	for (uint64_t i = 0; i < SPSC_N;) {
		if (put(&spsc, &pr, spsc_len(i), i))
			i++;
		else
			pcori_cpu_relax();
	}
	return NULL;
}

static void test_ring_threads(void)
{
	ring_make(&spsc, 8192);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, spsc_producer, NULL) == 0);
	uint64_t head = 0, got = 0;
	while (got < SPSC_N) {
		pcori_shm_rec_t rec;
		uint64_t next;
		int r = pcori_shm_ring_next(&spsc.r, head, &rec, &next);
		CHECK(r >= 0);
		if (!r) {
			atomic_store_explicit(&spsc.head, head,
					      memory_order_release);
			pcori_cpu_relax();
			continue;
		}
		if (rec.kind != PCORI_SHM_REC_WRAP &&
		    rec.kind != PCORI_SHM_REC_PAD) {
			CHECK(rec.len == spsc_len(got));
			CHECK_PATTERN(rec.data, rec.len, got);
			pcori_shm_ring_consumed(&spsc.r, head, next);
			got++;
		}
		head = next;
		if (got % 16 == 0)
			atomic_store_explicit(&spsc.head, head,
					      memory_order_release);
	}
	CHECK(pthread_join(th, NULL) == 0);
	free(spsc.mem);
}

static bool gone_flag;
static bool gone_if_tagged(const void *owner)
{
	return gone_flag && owner == (const void *)&gone_flag;
}

/* The two ways of taking cells. */
#define FIRST false /* the lowest free run */
#define NEXT true   /* the run after the last one taken so */

static void test_pool(void)
{
	enum { N = 100 };
	static _Atomic uint32_t marks[N];
	pcori_shm_pool_t p;
	CHECK_OK(pcori_shm_pool_init(&p, N, marks));
	uint32_t a, b, c, x;
	CHECK(!pcori_shm_pool_alloc(&p, 0, FIRST, &x));
	CHECK(!pcori_shm_pool_alloc(&p, N + 1, FIRST, &x));
	CHECK(pcori_shm_pool_alloc(&p, 40, FIRST, &a) && a == 0);
	CHECK(pcori_shm_pool_alloc(&p, 40, FIRST, &b) && b == 40);
	CHECK(atomic_load(&marks[a]) == PCORI_SHM_MARK_BUSY);
	CHECK(!pcori_shm_pool_alloc(&p, 21, FIRST, &x)); /* 20 left */
	CHECK(pcori_shm_pool_alloc(&p, 20, FIRST, &c) && c == 80);
	CHECK(p.nfree == 0);
	/* A run never announced comes straight back. */
	pcori_shm_pool_free(&p, b, 40);
	CHECK(p.nfree == 40);
	CHECK(pcori_shm_pool_alloc(&p, 10, FIRST, &b) && b == 40);
	/* Announced runs come back once marked, oldest first. */
	pcori_shm_pool_publish(&p, a, 40, NULL);
	pcori_shm_pool_publish(&p, b, 10, &gone_flag);
	pcori_shm_pool_publish(&p, c, 20, NULL);
	CHECK(pcori_shm_pool_out(&p, gone_if_tagged) == 3);
	CHECK(pcori_shm_pool_sweep(&p, false, NULL) == 0);
	pcori_shm_mark_done(marks, c); /* out of order */
	CHECK(pcori_shm_pool_out(&p, gone_if_tagged) == 2);
	CHECK(pcori_shm_pool_sweep(&p, false, NULL) == 0);
	CHECK(pcori_shm_pool_sweep(&p, true, NULL) == 20);
	CHECK(p.rcount == 3); /* a tombstone behind the oldest */
	pcori_shm_mark_done(marks, a);
	CHECK(pcori_shm_pool_sweep(&p, false, NULL) == 40);
	CHECK(p.rcount == 2);
	/* A receiver that left never marks: its runs are reclaimed. */
	CHECK(pcori_shm_pool_out(&p, gone_if_tagged) == 1);
	CHECK(pcori_shm_pool_sweep(&p, false, gone_if_tagged) == 0);
	gone_flag = true;
	/* Not awaited once its receiver is lost, reclaimed or not. */
	CHECK(pcori_shm_pool_out(&p, gone_if_tagged) == 0);
	CHECK(pcori_shm_pool_sweep(&p, false, gone_if_tagged) == 10);
	CHECK(p.rcount == 0 && p.nfree == N);
	/* First fit: the lowest cells again. */
	CHECK(pcori_shm_pool_alloc(&p, N, FIRST, &x) && x == 0);
	pcori_shm_pool_free(&p, 0, N);
	/* Fragmented: a run needs consecutive cells. */
	uint32_t r[10];
	for (int i = 0; i < 10; i++)
		CHECK(pcori_shm_pool_alloc(&p, 10, FIRST, &r[i]) && r[i] == 10u * i);
	for (int i = 0; i < 10; i += 2)
		pcori_shm_pool_free(&p, r[i], 10);
	CHECK(p.nfree == 50);
	CHECK(!pcori_shm_pool_alloc(&p, 11, FIRST, &x));
	CHECK(pcori_shm_pool_alloc(&p, 10, FIRST, &x) && x == 0);
	pcori_shm_pool_fini(&p);

	/* Tombstones left by out-of-order reclaim never overflow the FIFO. */
	static _Atomic uint32_t m3[4];
	CHECK_OK(pcori_shm_pool_init(&p, 4, m3));
	uint32_t old;
	CHECK(pcori_shm_pool_alloc(&p, 1, FIRST, &old));
	pcori_shm_pool_publish(&p, old, 1, NULL); /* never marked */
	for (int i = 0; i < 50; i++) {
		CHECK(pcori_shm_pool_alloc(&p, 1, FIRST, &x));
		pcori_shm_pool_publish(&p, x, 1, NULL);
		pcori_shm_mark_done(m3, x);
		CHECK(pcori_shm_pool_sweep(&p, true, NULL) == 1);
		CHECK(p.rcount <= 4 && p.nfree == 3);
	}
	pcori_shm_mark_done(m3, old);
	CHECK(pcori_shm_pool_sweep(&p, false, NULL) == 1);
	CHECK(p.rcount == 0 && p.nfree == 4);
	pcori_shm_pool_fini(&p);

	/* Next fit: the search goes on past the last run taken, and wraps. */
	static _Atomic uint32_t m4[8];
	CHECK_OK(pcori_shm_pool_init(&p, 8, m4));
	CHECK(pcori_shm_pool_alloc(&p, 3, NEXT, &x) && x == 0);
	pcori_shm_pool_free(&p, 0, 3);
	CHECK(pcori_shm_pool_alloc(&p, 3, NEXT, &x) && x == 3); /* not 0 again */
	CHECK(pcori_shm_pool_alloc(&p, 3, NEXT, &x) && x == 0); /* 2 at the end */
	CHECK(pcori_shm_pool_alloc(&p, 2, NEXT, &x) && x == 6);
	pcori_shm_pool_free(&p, 3, 3);
	CHECK(pcori_shm_pool_alloc(&p, 1, NEXT, &x) && x == 3); /* from the start */
	CHECK(pcori_shm_pool_alloc(&p, 1, NEXT, &x) && x == 4); /* then onwards */
	pcori_shm_pool_free(&p, 3, 2);
	/* First fit takes the lowest and leaves next fit's place alone. */
	CHECK(pcori_shm_pool_alloc(&p, 1, FIRST, &x) && x == 3);
	CHECK(pcori_shm_pool_alloc(&p, 1, NEXT, &x) && x == 5);
	pcori_shm_pool_fini(&p);

	/* Odd sizes: cells past the end are never handed out. */
	static _Atomic uint32_t m2[70];
	CHECK_OK(pcori_shm_pool_init(&p, 70, m2));
	CHECK(pcori_shm_pool_alloc(&p, 70, FIRST, &x) && x == 0);
	CHECK(!pcori_shm_pool_alloc(&p, 1, FIRST, &x));
	pcori_shm_pool_free(&p, 0, 70);
	CHECK(pcori_shm_pool_alloc(&p, 64, FIRST, &x) && x == 0);
	CHECK(pcori_shm_pool_alloc(&p, 6, FIRST, &x) && x == 64);
	CHECK(!pcori_shm_pool_alloc(&p, 1, FIRST, &x));
	pcori_shm_pool_fini(&p);
}

/*
 * The allocator against a plain model (a byte per cell, first or next
 * fit by brute force) over random runs and frees across word boundaries: same
 * cell chosen every time, same refusals, same free count.
 */
static void test_pool_model(void)
{
	enum { N = 300, STEPS = 20000 };
	static _Atomic uint32_t marks[N];
	static uint8_t used[N];
	static uint32_t at[N], len[N];
	uint32_t nlive = 0, nfree = N, seed = 12345, next = 0;
	pcori_shm_pool_t p;
	CHECK_OK(pcori_shm_pool_init(&p, N, marks));
	memset(used, 0, sizeof(used));
	for (int step = 0; step < STEPS; step++) {
		seed = seed * 1103515245u + 12345u;
		uint32_t rnd = seed >> 8;
		if (nlive && rnd % 3 == 0) { /* free a random live run */
			uint32_t k = (rnd / 3) % nlive;
			pcori_shm_pool_free(&p, at[k], len[k]);
			memset(used + at[k], 0, len[k]);
			nfree += len[k];
			at[k] = at[nlive - 1];
			len[k] = len[nlive - 1];
			nlive--;
			continue;
		}
		/* Mostly single cells, sometimes runs longer than a word. */
		uint32_t count = rnd % 8 ? 1 + rnd % 5 : 1 + rnd % 130;
		uint32_t want = UINT32_MAX;
		bool oldest = rnd & 256;
		/* Next fit from past its last run, then from the start. */
		for (int pass = !oldest; pass < 2 && want == UINT32_MAX;
		     pass++) {
			for (uint32_t i = pass ? 0 : next;
			     i + count <= N && want == UINT32_MAX; i++) {
				uint32_t j = 0;
				while (j < count && !used[i + j])
					j++;
				if (j == count)
					want = i;
			}
		}
		uint32_t got = UINT32_MAX;
		bool ok = pcori_shm_pool_alloc(&p, count, oldest, &got);
		CHECK(ok == (want != UINT32_MAX));
		if (!ok)
			continue;
		CHECK(got == want);
		if (oldest)
			next = got + count;
		memset(used + got, 1, count);
		nfree -= count;
		at[nlive] = got;
		len[nlive] = count;
		nlive++;
		CHECK(p.nfree == nfree);
	}
	pcori_shm_pool_fini(&p);
}

/*
 * The table of peers a process declared lost: a read that began before a
 * note of our pid learns of it after; notes of others, or of us before
 * the window scrolled past, are told apart; a count moved too far (by
 * the owner or a hostile writer) answers "lost" rather than guess.
 */
static void test_lost(void)
{
	static pcori_shm_hdr_t h; /* zeroed, as a fresh segment */
	const int32_t me = 7;
	CHECK(!pcori_shm_lost_since(&h, 0, me));
	pcori_shm_lost_note(&h, 3);
	CHECK(!pcori_shm_lost_since(&h, 0, me));
	uint32_t before = atomic_load(&h.nlost);
	pcori_shm_lost_note(&h, me);
	CHECK(pcori_shm_lost_since(&h, before, me));
	CHECK(!pcori_shm_lost_since(&h, before, 3 + 100));
	/* Noted before the read began: still seen while in the window. */
	for (int i = 0; i < PCORI_SHM_LOST_MAX - 2; i++)
		pcori_shm_lost_note(&h, 1000 + i);
	CHECK(atomic_load(&h.nlost) == PCORI_SHM_LOST_MAX);
	CHECK(pcori_shm_lost_since(&h, atomic_load(&h.nlost), me));
	/* One more note scrolls our entry out: from now on, not lost. */
	pcori_shm_lost_note(&h, 2000);
	pcori_shm_lost_note(&h, 2001);
	CHECK(!pcori_shm_lost_since(&h, atomic_load(&h.nlost), me));
	CHECK(pcori_shm_lost_since(&h, atomic_load(&h.nlost), 2001));
	/* More notes during one read than the table holds: cannot tell. */
	before = atomic_load(&h.nlost);
	for (int i = 0; i <= PCORI_SHM_LOST_MAX; i++)
		pcori_shm_lost_note(&h, 3000 + i);
	CHECK(pcori_shm_lost_since(&h, before, me));
	/* A count written backwards or garbage: an answer, no fault. */
	atomic_store(&h.nlost, 5);
	CHECK(pcori_shm_lost_since(&h, 100, me));
	atomic_store(&h.nlost, UINT32_MAX);
	CHECK(pcori_shm_lost_since(&h, 0, me));
	/* Every index stays in the table (ASan would see one outside). */
	for (uint32_t b = UINT32_MAX - 70; b != 2; b++)
		(void)pcori_shm_lost_since(&h, b, me);
}

int main(void)
{
	test_layout();
	test_ring_basic();
	test_ring_stale();
	test_ring_slots();
	test_ring_malformed();
	test_ring_threads();
	test_pool();
	test_pool_model();
	test_lost();
	printf("shm_unit: ok\n");
	return 0;
}
