/*
 * handle.c -- the request table behind pcor handles.
 *
 * Design notes
 *  - Requests live in chunks of PCORI_HCHUNK, allocated on demand up to
 *    PCOR_MAX_HANDLES and never moved, so a request pointer stays valid
 *    for the runtime's life and lookup is two loads.
 *  - A handle is (generation << 20) | index.  The slot's gen counter is odd
 *    while allocated and even while free; release claims it odd -> even,
 *    so of two threads testing one handle exactly one gets the status
 *    and the other PCOR_ERR_BADHANDLE.  The 10 generation bits in the
 *    handle make a stale handle look valid only after 1023 reuses of its
 *    slot.  The slot keeps the generation its handles carry (hgen,
 *    1..1023, one step per use), so making and checking a handle costs
 *    no division.
 *  - A send that completed inside its call (the lossless fast path) takes
 *    no slot: its handle is a done token (bit 30 set, which no slot's
 *    handle has), one of PCORI_TOKEN_SLOTS words per thread that the
 *    sender sets and the test claims.  That keeps the rule of one status
 *    per handle and PCOR_ERR_BADHANDLE after it, for a small fraction of
 *    a slot's cost on the hop's path.
 *  - A claim (release, token test) by the thread that made the request
 *    or token, its usual tester, is a load and a store: Dekker-paired
 *    with other threads' claims, which pay an asymmetric fence instead
 *    (claim(), below).  Where another thread keeps claiming a thread's
 *    objects, both sides use a CAS.
 *  - Free slots are kept per pcor thread (a small LIFO in TLS, hot in
 *    cache) in front of one global stack under a lock.  The table is
 *    sized for PCOR_MAX_HANDLES plus every thread's cache.
 *  - Nothing process-wide is written per request: the table's header is
 *    read on every lookup by every thread, so it must stay read-mostly.
 *    How many handles are live is counted from the slots when asked.
 */
#include "core.h"

#include <sched.h>

#define PCORI_HINDEX_BITS 20
#define PCORI_HINDEX_MASK ((1u << PCORI_HINDEX_BITS) - 1)
#define PCORI_HCHUNK_SHIFT 12
#define PCORI_HCHUNK (1u << PCORI_HCHUNK_SHIFT)
#define PCORI_HGEN_SPAN 1023u
#define PCORI_TLS_BATCH 32u

static struct {
	pcori_lock_t lock;    /* guards free[], nfree, chunk growth */
	uint32_t max;         /* capacity, a multiple of PCORI_HCHUNK */
	_Atomic uint32_t nchunks;
	_Atomic(pcori_req_t *) *chunks;
	uint32_t *free;       /* global free stack of indexes */
	uint32_t nfree;
} ht;

_Thread_local pcori_tls_t pcori_tls __attribute__((tls_model("initial-exec")));

/*
 * Done tokens.  A token's handle is bit 30 | gen | thid | slot, the
 * generation taking the bits the thread ids leave (8 of them at 65536
 * threads, 12 at the default 4096).  Its word is gen << 1 | 1 while
 * untested; only the sending thread sets it, any tester clears it.
 */
#define PCORI_TOKEN_SHIFT 6u
#define PCORI_TOKEN_SLOTS (1u << PCORI_TOKEN_SHIFT)
_Static_assert((PCORI_HGEN_SPAN + 1) << PCORI_HINDEX_BITS <= PCORI_TOKEN_BIT,
	       "a slot's handle would look like a done token");

/*
 * Claims.  The thread that made a request or token is nearly always the
 * one that tests it, and a CAS there is one of the few locked
 * instructions left on a message's path.  So that thread (the owner)
 * claims with a load and a store, between noting itself busy and
 * looking whether another thread is claiming one of its objects, with
 * only a compiler fence in between.  Another thread counts itself in
 * `foreign`, makes every running thread fence (membarrier: Dekker's
 * pairing, as in sync.h), waits while the owner is busy and then uses a
 * CAS, which the owner also uses while it sees the count.  A thread
 * whose objects others claim often (claim_share_after) is marked shared
 * for good: from then on both sides use the CAS, without the fence.
 * One record per thread id, a line only its thread writes while nobody
 * else claims.  Only one thread has an id at a time, so only one ever
 * takes a record's owner's way.
 */
static uint32_t claim_share_after = 64; /* pcori_claim_share_set */
/* Added to foreign for good when a thread is marked shared. */
#define CLAIM_SHARED (1u << 31)

typedef struct claim_rec {
	alignas(PCORI_CACHELINE) _Atomic uint32_t busy; /* owner in a claim */
	_Atomic uint32_t foreign; /* others claiming, | CLAIM_SHARED */
	_Atomic uint32_t nforeign; /* claims by others so far */
	_Atomic bool shared; /* CLAIM_SHARED is in, and seen by the owner */
} claim_rec_t;

static struct {
	_Atomic uint32_t *words; /* PCORI_TOKEN_SLOTS per thread id */
	uint32_t nthreads;
	uint32_t thid_bits;
	uint32_t gen_mask;
	claim_rec_t *claims; /* one per thread id */
	void *claims_mem;    /* claims' allocation, unaligned */
} tok;

static inline bool cas_word(_Atomic uint32_t *w, uint32_t want, uint32_t next)
{
	return atomic_compare_exchange_strong_explicit(
		w, &want, next, memory_order_acq_rel, memory_order_relaxed);
}

/* After a heavy fence: wait until the owner is out of a claim it began. */
static void claim_wait_owner(claim_rec_t *c)
{
	/* Acquire: its claim's word is seen. */
	for (unsigned i = 1; atomic_load_explicit(&c->busy,
						  memory_order_acquire);
	     i++) {
		pcori_cpu_relax();
		if ((i & 1023) == 0)
			sched_yield(); /* the owner was switched out */
	}
}

/* Another thread's claim on owner's object: see above. */
static bool claim_foreign(claim_rec_t *c, _Atomic uint32_t *w, uint32_t want,
			  uint32_t next)
{
	if (atomic_load_explicit(&c->shared, memory_order_acquire))
		return cas_word(w, want, next);
	atomic_fetch_add_explicit(&c->foreign, 1, memory_order_seq_cst);
	/* Without the fence the owner may be taking it unseen. */
	pcori_fence_heavy_local_sure();
	claim_wait_owner(c);
	bool won = cas_word(w, want, next);
	uint32_t n = atomic_fetch_add_explicit(&c->nforeign, 1,
					       memory_order_relaxed);
	if (n + 1 == claim_share_after) {
		/* Seen by every owner's claim that starts after our fence;
		 * the others ended while we waited for busy. */
		atomic_fetch_add_explicit(&c->foreign, CLAIM_SHARED,
					  memory_order_seq_cst);
		pcori_fence_heavy_local_sure();
		claim_wait_owner(c);
		atomic_store_explicit(&c->shared, true, memory_order_release);
	}
	atomic_fetch_sub_explicit(&c->foreign, 1, memory_order_release);
	return won;
}

/*
 * Turn *w from want to next if it still holds want; true if this call
 * did.  owner: the thread id that made the object *w belongs to.
 */
static inline bool claim(_Atomic uint32_t *w, uint32_t want, uint32_t next,
			 uint32_t owner)
{
	/*
	 * The owner's way needs the light fences on (with real ones the
	 * CAS alone costs less); an owner's id is in the table.
	 */
	bool mine = (uint32_t)pcori_tls.thid_plus1 == owner + 1;
	if (PCORI_UNLIKELY(!mine || !__atomic_load_n(&pcori_asym_local,
						     __ATOMIC_RELAXED))) {
		if (mine || owner >= tok.nthreads)
			return cas_word(w, want, next);
		return claim_foreign(&tok.claims[owner], w, want, next);
	}
	claim_rec_t *c = &tok.claims[owner];
	atomic_store_explicit(&c->busy, 1, memory_order_relaxed);
	pcori_fence_light_local();
	bool won;
	/* Acquire: a claim that just ended there is seen (its word too). */
	if (PCORI_LIKELY(!atomic_load_explicit(&c->foreign,
					       memory_order_acquire))) {
		won = atomic_load_explicit(w, memory_order_acquire) == want;
		if (won)
			atomic_store_explicit(w, next, memory_order_release);
	} else {
		won = cas_word(w, want, next);
	}
	atomic_store_explicit(&c->busy, 0, memory_order_release);
	return won;
}

static int token_init(uint32_t max_threads)
{
	uint32_t bits = 1;
	while (bits < 16 && (1u << bits) < max_threads)
		bits++;
	tok.thid_bits = bits;
	tok.gen_mask = (1u << (30 - PCORI_TOKEN_SHIFT - bits)) - 1;
	tok.nthreads = max_threads;
	/* Untouched pages of a large calloc cost nothing. */
	tok.words = calloc((size_t)max_threads * PCORI_TOKEN_SLOTS,
			   sizeof(*tok.words));
	tok.claims_mem = calloc((size_t)max_threads + 1, sizeof(claim_rec_t));
	if (!tok.words || !tok.claims_mem)
		return PCOR_ERR_NOMEM;
	uintptr_t a = (uintptr_t)tok.claims_mem;
	a = (a + PCORI_CACHELINE - 1) & ~(uintptr_t)(PCORI_CACHELINE - 1);
	tok.claims = (claim_rec_t *)a;
	return PCOR_OK;
}

void pcori_claim_share_set(uint32_t after)
{
	claim_share_after = after;
	for (uint32_t i = 0; tok.claims && i < tok.nthreads; i++) {
		claim_rec_t *c = &tok.claims[i];
		if (atomic_load(&c->shared))
			atomic_fetch_sub(&c->foreign, CLAIM_SHARED);
		atomic_store(&c->shared, false);
		atomic_store(&c->nforeign, 0);
	}
}

bool pcori_claim_shared(uint32_t thid)
{
	return thid < tok.nthreads && atomic_load(&tok.claims[thid].shared);
}

static void token_fini(void)
{
	free(tok.words);
	free(tok.claims_mem);
	memset(&tok, 0, sizeof(tok));
}

pcor_handle_t pcori_req_done_handle(void)
{
	pcori_tls_t *t = &pcori_tls;
	uint32_t thid = (uint32_t)t->thid_plus1 - 1;
	if (PCORI_UNLIKELY(thid >= tok.nthreads))
		return 0;
	uint32_t i = t->tok_next++ & (PCORI_TOKEN_SLOTS - 1);
	_Atomic uint32_t *w = &tok.words[thid * PCORI_TOKEN_SLOTS + i];
	uint32_t v = atomic_load_explicit(w, memory_order_relaxed);
	if (PCORI_UNLIKELY(v & 1))
		return 0; /* that one is still untested: take a slot */
	uint32_t g = ((v >> 1) + 1) & tok.gen_mask;
	atomic_store_explicit(w, g << 1 | 1, memory_order_release);
	return (pcor_handle_t)(PCORI_TOKEN_BIT |
			       g << (tok.thid_bits + PCORI_TOKEN_SHIFT) |
			       thid << PCORI_TOKEN_SHIFT | i);
}

/*
 * The word of token h, its untested value and its thread; NULL if h
 * cannot be one.
 */
static _Atomic uint32_t *token_word(pcor_handle_t h, uint32_t *want_p,
				    uint32_t *thid_p)
{
	uint32_t u = (uint32_t)h & ~PCORI_TOKEN_BIT;
	uint32_t thid = (u >> PCORI_TOKEN_SHIFT) & ((1u << tok.thid_bits) - 1);
	if (!tok.words || thid >= tok.nthreads)
		return NULL;
	*want_p = (u >> (tok.thid_bits + PCORI_TOKEN_SHIFT)) << 1 | 1;
	*thid_p = thid;
	return &tok.words[thid * PCORI_TOKEN_SLOTS +
			  (u & (PCORI_TOKEN_SLOTS - 1))];
}

void pcori_req_done_undo(pcor_handle_t h)
{
	uint32_t want, thid;
	_Atomic uint32_t *w = token_word(h, &want, &thid);
	if (w)
		atomic_store_explicit(w, want & ~1u, memory_order_relaxed);
}

/* consume: the test that reports it (once); else only whether it is live. */
int pcori_req_token_test(pcor_handle_t h, bool consume)
{
	uint32_t want, thid;
	_Atomic uint32_t *w = token_word(h, &want, &thid);
	if (!w)
		return PCOR_ERR_BADHANDLE;
	if (!consume)
		return atomic_load_explicit(w, memory_order_acquire) == want
			   ? PCOR_OK
			   : PCOR_ERR_BADHANDLE;
	return claim(w, want, want & ~1u, thid) ? PCOR_OK
						: PCOR_ERR_BADHANDLE;
}

int pcori_htable_init(uint32_t max_handles, uint32_t max_threads)
{
	/*
	 * Free slots cached by threads are out of other threads' reach, so
	 * the table also has room for all caches full: max_handles
	 * operations can be in progress however many threads hold cached
	 * slots.  Chunks are only allocated when used.
	 */
	uint64_t want = (uint64_t)max_handles +
			(uint64_t)max_threads * PCORI_TLS_CACHE;
	want = (want + PCORI_HCHUNK - 1) & ~(uint64_t)(PCORI_HCHUNK - 1);
	uint32_t max = want > (1u << PCORI_HINDEX_BITS)
			       ? 1u << PCORI_HINDEX_BITS
			       : (uint32_t)want;
	memset(&ht, 0, sizeof(ht));
	pcori_lock_init(&ht.lock);
	ht.max = max;
	ht.chunks = calloc(max / PCORI_HCHUNK, sizeof(*ht.chunks));
	ht.free = malloc(sizeof(uint32_t) * max);
	if (!ht.chunks || !ht.free || token_init(max_threads)) {
		free(ht.chunks);
		free(ht.free);
		token_fini();
		return PCOR_ERR_NOMEM;
	}
	return PCOR_OK;
}

void pcori_htable_fini(void)
{
	uint32_t n = atomic_load(&ht.nchunks);
	for (uint32_t i = 0; i < n; i++)
		free(atomic_load(&ht.chunks[i]));
	free(ht.chunks);
	free(ht.free);
	memset(&ht, 0, sizeof(ht));
	token_fini();
	pcori_tls.ncache = 0;
}

static inline pcori_req_t *slot(uint32_t idx)
{
	pcori_req_t *c = atomic_load_explicit(&ht.chunks[idx >> PCORI_HCHUNK_SHIFT],
					      memory_order_acquire);
	return &c[idx & (PCORI_HCHUNK - 1)];
}

/* Add one chunk of fresh slots to the global stack.  Lock held. */
static bool grow(void)
{
	PCORI_ASSERT_LOCKED(&ht.lock);
	uint32_t n = atomic_load_explicit(&ht.nchunks, memory_order_relaxed);
	if ((n + 1) * PCORI_HCHUNK > ht.max)
		return false;
	pcori_req_t *c = aligned_alloc(PCORI_CACHELINE,
				       sizeof(pcori_req_t) * PCORI_HCHUNK);
	if (!c)
		return false;
	memset(c, 0, sizeof(pcori_req_t) * PCORI_HCHUNK);
	for (uint32_t i = 0; i < PCORI_HCHUNK; i++) {
		c[i].index = n * PCORI_HCHUNK + i;
		pcori_list_init(&c[i].link);
	}
	atomic_store_explicit(&ht.chunks[n], c, memory_order_release);
	atomic_store_explicit(&ht.nchunks, n + 1, memory_order_release);
	/* Push in reverse so low indexes come out first. */
	for (uint32_t i = PCORI_HCHUNK; i-- > 0;)
		ht.free[ht.nfree++] = n * PCORI_HCHUNK + i;
	return true;
}

static bool pop_index(uint32_t *idx)
{
	pcori_tls_t *t = &pcori_tls;
	bool cached = t->thid_plus1 != 0;
	if (cached && t->ncache) {
		*idx = t->cache[--t->ncache];
		return true;
	}
	pcori_lock(&ht.lock);
	if (ht.nfree == 0 && !grow()) {
		pcori_unlock(&ht.lock);
		return false;
	}
	*idx = ht.free[--ht.nfree];
	/* Refill the thread cache while we hold the lock anyway. */
	while (cached && ht.nfree && t->ncache < PCORI_TLS_BATCH)
		t->cache[t->ncache++] = ht.free[--ht.nfree];
	pcori_unlock(&ht.lock);
	return true;
}

static void push_index(uint32_t idx)
{
	pcori_tls_t *t = &pcori_tls;
	if (t->thid_plus1 && t->ncache < PCORI_TLS_CACHE) {
		t->cache[t->ncache++] = idx;
		return;
	}
	pcori_lock(&ht.lock);
	ht.free[ht.nfree++] = idx;
	/* A full cache spills half, so alloc/free pairs stay local. */
	while (t->thid_plus1 && t->ncache > PCORI_TLS_CACHE / 2)
		ht.free[ht.nfree++] = t->cache[--t->ncache];
	pcori_unlock(&ht.lock);
}

void pcori_htable_flush_tls(void)
{
	pcori_tls_t *t = &pcori_tls;
	if (!t->ncache || !ht.free)
		return;
	pcori_lock(&ht.lock);
	while (t->ncache)
		ht.free[ht.nfree++] = t->cache[--t->ncache];
	pcori_unlock(&ht.lock);
}

/*
 * The completion word's value while the request of generation gen (odd)
 * is pending: even, never PCORI_REQ_DONE nor the sleeper bit, and
 * different for the next use of the slot.  A thread still waiting on a
 * handle whose slot was released and taken again thus sees the word
 * change and returns, instead of waiting for someone else's request.
 */
static inline uint32_t pending_of(uint32_t gen)
{
	return (gen << 1) & ~PCORI_WAIT_SLEEPER;
}

pcori_req_t *pcori_req_alloc(void)
{
	uint32_t idx;
	if (PCORI_UNLIKELY(!pop_index(&idx)))
		return NULL;
	pcori_req_t *r = slot(idx);
	/* Published by the release on gen, so a lookup that sees this
	 * generation odd sees its hgen too. */
	uint32_t hg = atomic_load_explicit(&r->hgen, memory_order_relaxed);
	atomic_store_explicit(&r->hgen,
			      (uint16_t)(hg >= PCORI_HGEN_SPAN ? 1 : hg + 1),
			      memory_order_relaxed);
	/*
	 * Any value is safe (claim()): a pcor thread's own id makes its
	 * release fast; none (UINT16_MAX, past the table unless 65536
	 * threads are allowed) a CAS for everyone.
	 */
	atomic_store_explicit(&r->maker,
			      (uint16_t)(pcori_tls.thid_plus1
					 ? pcori_tls.thid_plus1 - 1
					 : UINT16_MAX),
			      memory_order_relaxed);
	/*
	 * A free slot's gen is written by its owner only: a late tester's
	 * release expects an odd value and fails.  So a store, not a locked
	 * add.
	 */
	uint32_t g = atomic_load_explicit(&r->gen, memory_order_relaxed) + 1;
	atomic_store_explicit(&r->gen, g, memory_order_release);
	atomic_store_explicit(&r->state, pending_of(g), memory_order_relaxed);
	r->status = PCOR_OK;
	pcori_req_flags(r, 0);
	r->ctx = 0;
	/* report is set by pcori_recv_post and read for receives only. */
	return r;
}

/*
 * A receive that ended with a message tells its poster what arrived.  Done
 * by the tester rather than the completer: the report's targets and the
 * report itself are the poster's, in its cache, while the completer is
 * often another thread; info is only read when somebody asked for it.
 */
static void report(const pcori_req_t *r, int status)
{
	/* Without a message, info is what the slot's last request left. */
	if ((r->kind != PCORI_REQ_RECV_COPY && r->kind != PCORI_REQ_RECV_DMA) ||
	    status == PCOR_ERR_CANCELED || status == PCOR_ERR_PEER_LOST)
		return;
	const pcori_report_t *rp = &r->report;
	if (rp->info)
		*rp->info = r->info;
	if (rp->pid)
		*rp->pid = r->info.pid;
	if (rp->thid)
		*rp->thid = r->info.thid;
	if (rp->tag)
		*rp->tag = r->info.tag;
	if (rp->size)
		*rp->size = r->info.size > INT_MAX ? INT_MAX : (int)r->info.size;
}

/*
 * Odd -> even: exactly one caller wins.  Only the winner reads the status
 * (into *status_p; NULL: the request never reached the user, no report),
 * and reports, before the slot can be taken again.
 */
static bool release(pcori_req_t *r, uint32_t gen, int *status_p)
{
	/* maker may be a reuse's (a late tester's): claim() copes. */
	if (!claim(&r->gen, gen, gen + 1,
		   atomic_load_explicit(&r->maker, memory_order_relaxed)))
		return false;
	if (status_p) {
		*status_p = r->status;
		report(r, r->status);
	}
	push_index(r->index);
	return true;
}

void pcori_req_free(pcori_req_t *req)
{
	uint32_t g = atomic_load_explicit(&req->gen, memory_order_relaxed);
	PCORI_ASSERT(g & 1);
	release(req, g, NULL);
}

pcor_handle_t pcori_req_handle(const pcori_req_t *req)
{
	uint32_t hg = atomic_load_explicit(&req->hgen, memory_order_relaxed);
	return (pcor_handle_t)((hg << PCORI_HINDEX_BITS) | req->index);
}

pcori_req_t *pcori_req_lookup(pcor_handle_t h, uint32_t *gen_p)
{
	if (h <= 0)
		return NULL;
	uint32_t idx = (uint32_t)h & PCORI_HINDEX_MASK;
	uint32_t hg = (uint32_t)h >> PCORI_HINDEX_BITS;
	uint32_t nch = atomic_load_explicit(&ht.nchunks, memory_order_acquire);
	if ((idx >> PCORI_HCHUNK_SHIFT) >= nch)
		return NULL;
	pcori_req_t *r = slot(idx);
	uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
	if (!(g & 1) ||
	    atomic_load_explicit(&r->hgen, memory_order_relaxed) != hg)
		return NULL;
	if (gen_p)
		*gen_p = g;
	return r;
}

size_t pcori_htable_live(void)
{
	/* A slot is allocated while its generation is odd. */
	size_t n = 0;
	uint32_t nch = atomic_load_explicit(&ht.nchunks, memory_order_acquire);
	for (uint32_t i = 0; i < nch * PCORI_HCHUNK; i++)
		n += atomic_load_explicit(&slot(i)->gen, memory_order_relaxed) &
		     1u;
	return n;
}

void pcori_req_wake(pcori_req_t *req)
{
	/* Read after the completion: at worst a reused slot's spurious wake. */
	_Atomic uint32_t *alt = atomic_load(&req->wake_alt);
	pcori_futex_wake(&req->state, INT_MAX);
	if (alt) {
		atomic_fetch_add(alt, 1);
		pcori_futex_wake_shared(alt, INT_MAX);
	}
}

void pcori_req_complete(pcori_req_t *req, int status)
{
	/* From here on req may be released and reused by the tester. */
	if (pcori_req_complete_nowake(req, status))
		pcori_req_wake(req);
}

bool pcori_inbox_harvest(pcori_inbox_t *b, uint32_t filled, pcori_req_t *r)
{
	/*
	 * Read first, into our stack, then claim: once the word is FREE the
	 * owner may arm and a sender refill the line.  A loser's reads are
	 * thrown away.
	 */
	uint32_t size = atomic_load_explicit(&b->size, memory_order_relaxed);
	int32_t src = atomic_load_explicit(&b->src_thid, memory_order_relaxed);
	int32_t tag = atomic_load_explicit(&b->src_tag, memory_order_relaxed);
	uint64_t d[PCORI_INBOX_DATA / 8];
	size_t n = PCORI_MIN(size, PCORI_INBOX_DATA);
	for (size_t i = 0; i < (n + 7) / 8; i++)
		d[i] = atomic_load_explicit(&b->data[i], memory_order_relaxed);
	if (!atomic_compare_exchange_strong_explicit(
		    &b->word, &filled, PCORI_INBOX_SEQ(filled),
		    memory_order_acq_rel, memory_order_relaxed))
		return false;
	int st = PCOR_OK;
	r->info.pid = pcori_rt.pid;
	r->info.thid = src;
	r->info.tag = tag;
	r->info.size = n;
	if (r->kind == PCORI_REQ_RECV_COPY) {
		size_t k = PCORI_MIN(n, r->len), i = 0;
		unsigned char *p = r->buf;
		/* Short: word stores beat a call to memcpy. */
		for (; i + 8 <= k; i += 8)
			memcpy(p + i, &d[i / 8], 8);
		for (; i < k; i++)
			p[i] = ((const unsigned char *)d)[i];
		if (k < n)
			st = PCOR_ERR_TRUNCATE;
	} else {
		void *out = NULL;
		if (n) {
			if (pcori_dma_alloc(n, &out) == PCOR_OK)
				memcpy(out, d, n);
			else
				st = PCOR_ERR_NOMEM;
		}
		*r->report.dma = out;
	}
	pcori_req_complete(r, st);
	return true;
}

/* A spinning waiter offers its CPU after this long without its message. */
#define DRIVE_YIELD_NS 2000

/*
 * Wait while r is armed in its inbox (PCORI_REQF_INBOX): its message comes
 * in the inbox line, which is then the only line we read, and we deliver
 * it ourselves.  PCOR_OK once the request's own word tells the rest (it
 * was delivered, here or by another tester, or moved out of the inbox to
 * be completed the usual way); PCOR_INPROGRESS, PCOR_ERR_TIMEDOUT, or
 * PCOR_ERR_BADHANDLE for a slot reused meanwhile.
 */
static int inbox_wait(pcori_req_t *r, uint32_t gen, bool block,
		      uint64_t deadline)
{
	pcori_inbox_t *b = atomic_load_explicit(&r->inbox,
						memory_order_relaxed);
	uint32_t seq = atomic_load_explicit(&r->inbox_seq,
					    memory_order_relaxed);
	/* Both belong to gen if gen is still the slot's. */
	if (atomic_load_explicit(&r->gen, memory_order_acquire) != gen)
		return PCOR_ERR_BADHANDLE;
	const uint32_t armed = seq | PCORI_INBOX_ARMED;
	for (unsigned i = 1;; i++) {
		uint32_t v = atomic_load_explicit(&b->word,
						  memory_order_acquire) &
			     ~PCORI_WAIT_SLEEPER;
		if (v == (seq | PCORI_INBOX_FILLED)) {
			pcori_inbox_harvest(b, v, r);
			return PCOR_OK;
		}
		if (v == (seq | PCORI_INBOX_BUSY)) {
			/* A sender is writing it: a few stores away. */
			pcori_cpu_relax();
			if ((i & 1023) == 0)
				sched_yield();
			continue;
		}
		if (v != armed)
			return PCOR_OK;
		if (!block)
			return PCOR_INPROGRESS;
		int64_t left;
		if (pcori_wait_left(deadline, &left))
			return PCOR_ERR_TIMEDOUT;
		int rc = pcori_wait_word(&b->word, armed, pcori_rt.cfg.spin_ns,
					 left);
		if (rc)
			return rc;
	}
}

const pcori_drive_ops_t *_Atomic pcori_drive;

/* Is r (allocated with generation gen) still in progress? */
static inline bool req_pending(pcori_req_t *r, uint32_t gen)
{
	return atomic_load_explicit(&r->state, memory_order_acquire) ==
	       pending_of(gen);
}

/*
 * Sleep on r's word while it holds pending (spinning spin_ns first), up
 * to timeout_ns (< 0: no limit).  The completer's side of the counted
 * sleep is pcori_req_complete_nowake.
 */
static int req_sleep(pcori_req_t *r, uint32_t pending, int64_t spin_ns,
		     int64_t timeout_ns)
{
	uint64_t deadline;
	if (pcori_spin_word(&r->state, pending, spin_ns, timeout_ns, &deadline))
		return PCOR_OK;
	for (;;) {
		int64_t left;
		int rc = pcori_wait_left(deadline, &left);
		if (!rc)
			pcori_sleep_counted(&r->sleepers, &r->state, pending,
					    left);
		if (atomic_load_explicit(&r->state, memory_order_acquire) !=
		    pending)
			return PCOR_OK;
		if (rc)
			return rc;
	}
}

/*
 * Spin-wait for r while polling the fabric, for up to spin_ns.  The clock
 * is first read after DRIVE_CLOCK_POLLS polls: a ping-pong's answer
 * usually comes within them, and a clock read costs as much as a poll.
 * Returns that first reading (0: the wait ended before it); a wait that
 * ends here is timed by the clock's readings in the loop
 * (pcori_wait_took), as one more on the way back to the caller would
 * delay its answer.
 */
#define DRIVE_CLOCK_POLLS 16u
static uint64_t drive_until(pcori_req_t *r, uint32_t gen,
			    const pcori_drive_ops_t *d, int64_t spin_ns,
			    uint64_t deadline)
{
	uint64_t now = 0, end = 0, yield_at = 0, start = 0;
	d->begin(r);
	for (unsigned i = 1; req_pending(r, gen); i++) {
		d->poll(r);
		if ((i % DRIVE_CLOCK_POLLS) == 0) {
			now = pcori_now_ns();
			if (i == DRIVE_CLOCK_POLLS) {
				start = now;
				end = spin_ns > 0 ? now + (uint64_t)spin_ns
						  : now;
				if (end > deadline)
					end = deadline;
				yield_at = now + DRIVE_YIELD_NS;
			}
			if (now >= end)
				break;
			/*
			 * The peer may be runnable on this very CPU (processes
			 * are not pinned): let it run now rather than after our
			 * whole spin window, every hop.
			 */
			if (now >= yield_at) {
				sched_yield();
				yield_at = now + DRIVE_YIELD_NS;
			}
		}
	}
	d->end(now);
	if (!req_pending(r, gen))
		pcori_wait_took(start ? now - start : 0);
	return start;
}

/* Shared by pcor_handle_test and pcor_handle_wait. */
static int handle_wait(pcor_handle_t h, bool block, int64_t timeout_ns)
{
	int rc = pcori_rt_check();
	if (PCORI_UNLIKELY(rc))
		return rc;
	if (pcori_req_is_token(h))
		return pcori_req_token_test(h, true);
	uint32_t gen;
	pcori_req_t *r = pcori_req_lookup(h, &gen);
	if (PCORI_UNLIKELY(!r))
		return PCOR_ERR_BADHANDLE;
	uint64_t deadline = UINT64_MAX;
	if (block && timeout_ns >= 0)
		deadline = pcori_now_ns() + (uint64_t)timeout_ns;
	if (__atomic_load_n(&r->flags, __ATOMIC_RELAXED) & PCORI_REQF_INBOX) {
		rc = inbox_wait(r, gen, block, deadline);
		if (rc)
			return rc;
	}
	if (req_pending(r, gen)) {
		const pcori_drive_ops_t *d = NULL;
		if (__atomic_load_n(&r->flags, __ATOMIC_RELAXED) &
		    PCORI_REQF_REMOTE)
			d = atomic_load_explicit(&pcori_drive,
						 memory_order_acquire);
		if (!block) {
			if (d)
				d->poll(r);
			if (req_pending(r, gen))
				return PCOR_INPROGRESS;
			goto done;
		}
		int64_t spin = pcori_rt.cfg.spin_ns;
		uint64_t start = 0;
		bool slept = false;
		/* Poll the fabric while spinning, then sleep where it arrives. */
		if (d) {
			start = drive_until(r, gen, d, pcori_wait_spin(),
					    deadline);
			PCORI_HOP(PCORI_HOP_LEFT);
			slept = start && req_pending(r, gen);
			spin = 0;
		}
		while (d && req_pending(r, gen) &&
		       d->sleep(r, pending_of(gen), deadline))
			;
		if (req_pending(r, gen)) {
			int64_t left = -1;
			if (deadline != UINT64_MAX) {
				uint64_t now = pcori_now_ns();
				left = now >= deadline ? 0
						       : (int64_t)(deadline - now);
			}
			if (d)
				d->word_sleep(1);
			rc = req_sleep(r, pending_of(gen), spin, left);
			if (d)
				d->word_sleep(-1);
			if (rc)
				return rc;
		}
		/* One that slept: a clock read now costs nothing. */
		if (d && slept)
			pcori_wait_took(pcori_now_ns() - start);
		/*
		 * The completer is done with the line we just read shared, and
		 * our next request reuses this slot (LIFO): ask for it
		 * exclusively now, while the release and the return run.
		 */
		pcori_prefetchw(r);
	}
done:;
	int status;
	if (!release(r, gen, &status))
		return PCOR_ERR_BADHANDLE; /* another thread took it first */
	PCORI_HOP(PCORI_HOP_RETURNED);
	return status;
}

PCOR_API int pcor_handle_test(pcor_handle_t h, int mode)
{
	if (PCORI_UNLIKELY(mode != PCOR_BLOCK && mode != PCOR_NONBLOCK)) {
		int rc = pcori_rt_check();
		return rc ? rc : PCOR_ERR_INVAL;
	}
	return handle_wait(h, mode == PCOR_BLOCK, -1);
}

PCOR_API int pcor_handle_wait(pcor_handle_t h, int64_t timeout_ns)
{
	return handle_wait(h, true, timeout_ns < 0 ? -1 : timeout_ns);
}
