/*
 * shm_ring.c -- the shared-memory data structures of the pcor-shm port:
 * segment layout, SPSC receive rings and the send cell pool.
 *
 * Design notes
 *  - A ring is a byte array and two monotonically growing positions:
 *    the producer's tail (private) and the consumer's head (shared).  A
 *    record is an 8-byte header (stamp, kind, length) and its payload,
 *    padded to a 32-byte slot or to whole lines.  Records of lines start
 *    on one (a PAD fills the slot before when the tail is mid-line): a
 *    small message is one line, one transfer.  One-slot records (a fast
 *    message of up to 8 bytes, a cell run) pair up in a line, as Open
 *    MPI's vader packs its fast boxes: a stream of them moves half the
 *    lines, at the price of the consumer reading one half while the
 *    producer writes the other.  A record never straddles the end: a
 *    WRAP record fills the rest of the ring instead.
 *  - The producer publishes a record by storing its header last; the
 *    header's stamp is derived from the record's position, so the
 *    consumer polls the one line at its head and an 8-byte message moves
 *    one cache line (Lamport-style, as MPI shared-memory queues do).
 *  - The first word of every line is 0 or a header an old lap left
 *    (whose stamp names that lap): the consumer zeroes it in the lines a
 *    record's payload ran over once it is done with the record, and a
 *    reset zeroes it everywhere.  A line's second slot is read as a head
 *    only after a one-slot record at the line's start in the same lap,
 *    whose producer zeroed it first (in a line it writes anyway).  So
 *    what the consumer finds at its head is never the middle of an old
 *    record that happens to look like a header, and the producer
 *    touches no line but the record's own (it
 *    used to clear the next record's header, a second line written per
 *    message and, ahead of the header in store order, on the path to
 *    the consumer).  The consumer stores head (release) after it is done
 *    with the records, so the producer never overwrites bytes still
 *    read; the producer reads head only when the ring looks full.
 *  - Record headers are read once, with one 8-byte load, into locals:
 *    a producer rewriting them meanwhile cannot make us check one value
 *    and use another.
 *  - Cells: a bitmap of free cells (next or first fit) and a FIFO of
 *    announced runs.  A receiver sets a run's mark to DONE; the owner
 *    sweeps.
 */
#include "shm.h"

static inline uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int pcori_shm_layout(pcori_shm_geom_t *g)
{
	uint32_t rs = g->ring_size;
	if (g->nslots < 1 || g->nslots > 4096 || rs < 4096 ||
	    rs > (16u << 20) || (rs & (rs - 1)) || g->cell_size < 1024 ||
	    g->cell_size > (16u << 20) || g->cell_size % PCORI_SHM_LINE ||
	    g->ncells < 1 || g->ncells > 65536)
		return -1;
	/* Keep a segment's address space reasonable (pages come on use). */
	if ((uint64_t)g->nslots * rs > (1ull << 32) ||
	    (uint64_t)g->ncells * g->cell_size > (1ull << 32))
		return -1;
	uint64_t off = round_up(sizeof(pcori_shm_hdr_t), PCORI_SHM_PAGE);
	g->off_owner = off;
	off = round_up(off + (uint64_t)g->nslots * 8, PCORI_SHM_LINE);
	g->off_head = off;
	off = round_up(off + (uint64_t)g->nslots * 8, PCORI_SHM_LINE);
	g->off_mark = off;
	off = round_up(off + (uint64_t)g->ncells * 4, PCORI_SHM_PAGE);
	g->off_ring = off;
	off += (uint64_t)g->nslots * rs;
	g->off_cell = off;
	off += (uint64_t)g->ncells * g->cell_size;
	g->size = round_up(off, PCORI_SHM_PAGE);
	return 0;
}

/* ------------------------------------------------------------- rings */

static inline void word_put(uint8_t *at, uint64_t w, int order)
{
	__atomic_store_n((uint64_t *)(void *)at, w, order);
}

static inline uint64_t word_get(const uint8_t *at)
{
	return __atomic_load_n((const uint64_t *)(const void *)at,
			       __ATOMIC_ACQUIRE);
}

void *pcori_shm_ring_reserve(const pcori_shm_ring_t *r, pcori_shm_prod_t *pr,
			     uint32_t kind, uint32_t len, uint32_t plen)
{
	PCORI_ASSERT(len <= PCORI_SHM_LEN_MAX);
	uint64_t need = pcori_shm_rec_size(plen);
	uint64_t tail = pr->tail;
	uint64_t pos = tail & (r->size - 1);
	uint64_t room = r->size - pos;
	/*
	 * A filler first: the rest of the ring when the record does not fit
	 * there, a slot when it needs whole lines and the tail is at a
	 * line's middle.
	 */
	uint32_t fkind = 0;
	uint64_t fill = 0;
	if (need > room) {
		fkind = PCORI_SHM_REC_WRAP;
		fill = room;
	} else if (need > PCORI_SHM_SLOT && (pos & (PCORI_SHM_LINE - 1))) {
		fkind = PCORI_SHM_REC_PAD;
		fill = PCORI_SHM_SLOT;
	}
	uint64_t at = (pos + fill) & (r->size - 1);
	/*
	 * A slot at a line's start clears the line's second slot (see
	 * pcori_shm_stamp), so it needs the whole line free.
	 */
	bool pair = need == PCORI_SHM_SLOT && !(at & (PCORI_SHM_LINE - 1));
	uint64_t total = fill + (pair ? PCORI_SHM_LINE : need);
	/*
	 * The head we saw last is usually far enough behind: only reload
	 * it (a cache miss on the consumer's line) when it is not.
	 */
	if (tail + total - pr->head > r->size) {
		pr->head = atomic_load_explicit(r->head, memory_order_acquire);
		if (tail + total - pr->head > r->size)
			return NULL;
	}
	pr->fill = fkind != 0;
	if (fkind) {
		pr->fill_at = pos;
		pr->fill_word = pcori_shm_hdr_word(tail, fkind, (uint32_t)fill);
		tail += fill;
	}
	if (pair)
		word_put(r->buf + at + PCORI_SHM_SLOT, 0, __ATOMIC_RELAXED);
	pr->at = at;
	pr->word = pcori_shm_hdr_word(tail, kind, len);
	pr->tail = tail + need;
	return r->buf + at + PCORI_SHM_REC_HDR;
}

void pcori_shm_ring_commit(const pcori_shm_ring_t *r, pcori_shm_prod_t *pr)
{
	/* The record first: a consumer that sees the filler finds it. */
	word_put(r->buf + pr->at, pr->word, __ATOMIC_RELEASE);
	if (pr->fill) {
		word_put(r->buf + pr->fill_at, pr->fill_word, __ATOMIC_RELEASE);
		pr->fill = false;
	}
}

int pcori_shm_ring_next(const pcori_shm_ring_t *r, uint64_t head,
			pcori_shm_rec_t *rec, uint64_t *next_p)
{
	uint64_t pos = head & (r->size - 1);
	uint64_t room = r->size - pos;
	bool mid = pos & (PCORI_SHM_LINE - 1); /* at a line's second slot */
	if (pos & (PCORI_SHM_SLOT - 1))
		return -1;
	uint64_t w = word_get(r->buf + pos);
	if ((uint32_t)w != pcori_shm_stamp(head))
		return 0;
	uint32_t kind = (uint32_t)(w >> 32) & 15, len = (uint32_t)(w >> 36);
	uint64_t plen;
	switch (kind) {
	case PCORI_SHM_REC_WRAP:
	case PCORI_SHM_REC_PAD:
		if (kind == PCORI_SHM_REC_WRAP ? pos == 0 || len != room
					       : !mid || len != PCORI_SHM_SLOT)
			return -1;
		rec->kind = kind;
		rec->len = 0;
		rec->data = NULL;
		*next_p = head + len;
		return 1;
	case PCORI_SHM_REC_FAST_S:
		if (len < sizeof(pcori_shm_fast_s_t) ||
		    len > PCORI_SHM_SLOT - PCORI_SHM_REC_HDR)
			return -1;
		plen = len;
		break;
	case PCORI_SHM_REC_INLINE:
	case PCORI_SHM_REC_FAST:
		plen = len;
		break;
	case PCORI_SHM_REC_CELLS:
	case PCORI_SHM_REC_FAST_CELLS:
		plen = 8;
		break;
	default:
		return -1;
	}
	/* No producer makes a record of a whole ring (inline_max), nor
	 * one of lines in a line's middle. */
	uint64_t need = pcori_shm_rec_size(plen);
	if (need > room || need + PCORI_SHM_LINE > r->size ||
	    (mid && need > PCORI_SHM_SLOT))
		return -1;
	const uint8_t *payload = r->buf + pos + PCORI_SHM_REC_HDR;
	rec->kind = kind;
	rec->len = len;
	rec->data = payload;
	if (kind == PCORI_SHM_REC_CELLS || kind == PCORI_SHM_REC_FAST_CELLS) {
		uint64_t c = __atomic_load_n(
			(const uint64_t *)(const void *)payload,
			__ATOMIC_RELAXED);
		rec->first = (uint32_t)c;
		rec->count = (uint32_t)(c >> 32);
		rec->data = NULL;
	}
	*next_p = head + need;
	return 1;
}

void pcori_shm_ring_consumed(const pcori_shm_ring_t *r, uint64_t head,
			     uint64_t next)
{
	/* A record of lines starts on one; a slot's covers no line start. */
	for (uint64_t at = head + PCORI_SHM_LINE; at < next;
	     at += PCORI_SHM_LINE)
		word_put(r->buf + (at & (r->size - 1)), 0, __ATOMIC_RELAXED);
}

void pcori_shm_ring_reset(const pcori_shm_ring_t *r)
{
	for (uint64_t at = 0; at < r->size; at += PCORI_SHM_SLOT)
		word_put(r->buf + at, 0, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------- cells */

int pcori_shm_pool_init(pcori_shm_pool_t *p, uint32_t ncells,
			_Atomic uint32_t *marks)
{
	memset(p, 0, sizeof(*p));
	size_t words = (ncells + 63) / 64;
	p->bits = calloc(words, sizeof(*p->bits));
	p->runs = calloc(ncells, sizeof(*p->runs));
	if (!p->bits || !p->runs) {
		pcori_shm_pool_fini(p);
		return PCOR_ERR_NOMEM;
	}
	/* Bits past the end stay set: never handed out. */
	if (ncells % 64)
		p->bits[words - 1] = ~0ull << (ncells % 64);
	p->ncells = ncells;
	p->nfree = ncells;
	p->marks = marks;
	for (uint32_t i = 0; i < ncells; i++)
		atomic_store_explicit(&marks[i], PCORI_SHM_MARK_IDLE,
				      memory_order_relaxed);
	return PCOR_OK;
}

void pcori_shm_pool_fini(pcori_shm_pool_t *p)
{
	free(p->bits);
	free(p->runs);
	p->bits = NULL;
	p->runs = NULL;
}

/* First index from i, below end, whose bit is set (or clear); else end. */
static uint32_t bit_next(const uint64_t *b, uint32_t i, uint32_t end, bool set)
{
	while (i < end) {
		uint64_t w = set ? b[i / 64] : ~b[i / 64];
		w >>= i % 64;
		if (w) {
			uint32_t at = i + (uint32_t)__builtin_ctzll(w);
			return at < end ? at : end;
		}
		i = (i / 64 + 1) * 64;
	}
	return end;
}

/* Set or clear count bits from first, a word at a time. */
static void bits_set(uint64_t *b, uint32_t first, uint32_t count, bool on)
{
	uint32_t i = first, end = first + count;
	while (i < end) {
		uint32_t k = PCORI_MIN(64 - i % 64, end - i);
		uint64_t m = (k == 64 ? ~0ull : ((1ull << k) - 1)) << (i % 64);
		if (on)
			b[i / 64] |= m;
		else
			b[i / 64] &= ~m;
		i += k;
	}
}

/*
 * The first free run of count cells starting at or after i, skipping a
 * word of used cells at a time; UINT32_MAX if there is none.
 */
static uint32_t run_from(const pcori_shm_pool_t *p, uint32_t i,
			 uint32_t count)
{
	for (;;) {
		i = bit_next(p->bits, i, p->ncells, false);
		if (count > p->ncells - i)
			return UINT32_MAX;
		uint32_t j = bit_next(p->bits, i, i + count, true);
		if (j == i + count)
			return i;
		i = j + 1;
	}
}

bool pcori_shm_pool_alloc(pcori_shm_pool_t *p, uint32_t count, bool oldest,
			  uint32_t *first_p)
{
	if (count == 0 || count > p->nfree)
		return false;
	uint32_t from = oldest ? p->next : 0;
	uint32_t i = run_from(p, from, count);
	if (i == UINT32_MAX && from)
		i = run_from(p, 0, count);
	if (i == UINT32_MAX)
		return false;
	if (oldest)
		p->next = i + count;
	bits_set(p->bits, i, count, true);
	p->nfree -= count;
	atomic_store_explicit(&p->marks[i], PCORI_SHM_MARK_BUSY,
			      memory_order_relaxed);
	*first_p = i;
	return true;
}

void pcori_shm_pool_free(pcori_shm_pool_t *p, uint32_t first, uint32_t count)
{
	PCORI_ASSERT(first < p->ncells && count <= p->ncells - first);
	atomic_store_explicit(&p->marks[first], PCORI_SHM_MARK_IDLE,
			      memory_order_relaxed);
	bits_set(p->bits, first, count, false);
	p->nfree += count;
}

void pcori_shm_pool_publish(pcori_shm_pool_t *p, uint32_t first,
			    uint32_t count, const void *owner)
{
	/*
	 * Runs reclaimed out of order stay behind as tombstones until the
	 * oldest goes; when they fill the FIFO, squeeze them out.  Live runs
	 * hold a cell each and this one is not counted yet, so there is room
	 * afterwards.
	 */
	if (p->rcount == p->ncells) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < p->rcount; i++) {
			pcori_shm_run_t *r = &p->runs[(p->rfirst + i) %
						      p->ncells];
			if (r->count)
				p->runs[(p->rfirst + k++) % p->ncells] = *r;
		}
		p->rcount = k;
	}
	PCORI_ASSERT(p->rcount < p->ncells);
	pcori_shm_run_t *r = &p->runs[(p->rfirst + p->rcount) % p->ncells];
	r->first = first;
	r->count = count;
	r->owner = owner;
	p->rcount++;
}

static bool run_done(pcori_shm_pool_t *p, const pcori_shm_run_t *r,
		     bool (*gone)(const void *owner))
{
	return atomic_load_explicit(&p->marks[r->first],
				    memory_order_acquire) ==
		       PCORI_SHM_MARK_DONE ||
	       (gone && gone(r->owner));
}

uint32_t pcori_shm_pool_sweep(pcori_shm_pool_t *p, bool full,
			      bool (*gone)(const void *owner))
{
	uint32_t freed = 0;
	if (full) {
		for (uint32_t k = 0; k < p->rcount; k++) {
			pcori_shm_run_t *r = &p->runs[(p->rfirst + k) %
						      p->ncells];
			if (r->count && run_done(p, r, gone)) {
				freed += r->count;
				pcori_shm_pool_free(p, r->first, r->count);
				r->count = 0;
			}
		}
	}
	while (p->rcount) {
		pcori_shm_run_t *r = &p->runs[p->rfirst];
		if (r->count) {
			if (!run_done(p, r, gone))
				break;
			freed += r->count;
			pcori_shm_pool_free(p, r->first, r->count);
		}
		p->rfirst = (p->rfirst + 1) % p->ncells;
		p->rcount--;
	}
	p->reclaimed += freed;
	return freed;
}

uint32_t pcori_shm_pool_out(const pcori_shm_pool_t *p,
			    bool (*lost)(const void *owner))
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < p->rcount; k++) {
		const pcori_shm_run_t *r =
		    &p->runs[(p->rfirst + k) % p->ncells];
		n += r->count && !lost(r->owner) &&
		     atomic_load_explicit(&p->marks[r->first],
					  memory_order_acquire) !=
			 PCORI_SHM_MARK_DONE;
	}
	return n;
}

/* ------------------------------------------------------ lost peers */

void pcori_shm_lost_note(pcori_shm_hdr_t *h, int32_t pid)
{
	uint32_t n = atomic_load_explicit(&h->nlost, memory_order_relaxed);
	atomic_store_explicit(&h->lost[n % PCORI_SHM_LOST_MAX], pid,
			      memory_order_relaxed);
	/* Release: a reader that sees the count sees the entry. */
	atomic_store_explicit(&h->nlost, n + 1, memory_order_release);
}

bool pcori_shm_lost_since(const pcori_shm_hdr_t *h, uint32_t before,
			  int32_t pid)
{
	/*
	 * The read's loads before the count's: a reader that saw bytes the
	 * owner wrote after noting us sees the note (the owner stores the
	 * note, then lets go of the memory).
	 */
	atomic_thread_fence(memory_order_acquire);
	uint32_t n = atomic_load_explicit(&h->nlost, memory_order_acquire);
	if (n - before > PCORI_SHM_LOST_MAX)
		return true;
	uint32_t from = n > PCORI_SHM_LOST_MAX ? n - PCORI_SHM_LOST_MAX : 0;
	for (uint32_t i = from; i != n; i++)
		if (atomic_load_explicit(&h->lost[i % PCORI_SHM_LOST_MAX],
					 memory_order_relaxed) == pid)
			return true;
	/* Entries overwritten while we looked: we cannot tell. */
	return atomic_load_explicit(&h->nlost, memory_order_acquire) - before >
	       PCORI_SHM_LOST_MAX;
}
