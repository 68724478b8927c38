/*
 * dma -- the DMA memory pool.
 *
 *   dma sizes     many sizes at once (alignment, usable size, no overlap),
 *                 interior pointers, ranges past a block, double frees,
 *                 non-DMA pointers, reuse of freed spans
 *   dma coalesce  with a 64 MiB reservation: exhaustion, splitting and
 *                 merging of free spans with either neighbour or both
 *   dma threads   concurrent alloc/free, and two threads freeing one block
 *   dma pages     blocks of 64 KiB and more are advised into huge pages,
 *                 smaller ones are not, also on a chunk a span had before
 *                 (read from the mapping's VmFlags in /proc/self/smaps)
 */
#include "core/core.h"

#include "../common.h"

#define MiB ((size_t)1 << 20)

static void *alloc_ok(size_t size)
{
	void *p = NULL;
	CHECK_OK(pcor_dma_alloc(size, &p));
	CHECK(p != NULL);
	CHECK(((uintptr_t)p & 63) == 0);
	size_t usable = 0;
	CHECK_OK(pcor_dma_size(p, &usable));
	CHECK(usable >= size);
	return p;
}

static size_t usable(const void *p)
{
	size_t u = 0;
	CHECK_OK(pcor_dma_size(p, &u));
	return u;
}

/* Every check on one live block of usable size u. */
static void probe_block(char *p, size_t u)
{
	CHECK_OK(pcori_dma_check(p, u));
	CHECK_OK(pcori_dma_check(p, 0));
	CHECK_OK(pcori_dma_check(p + u - 1, 1));
	CHECK_RC(pcori_dma_check(p, u + 1), PCOR_ERR_BADSIZE);
	CHECK_RC(pcori_dma_check(p + u - 1, 2), PCOR_ERR_BADSIZE);
	CHECK_RC(pcori_dma_check(p, SIZE_MAX), PCOR_ERR_BADSIZE);
	CHECK(pcori_dma_is_block_start(p));
	if (u > 1) {
		/* An interior pointer is inside the block, but no block. */
		char *mid = p + u / 2;
		CHECK_OK(pcori_dma_check(mid, u - u / 2));
		CHECK_RC(pcori_dma_check(mid, u - u / 2 + 1),
			 PCOR_ERR_BADSIZE);
		CHECK(!pcori_dma_is_block_start(mid));
		CHECK_RC(pcor_dma_free(mid), PCOR_ERR_NOTDMA);
		CHECK_RC(pcor_dma_free(p + 1), PCOR_ERR_NOTDMA);
		size_t s;
		CHECK_RC(pcor_dma_size(p + 1, &s), PCOR_ERR_NOTDMA);
		/* ...and those refusals left the block alive. */
		CHECK_OK(pcori_dma_check(p, u));
		CHECK(usable(p) == u);
	}
}

static void case_sizes(void)
{
	CHECK_OK(pcor_init(NULL, NULL));
	size_t sizes[128];
	size_t n = 0;
	sizes[n++] = 0;
	sizes[n++] = 1;
	for (size_t s = 2; s <= 32 * MiB; s <<= 1) {
		sizes[n++] = s - 1;
		sizes[n++] = s;
		sizes[n++] = s + 1;
	}
	sizes[n++] = 1000;
	sizes[n++] = 3 * MiB + 5;
	sizes[n++] = 9 * MiB;
	th_ref_init(33 * MiB);

	/* All live at once, each filled with its own contents. */
	char *p[128];
	size_t in_use0 = pcori_dma_in_use();
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		p[i] = alloc_ok(sizes[i]);
		total += usable(p[i]);
		th_ref_fill(p[i], sizes[i], i);
	}
	CHECK(pcori_dma_in_use() == in_use0 + total);
	for (size_t i = 0; i < n; i++)
		CHECK_REF(p[i], sizes[i], i);
	/* No two blocks overlap. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			CHECK(p[i] + usable(p[i]) <= p[j] ||
			      p[j] + usable(p[j]) <= p[i]);
	for (size_t i = 0; i < n; i++)
		probe_block(p[i], usable(p[i]));

	/* Double frees, and a freed block is no DMA memory any more. */
	for (size_t i = 0; i < n; i++) {
		CHECK_OK(pcor_dma_free(p[i]));
		CHECK_RC(pcor_dma_free(p[i]), PCOR_ERR_NOTDMA);
		CHECK_RC(pcori_dma_check(p[i], 1), PCOR_ERR_NOTDMA);
		CHECK(!pcori_dma_is_block_start(p[i]));
		size_t s;
		CHECK_RC(pcor_dma_size(p[i], &s), PCOR_ERR_NOTDMA);
	}
	CHECK(pcori_dma_in_use() == in_use0);

	/* What never was DMA memory. */
	char stack[64];
	char *heap = malloc(4096);
	CHECK(heap != NULL);
	void *base;
	size_t len;
	pcori_dma_range(&base, &len);
	const void *alien[] = {stack, heap, (char *)base - 1,
			       (char *)base + len, (void *)(uintptr_t)64};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(alien); i++) {
		CHECK_RC(pcori_dma_check(alien[i], 1), PCOR_ERR_NOTDMA);
		CHECK_RC(pcor_dma_free((void *)alien[i]), PCOR_ERR_NOTDMA);
		size_t s;
		CHECK_RC(pcor_dma_size(alien[i], &s), PCOR_ERR_NOTDMA);
	}
	free(heap);
	CHECK_RC(pcori_dma_check(NULL, 0), PCOR_ERR_NOTDMA);
	CHECK_OK(pcor_dma_free(NULL));
	size_t s;
	CHECK_RC(pcor_dma_size(NULL, &s), PCOR_ERR_INVAL);
	void *q = alloc_ok(10);
	CHECK_RC(pcor_dma_size(q, NULL), PCOR_ERR_INVAL);
	CHECK_OK(pcor_dma_free(q));
	CHECK_RC(pcor_dma_alloc(10, NULL), PCOR_ERR_INVAL);
	void *none = &s;
	CHECK_RC(pcor_dma_alloc(len + 1, &none), PCOR_ERR_BADSIZE);
	CHECK_RC(pcor_dma_alloc(SIZE_MAX, &none), PCOR_ERR_BADSIZE);
	CHECK(none == &s); /* untouched on failure */

	/* A freed span is used again, not fresh address space. */
	for (int round = 0; round < 3; round++) {
		char *a = alloc_ok(8 * MiB);
		a[0] = 1;
		a[8 * MiB - 1] = 2;
		CHECK_OK(pcor_dma_free(a));
		char *b = alloc_ok(8 * MiB);
		CHECK(b == a);
		CHECK_OK(pcor_dma_free(b));
	}

	/* Past the cache of free spans their pages go back to the system;
	 * the address space is still reused, merged, and writable. */
	char *big[3];
	for (int i = 0; i < 3; i++) {
		big[i] = alloc_ok(256 * MiB);
		memset(big[i], 0x5a, 4096);
		memset(big[i] + 256 * MiB - 4096, 0xa5, 4096);
	}
	for (int i = 0; i < 3; i++)
		CHECK_OK(pcor_dma_free(big[i]));
	char *all = alloc_ok(768 * MiB);
	/* Taken from the merged spans, not from address space never used. */
	char *top = big[0];
	for (int i = 1; i < 3; i++)
		top = big[i] > top ? big[i] : top;
	CHECK(all + 768 * MiB <= top + 256 * MiB);
	memset(all, 1, 4096);
	memset(all + 768 * MiB - 4096, 2, 4096);
	CHECK_OK(pcor_dma_free(all));

	CHECK(pcori_dma_in_use() == in_use0);
	th_ref_fini();
	CHECK_OK(pcor_finalize());
}

/*
 * With a 64 MiB reservation (16 chunks of 4 MiB) every chunk is counted:
 * a request fits only where free chunks were merged.
 */
static void case_coalesce(void)
{
	CHECK(setenv("PCOR_DMA_RESERVE", "64m", 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	void *base;
	size_t len;
	pcori_dma_range(&base, &len);
	CHECK(len == 64 * MiB);

	for (int round = 0; round < 2; round++) {
		char *a = alloc_ok(16 * MiB), *b = alloc_ok(16 * MiB);
		char *c = alloc_ok(16 * MiB), *d = alloc_ok(16 * MiB);
		CHECK(pcori_dma_in_use() == 64 * MiB);
		/* Full: not even a small block (it needs a chunk for a slab). */
		void *x = NULL;
		CHECK_RC(pcor_dma_alloc(1, &x), PCOR_ERR_NOMEM);
		CHECK_RC(pcor_dma_alloc(4 * MiB, &x), PCOR_ERR_NOMEM);
		CHECK_RC(pcor_dma_alloc(64 * MiB + 1, &x), PCOR_ERR_BADSIZE);
		CHECK(x == NULL);
		char *e;
		if (round == 0) {
			/* b then c: c merges with its left neighbour. */
			CHECK_OK(pcor_dma_free(b));
			CHECK_RC(pcor_dma_alloc(32 * MiB, &x), PCOR_ERR_NOMEM);
			CHECK_OK(pcor_dma_free(c));
			e = alloc_ok(32 * MiB);
			CHECK(e == b);
			CHECK_OK(pcor_dma_free(e));
			/* a merges with its right neighbour (b+c). */
			CHECK_OK(pcor_dma_free(a));
			e = alloc_ok(48 * MiB);
			CHECK(e == a);
			CHECK_OK(pcor_dma_free(e));
		} else {
			/* a and c first, then b joins both neighbours. */
			CHECK_OK(pcor_dma_free(a));
			CHECK_OK(pcor_dma_free(c));
			CHECK_RC(pcor_dma_alloc(32 * MiB, &x), PCOR_ERR_NOMEM);
			CHECK_OK(pcor_dma_free(b));
			e = alloc_ok(48 * MiB);
			CHECK(e == a);
			CHECK_OK(pcor_dma_free(e));
		}
		CHECK_OK(pcor_dma_free(d));
		e = alloc_ok(64 * MiB);
		CHECK(e == (char *)base);
		e[0] = 1;
		e[64 * MiB - 1] = 1;
		CHECK_OK(pcor_dma_free(e));
		CHECK(pcori_dma_in_use() == 0);
	}

	/* A span is split for a slab; the rest still serves a big block. */
	char *small = alloc_ok(64);
	char *rest = alloc_ok(60 * MiB);
	void *x = NULL;
	CHECK_RC(pcor_dma_alloc(128, &x), PCOR_ERR_NOMEM); /* new class */
	char *small2 = alloc_ok(64); /* same class: same slab */
	CHECK_OK(pcor_dma_free(rest));
	x = alloc_ok(128);
	CHECK_OK(pcor_dma_free(x));
	CHECK_OK(pcor_dma_free(small));
	CHECK_OK(pcor_dma_free(small2));

	/* Spans freed and taken again, many times over: nothing leaks. */
	for (int i = 0; i < 200; i++) {
		char *s = alloc_ok((size_t)(40 + i % 9) * MiB);
		s[0] = (char)i;
		CHECK_OK(pcor_dma_free(s));
	}
	CHECK(pcori_dma_in_use() == 0);
	CHECK_OK(pcor_finalize());
}

/* ---- threads ---- */

#define NTHREADS 4
#define ROUNDS 30000
#define FREE_RACES 2000
#define FREERS 2 /* few enough to run at once on a small machine */

static char *_Atomic shared_block;
static _Atomic int free_ok, free_notdma;
static _Atomic int go, done; /* a spinning gate: no sleeper lags behind */
static pthread_barrier_t phase;

static void spin_until(_Atomic int *v, int at_least)
{
	uint64_t deadline = th_now_ns() + 60ull * 1000000000u;
	while (atomic_load(v) < at_least) {
		CHECK(th_now_ns() < deadline);
		sched_yield();
	}
}

static void *churn(void *arg)
{
	uint64_t me = (uint64_t)(intptr_t)arg;
	uint64_t rs = me + 1;
	char *held[16];
	size_t hsize[16];
	uint64_t hkey[16];
	int n = 0;
	for (int i = 0; i < ROUNDS; i++) {
		if (n < 16 && (n == 0 || th_rand(&rs) % 3)) {
			uint64_t r = th_rand(&rs);
			size_t size = r % 389 == 0 ? (size_t)(r % (5 * MiB))
						  : (size_t)(r % 70000);
			void *p;
			CHECK_OK(pcor_dma_alloc(size, &p));
			hkey[n] = me * 1000000 + (uint64_t)i;
			th_ref_fill(p, size, hkey[n]);
			held[n] = p;
			hsize[n++] = size;
		} else {
			int k = (int)(th_rand(&rs) % (uint64_t)n);
			/* Nobody else wrote into our block. */
			CHECK_REF(held[k], hsize[k], hkey[k]);
			CHECK_OK(pcor_dma_free(held[k]));
			held[k] = held[--n];
			hsize[k] = hsize[n];
			hkey[k] = hkey[n];
		}
	}
	while (n--) {
		CHECK_REF(held[n], hsize[n], hkey[n]);
		CHECK_OK(pcor_dma_free(held[n]));
	}

	/*
	 * Two threads free one block at once: exactly one succeeds.  Nobody
	 * allocates meanwhile, or the block could be someone's again.
	 */
	th_barrier_wait(&phase);
	for (int i = 0; i < FREE_RACES && me < FREERS; i++) {
		spin_until(&go, i + 1);
		int rc = pcor_dma_free(atomic_load(&shared_block));
		if (rc == PCOR_OK)
			atomic_fetch_add(&free_ok, 1);
		else if (rc == PCOR_ERR_NOTDMA)
			atomic_fetch_add(&free_notdma, 1);
		atomic_fetch_add(&done, 1);
	}
	return NULL;
}

static void case_threads(void)
{
	CHECK_OK(pcor_init(NULL, NULL));
	th_ref_init(5 * MiB);
	th_barrier_init(&phase, NTHREADS + 1);
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		th_thread_start(&t[i], churn, (void *)(intptr_t)i);
	th_barrier_wait(&phase);
	for (int i = 0; i < FREE_RACES; i++) {
		/* Alternate slab blocks and spans. */
		void *p = alloc_ok(i & 1 ? 6 * MiB : 256);
		atomic_store(&shared_block, p);
		atomic_store(&free_ok, 0);
		atomic_store(&free_notdma, 0);
		atomic_store(&done, 0);
		atomic_store(&go, i + 1);
		spin_until(&done, FREERS);
		CHECK(atomic_load(&free_ok) == 1);
		CHECK(atomic_load(&free_notdma) == FREERS - 1);
	}
	for (int i = 0; i < NTHREADS; i++)
		th_thread_join(t[i]);
	pthread_barrier_destroy(&phase);
	CHECK(pcori_dma_in_use() == 0);
	th_ref_fini();
	CHECK_OK(pcor_finalize());
}

/*
 * The madvise flags of the mapping holding p: 'h' huge (hg), 'n' no huge
 * (nh), '-' neither.
 */
static char page_advice(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	CHECK(f != NULL);
	char line[512];
	bool in = false;
	char found = 0;
	uintptr_t a = (uintptr_t)p;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping */
			in = a >= lo && a < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8))
			found = strstr(line, " hg") ? 'h'
				: strstr(line, " nh") ? 'n'
						      : '-';
	}
	fclose(f);
	CHECK(found != 0);
	return found;
}

static void case_pages(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	char mode[128] = "";
	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = '\0';
		fclose(f);
	}
	if (!f || strstr(mode, "[never]")) {
		printf("no transparent huge pages here: skipped\n");
		exit(77);
	}
	CHECK_OK(pcor_init(NULL, NULL));
	void *big = alloc_ok(MiB), *span = alloc_ok(6 * MiB);
	CHECK(page_advice(big) == 'h');
	CHECK(page_advice(span) == 'h');
	CHECK(page_advice((char *)span + 6 * MiB - 1) == 'h');
	void *small = alloc_ok(256);
	CHECK(page_advice(small) != 'h');
	/*
	 * The span's chunks go back to the free list; a slab of a small class
	 * made on one of them must leave huge pages.  32 KiB blocks until one
	 * lands there (a slab holds 128; bounded).
	 */
	char *lo = span, *hi = lo + 6 * MiB;
	CHECK_OK(pcor_dma_free(span));
	enum { MAXB = 1024 };
	static void *blk[MAXB];
	int n = 0;
	char *on = NULL;
	while (n < MAXB && !on) {
		char *b = alloc_ok(32 << 10);
		blk[n++] = b;
		if (b >= lo && b < hi)
			on = b;
	}
	CHECK(on != NULL);
	CHECK(page_advice(on) == 'n');
	while (n--)
		CHECK_OK(pcor_dma_free(blk[n]));
	CHECK_OK(pcor_dma_free(small));
	CHECK_OK(pcor_dma_free(big));
	CHECK_OK(pcor_finalize());
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	if (!strcmp(argv[1], "sizes"))
		case_sizes();
	else if (!strcmp(argv[1], "coalesce"))
		case_coalesce();
	else if (!strcmp(argv[1], "threads"))
		case_threads();
	else if (!strcmp(argv[1], "pages"))
		case_pages();
	else
		CHECK(!"unknown case");
	return 0;
}
