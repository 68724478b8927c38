/*
 * dma.c -- DMA-able memory: pcor_dma_alloc / pcor_dma_free.
 *
 * Design notes
 *  - One range of virtual memory is reserved at init (PCOR_DMA_RESERVE,
 *    MAP_NORESERVE: untouched pages cost nothing).  Ports register this
 *    one range with their fabric, so every block is registered with every
 *    port without per-allocation registration.
 *  - The range is cut into 4 MiB chunks with a metadata entry each.  A
 *    chunk is either a slab of one size class (64 B .. 2 MiB, powers of
 *    two) or part of a span of whole chunks for larger blocks.  So "is this
 *    pointer DMA memory, and which block holds it?" is a range compare and
 *    one table lookup, with no lock: that check sits on every sendDMA.
 *  - Each slab keeps a bitmap of live blocks: a double free or a pointer
 *    that was never allocated is PCOR_ERR_NOTDMA, not heap corruption.
 *  - Slabs are kept once made.  Free spans are coalesced and reused; past
 *    PCORI_DMA_CACHE bytes of free spans their pages are given back.
 *  - Blocks of HUGE_MIN and more sit in transparent huge pages where the
 *    kernel offers them (madvise).  These are the blocks a peer pulls by
 *    rendezvous, and a cross-memory read pins every page it reads: with
 *    4 KiB pages the pinning, not the copy, set the pace (pcor-shm moved
 *    1 MiB messages at about a third of the speed).  Smaller classes stay
 *    in small pages, so a slab of tiny blocks costs no 2 MiB.
 */
#include "core.h"

#include <sys/mman.h>

#define CH_SHIFT 22
#define CH_SIZE ((size_t)1 << CH_SHIFT)
#define MIN_SHIFT 6
#define NCLASS (CH_SHIFT - 1 - MIN_SHIFT + 1) /* 64 B .. 2 MiB */
#define PCORI_DMA_CACHE ((size_t)512 << 20)
#define HUGE_MIN ((size_t)64 << 10)

enum { CH_UNUSED = 0, CH_SLAB, CH_SPAN, CH_CONT, CH_FREE };

typedef struct chmeta {
	_Atomic uint8_t kind;
	uint8_t cls;           /* CH_SLAB: size class */
	_Atomic uint8_t live;  /* CH_SPAN: allocated */
	/* CH_SPAN / CH_FREE head: chunks in span.  Atomic: block_of reads
	 * it without the span lock while a racing free rewrites it. */
	_Atomic uint32_t n;
	uint32_t head;         /* CH_CONT / CH_FREE: the span's first chunk */
	_Atomic uint64_t *bits; /* CH_SLAB: live-block bitmap */
	uint8_t pages;          /* PAGES_*: what madvise was told last */
} chmeta_t;

enum { PAGES_DEFAULT = 0, PAGES_HUGE, PAGES_SMALL };

typedef struct dclass {
	alignas(PCORI_CACHELINE) pcori_lock_t lock; /* guards free, bump, end */
	void *free;        /* freed blocks, linked through their first word */
	char *bump, *end;  /* never-used tail of the newest slab */
} dclass_t;

static struct {
	char *map;     /* what mmap returned (for munmap) */
	size_t maplen;
	char *base;    /* chunk-aligned start */
	uint32_t nch;  /* chunks in the range */
	chmeta_t *meta;
	pcori_lock_t span_lock; /* guards free spans, hwm growth */
	_Atomic uint32_t hwm;   /* chunks ever used */
	uint32_t *fspans;       /* heads of free spans */
	uint32_t nfspans;
	size_t free_bytes;      /* in free spans */
	dclass_t cls[NCLASS];
	_Atomic size_t in_use;
} dma;

int pcori_dma_init(size_t reserve)
{
	memset(&dma, 0, sizeof(dma));
	size_t len = (reserve + CH_SIZE - 1) & ~(CH_SIZE - 1);
	dma.maplen = len + CH_SIZE;
	dma.map = mmap(NULL, dma.maplen, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (dma.map == MAP_FAILED) {
		PCORI_ERROR(PCORI_SUB_CORE, "dma: cannot reserve %zu bytes",
			    dma.maplen);
		dma.map = NULL;
		return PCOR_ERR_NOMEM;
	}
	dma.base = (char *)(((uintptr_t)dma.map + CH_SIZE - 1) &
			    ~(uintptr_t)(CH_SIZE - 1));
	dma.nch = (uint32_t)(len >> CH_SHIFT);
	dma.meta = calloc(dma.nch, sizeof(chmeta_t));
	dma.fspans = malloc(sizeof(uint32_t) * dma.nch);
	if (!dma.meta || !dma.fspans) {
		pcori_dma_fini();
		return PCOR_ERR_NOMEM;
	}
	pcori_lock_init(&dma.span_lock);
	for (int i = 0; i < NCLASS; i++)
		pcori_lock_init(&dma.cls[i].lock);
	return PCOR_OK;
}

void pcori_dma_fini(void)
{
	if (dma.meta)
		for (uint32_t i = 0; i < dma.nch; i++)
			free((void *)dma.meta[i].bits);
	free(dma.meta);
	free(dma.fspans);
	if (dma.map)
		munmap(dma.map, dma.maplen);
	memset(&dma, 0, sizeof(dma));
}

void pcori_dma_range(void **base_p, size_t *len_p)
{
	*base_p = dma.base;
	*len_p = (size_t)dma.nch << CH_SHIFT;
}

size_t pcori_dma_in_use(void)
{
	return atomic_load_explicit(&dma.in_use, memory_order_relaxed);
}

static inline char *chunk_addr(uint32_t i)
{
	return dma.base + ((size_t)i << CH_SHIFT);
}

/* ---- spans of whole chunks (span_lock) ---- */

static void fspan_remove_at(uint32_t k)
{
	dma.fspans[k] = dma.fspans[--dma.nfspans];
}

static void mark_free(uint32_t head, uint32_t n)
{
	for (uint32_t i = head; i < head + n; i++) {
		dma.meta[i].head = head;
		atomic_store_explicit(&dma.meta[i].kind, CH_FREE,
				      memory_order_release);
	}
	dma.meta[head].n = n;
}

/* n chunks; returns the head index or UINT32_MAX. */
static uint32_t span_take(uint32_t n)
{
	pcori_lock(&dma.span_lock);
	uint32_t best = UINT32_MAX, bk = 0;
	for (uint32_t k = 0; k < dma.nfspans; k++) {
		uint32_t h = dma.fspans[k];
		if (dma.meta[h].n >= n &&
		    (best == UINT32_MAX || dma.meta[h].n < dma.meta[best].n)) {
			best = h;
			bk = k;
		}
	}
	uint32_t head = UINT32_MAX;
	if (best != UINT32_MAX) {
		uint32_t have = dma.meta[best].n;
		fspan_remove_at(bk);
		dma.free_bytes -= (size_t)have << CH_SHIFT;
		if (have > n) {
			mark_free(best + n, have - n);
			dma.fspans[dma.nfspans++] = best + n;
			dma.free_bytes += (size_t)(have - n) << CH_SHIFT;
		}
		head = best;
	} else {
		uint32_t hwm = atomic_load_explicit(&dma.hwm,
						    memory_order_relaxed);
		if (n <= dma.nch - hwm) {
			head = hwm;
			atomic_store_explicit(&dma.hwm, hwm + n,
					      memory_order_release);
		}
	}
	pcori_unlock(&dma.span_lock);
	return head;
}

static void span_give(uint32_t head, uint32_t n)
{
	pcori_lock(&dma.span_lock);
	/* Merge with free neighbours on both sides. */
	for (uint32_t k = 0; k < dma.nfspans; k++) {
		uint32_t h = dma.fspans[k];
		if (h == head + n) {
			n += dma.meta[h].n;
			dma.free_bytes -= (size_t)dma.meta[h].n << CH_SHIFT;
			fspan_remove_at(k);
			k = (uint32_t)-1; /* rescan: the array moved */
		} else if (h + dma.meta[h].n == head) {
			dma.free_bytes -= (size_t)dma.meta[h].n << CH_SHIFT;
			n += dma.meta[h].n;
			head = h;
			fspan_remove_at(k);
			k = (uint32_t)-1;
		}
	}
	mark_free(head, n);
	dma.fspans[dma.nfspans++] = head;
	dma.free_bytes += (size_t)n << CH_SHIFT;
	if (dma.free_bytes > PCORI_DMA_CACHE)
		madvise(chunk_addr(head), (size_t)n << CH_SHIFT, MADV_DONTNEED);
	pcori_unlock(&dma.span_lock);
}

/*
 * Chunks [i, i + n), just taken (ours alone), in huge pages or not.  Only
 * what changes costs a system call; chunks never advised keep the
 * system's default for small blocks.  Advice is only a hint: a kernel
 * without transparent huge pages refuses it, and nothing else changes.
 */
static void chunks_pages(uint32_t i, uint32_t n, bool huge)
{
	uint8_t want = huge ? PAGES_HUGE : PAGES_SMALL;
	bool change = false;
	for (uint32_t k = i; k < i + n; k++)
		change |= dma.meta[k].pages != want &&
			  (huge || dma.meta[k].pages == PAGES_HUGE);
	if (!change)
		return;
	(void)madvise(chunk_addr(i), (size_t)n << CH_SHIFT,
		      huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	for (uint32_t k = i; k < i + n; k++)
		dma.meta[k].pages = want;
}

/* ---- size classes ---- */

static int class_of(size_t size)
{
	int s = MIN_SHIFT;
	while (((size_t)1 << s) < size)
		s++;
	return s - MIN_SHIFT;
}

/* Start a new slab for class c.  Class lock held. */
static bool slab_new(int c)
{
	PCORI_ASSERT_LOCKED(&dma.cls[c].lock);
	uint32_t i = span_take(1);
	if (i == UINT32_MAX)
		return false;
	size_t nblocks = CH_SIZE >> (c + MIN_SHIFT);
	_Atomic uint64_t *bits = calloc((nblocks + 63) / 64, sizeof(*bits));
	if (!bits) {
		span_give(i, 1);
		return false;
	}
	free((void *)dma.meta[i].bits);
	dma.meta[i].bits = bits;
	dma.meta[i].cls = (uint8_t)c;
	chunks_pages(i, 1, ((size_t)1 << (c + MIN_SHIFT)) >= HUGE_MIN);
	atomic_store_explicit(&dma.meta[i].kind, CH_SLAB, memory_order_release);
	dma.cls[c].bump = chunk_addr(i);
	dma.cls[c].end = chunk_addr(i) + CH_SIZE;
	return true;
}

static void bit_flip(uint32_t ch, char *blk, int c, bool set)
{
	size_t bi = (size_t)(blk - chunk_addr(ch)) >> (c + MIN_SHIFT);
	uint64_t m = (uint64_t)1 << (bi & 63);
	if (set)
		atomic_fetch_or_explicit(&dma.meta[ch].bits[bi >> 6], m,
					 memory_order_release);
	else
		atomic_fetch_and_explicit(&dma.meta[ch].bits[bi >> 6], ~m,
					  memory_order_release);
}

static void *class_alloc(int c)
{
	dclass_t *k = &dma.cls[c];
	size_t bsz = (size_t)1 << (c + MIN_SHIFT);
	char *blk;
	pcori_lock(&k->lock);
	if (k->free) {
		blk = k->free;
		k->free = *(void **)blk;
	} else {
		if (k->bump == k->end && !slab_new(c)) {
			pcori_unlock(&k->lock);
			return NULL;
		}
		blk = k->bump;
		k->bump += bsz;
	}
	bit_flip((uint32_t)((size_t)(blk - dma.base) >> CH_SHIFT), blk, c,
		 true);
	pcori_unlock(&k->lock);
	atomic_fetch_add_explicit(&dma.in_use, bsz, memory_order_relaxed);
	return blk;
}

/* ---- lookups ---- */

typedef struct blockinfo {
	char *start;
	size_t size;
	uint32_t chunk;
	int cls; /* -1 for spans */
} blockinfo_t;

/* Find the live block holding p.  Lock-free. */
static PCORI_ALWAYS_INLINE bool block_of(const void *p, blockinfo_t *bi)
{
	const char *c = p;
	uint32_t hwm = atomic_load_explicit(&dma.hwm, memory_order_acquire);
	if (!dma.base || c < dma.base ||
	    (size_t)(c - dma.base) >= ((size_t)hwm << CH_SHIFT))
		return false;
	uint32_t i = (uint32_t)((size_t)(c - dma.base) >> CH_SHIFT);
	chmeta_t *m = &dma.meta[i];
	switch (atomic_load_explicit(&m->kind, memory_order_acquire)) {
	case CH_SLAB: {
		int cl = m->cls;
		size_t off = (size_t)(c - chunk_addr(i));
		size_t b = off >> (cl + MIN_SHIFT);
		uint64_t w = atomic_load_explicit(&m->bits[b >> 6],
						  memory_order_acquire);
		if (!(w >> (b & 63) & 1))
			return false;
		bi->start = chunk_addr(i) + (b << (cl + MIN_SHIFT));
		bi->size = (size_t)1 << (cl + MIN_SHIFT);
		bi->chunk = i;
		bi->cls = cl;
		return true;
	}
	case CH_CONT:
		i = m->head;
		m = &dma.meta[i];
		/* fall through */
	case CH_SPAN:
		if (atomic_load_explicit(&m->kind, memory_order_acquire) !=
			    CH_SPAN ||
		    !atomic_load_explicit(&m->live, memory_order_acquire))
			return false;
		bi->start = chunk_addr(i);
		bi->size = (size_t)atomic_load_explicit(&m->n,
							memory_order_relaxed)
			   << CH_SHIFT;
		bi->chunk = i;
		bi->cls = -1;
		return true;
	default:
		return false;
	}
}

int pcori_dma_check(const void *p, size_t len)
{
	blockinfo_t bi;
	if (!block_of(p, &bi))
		return PCOR_ERR_NOTDMA;
	if (len > bi.size - (size_t)((const char *)p - bi.start))
		return PCOR_ERR_BADSIZE;
	return PCOR_OK;
}

bool pcori_dma_is_block_start(const void *p)
{
	blockinfo_t bi;
	return block_of(p, &bi) && bi.start == (const char *)p;
}

/* ---- public ---- */

PCOR_API int pcor_dma_alloc(size_t size, void **buf_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!buf_p)
		return PCOR_ERR_INVAL;
	if (size > ((size_t)dma.nch << CH_SHIFT))
		return PCOR_ERR_BADSIZE;
	void *p;
	if (size <= (CH_SIZE >> 1)) {
		p = class_alloc(class_of(size ? size : 1));
	} else {
		uint32_t n = (uint32_t)((size + CH_SIZE - 1) >> CH_SHIFT);
		uint32_t h = span_take(n);
		if (h == UINT32_MAX) {
			p = NULL;
		} else {
			for (uint32_t i = h + 1; i < h + n; i++) {
				dma.meta[i].head = h;
				atomic_store_explicit(&dma.meta[i].kind,
						      CH_CONT,
						      memory_order_release);
			}
			dma.meta[h].n = n;
			chunks_pages(h, n, true);
			atomic_store_explicit(&dma.meta[h].live, 1,
					      memory_order_relaxed);
			atomic_store_explicit(&dma.meta[h].kind, CH_SPAN,
					      memory_order_release);
			atomic_fetch_add_explicit(&dma.in_use,
						  (size_t)n << CH_SHIFT,
						  memory_order_relaxed);
			p = chunk_addr(h);
		}
	}
	if (!p)
		return PCOR_ERR_NOMEM;
	*buf_p = p;
	return PCOR_OK;
}

/* Free without the runtime check: the message layer frees handed-over
 * buffers itself, during finalize too. */
int pcori_dma_free(void *buf)
{
	blockinfo_t bi;
	if (!buf)
		return PCOR_OK;
	if (!block_of(buf, &bi) || bi.start != (char *)buf)
		return PCOR_ERR_NOTDMA;
	if (bi.cls >= 0) {
		dclass_t *k = &dma.cls[bi.cls];
		pcori_lock(&k->lock);
		/* Recheck under the lock: two frees of one block race here. */
		if (!block_of(buf, &bi)) {
			pcori_unlock(&k->lock);
			return PCOR_ERR_NOTDMA;
		}
		bit_flip(bi.chunk, buf, bi.cls, false);
		*(void **)buf = k->free;
		k->free = buf;
		pcori_unlock(&k->lock);
	} else {
		uint8_t one = 1;
		if (!atomic_compare_exchange_strong(&dma.meta[bi.chunk].live,
						    &one, 0))
			return PCOR_ERR_NOTDMA;
		span_give(bi.chunk, (uint32_t)(bi.size >> CH_SHIFT));
	}
	atomic_fetch_sub_explicit(&dma.in_use, bi.size, memory_order_relaxed);
	return PCOR_OK;
}

PCOR_API int pcor_dma_free(void *buf)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	return pcori_dma_free(buf);
}

PCOR_API int pcor_dma_size(const void *buf, size_t *size_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!buf || !size_p)
		return PCOR_ERR_INVAL;
	blockinfo_t bi;
	if (!block_of(buf, &bi) || bi.start != (const char *)buf)
		return PCOR_ERR_NOTDMA;
	*size_p = bi.size;
	return PCOR_OK;
}
