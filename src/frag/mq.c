/*
 * mq.c -- per-destination-thread match queues.
 *
 * Design notes
 *  - Posted receives are searched in post order, unexpected messages in
 *    arrival order; both return the oldest match, which is what keeps
 *    messages from one sender thread to one receiver thread in order
 *    (MPI's non-overtaking rule) with wildcards too.
 *  - Unexpected messages are also indexed by their full key.  Only the
 *    oldest MCB of a key is in the hash; the others hang off it on a
 *    circular chain in arrival order.  When the oldest leaves, the next
 *    one takes its place in the hash (O(1), no rehash of the key).
 *  - The oldest posted receive may sit in the queue's inbox instead of
 *    the posted list (armed: see core.h and local.c); taking a posted
 *    receive looks there first, and the list only holds younger ones.
 *  - A permanent sentinel entry keeps uthash from freeing and remaking
 *    its table each time the queue drains.
 *  - If uthash cannot get memory, the index is dropped and fully
 *    specified receives scan the list until the queue drains: slower,
 *    never wrong.
 */
#include "frag.h"

_Thread_local bool pcori_hash_oom __attribute__((tls_model("initial-exec")));

static void index_reset(pcori_mq_t *mq)
{
	HASH_CLEAR(hh, mq->index);
	memset(&mq->sentinel, 0, sizeof(mq->sentinel));
	mq->sentinel.key.src_pid = INT32_MIN;
	mq->sentinel.key.src_thid = INT32_MIN;
	mq->sentinel.key.dst_thid = mq->thid;
	pcori_hash_oom = false;
	HASH_ADD(hh, mq->index, key, sizeof(pcori_mkey_t), &mq->sentinel);
	mq->index_ok = !pcori_hash_oom;
	if (!mq->index_ok)
		HASH_CLEAR(hh, mq->index);
}

void pcori_mq_init(pcori_mq_t *mq, int thid)
{
	memset(mq, 0, sizeof(*mq));
	pcori_lock_init(&mq->lock);
	mq->thid = thid;
	pcori_list_init(&mq->posted);
	pcori_list_init(&mq->unexp);
	mq->index = NULL;
	index_reset(mq);
}

void pcori_mq_fini(pcori_mq_t *mq)
{
	HASH_CLEAR(hh, mq->index);
	mq->index_ok = false;
}

bool pcori_mq_arm(pcori_mq_t *mq, pcori_req_t *r)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_inbox_t *b = &mq->inbox;
	/* Arming is ours alone (lock held): only the state can change. */
	uint32_t v = atomic_load_explicit(&b->word, memory_order_acquire);
	if (mq->nposted || PCORI_INBOX_STATE(v) != PCORI_INBOX_FREE)
		return false;
	uint32_t seq = (++mq->narmed << 2) & ~PCORI_WAIT_SLEEPER;
	atomic_store_explicit(&b->pid, r->pid, memory_order_relaxed);
	atomic_store_explicit(&b->thid, r->thid, memory_order_relaxed);
	atomic_store_explicit(&b->tag, r->tag, memory_order_relaxed);
	atomic_store_explicit(&b->ctx, r->ctx, memory_order_relaxed);
	atomic_store_explicit(&r->inbox, b, memory_order_relaxed);
	atomic_store_explicit(&r->inbox_seq, seq, memory_order_relaxed);
	pcori_req_flags(r, r->flags | PCORI_REQF_INBOX);
	mq->armed = r;
	atomic_store_explicit(&b->word, seq | PCORI_INBOX_ARMED,
			      memory_order_release);
	return true;
}

/*
 * Lock held.  Take the armed receive out of the inbox if it accepts k
 * (any k if NULL): it then completes through its own word, and its waiter
 * is woken to look there.  NULL if none, or a sender claimed it first.
 */
static pcori_req_t *inbox_take(pcori_mq_t *mq, const pcori_mkey_t *k)
{
	pcori_inbox_t *b = &mq->inbox;
	uint32_t v = atomic_load_explicit(&b->word, memory_order_acquire);
	do {
		if (PCORI_INBOX_STATE(v) != PCORI_INBOX_ARMED ||
		    (k && !pcori_inbox_accepts(b, v, k)))
			return NULL;
	} while (!atomic_compare_exchange_weak_explicit(
		&b->word, &v, PCORI_INBOX_SEQ(v), memory_order_acq_rel,
		memory_order_acquire));
	if (v & PCORI_WAIT_SLEEPER)
		pcori_futex_wake(&b->word, INT_MAX);
	return mq->armed;
}

pcori_req_t *pcori_mq_disarm(pcori_mq_t *mq)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	return inbox_take(mq, NULL);
}

pcori_req_t *pcori_mq_take_posted(pcori_mq_t *mq, const pcori_mkey_t *k)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_list_t *pos;
	pcori_req_t *a = inbox_take(mq, k);
	if (a)
		return a;
	/*
	 * The oldest posted receive is the usual match, and its line was last
	 * written by the thread that posted it: fetch it for writing at once,
	 * since we unlink (and complete) what we take.
	 */
	pcori_prefetchw(mq->posted.next);
	pcori_list_foreach(pos, &mq->posted)
	{
		pcori_req_t *r = PCORI_CONTAINER_OF(pos, pcori_req_t, link);
		if (pcori_mq_accepts(r, k)) {
			pcori_list_remove(pos);
			mq->nposted--;
			return r;
		}
	}
	return NULL;
}

void pcori_mq_post(pcori_mq_t *mq, pcori_req_t *r)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_list_push_back(&mq->posted, &r->link);
	mq->nposted++;
}

bool pcori_mq_unpost(pcori_mq_t *mq, pcori_req_t *r)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_list_t *pos;
	/* mq->armed is the armed receive while the inbox is ARMED. */
	if (mq->armed == r && inbox_take(mq, NULL))
		return true;
	pcori_list_foreach(pos, &mq->posted)
	{
		if (pos == &r->link) {
			pcori_list_remove(pos);
			mq->nposted--;
			return true;
		}
	}
	return false;
}

static void drop_index(pcori_mq_t *mq)
{
	pcori_list_t *pos;
	PCORI_WARN_ONCE(PCORI_SUB_FRAG,
			"mq %d: no memory for the match index; searching "
			"linearly until the queue drains",
			mq->thid);
	HASH_CLEAR(hh, mq->index);
	mq->index_ok = false;
	pcori_list_foreach(pos, &mq->unexp)
	{
		pcori_mcb_t *m = PCORI_CONTAINER_OF(pos, pcori_mcb_t, arrival);
		m->flags &= ~PCORI_MCB_INDEXED;
	}
}

void pcori_mq_add_unexp(pcori_mq_t *mq, pcori_mcb_t *m)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_list_push_back(&mq->unexp, &m->arrival);
	mq->nunexp++;
	pcori_list_init(&m->chain);
	m->flags &= ~PCORI_MCB_INDEXED;
	if (!mq->index_ok)
		return;
	pcori_mcb_hent_t *e;
	HASH_FIND(hh, mq->index, &m->hent.key, sizeof(pcori_mkey_t), e);
	if (e) {
		pcori_mcb_t *oldest = PCORI_CONTAINER_OF(e, pcori_mcb_t, hent);
		pcori_list_push_back(&oldest->chain, &m->chain);
		return;
	}
	pcori_hash_oom = false;
	HASH_ADD(hh, mq->index, key, sizeof(pcori_mkey_t), &m->hent);
	if (pcori_hash_oom)
		drop_index(mq);
	else
		m->flags |= PCORI_MCB_INDEXED;
}

void pcori_mq_remove_unexp(pcori_mq_t *mq, pcori_mcb_t *m)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	pcori_list_remove(&m->arrival);
	mq->nunexp--;
	if (m->flags & PCORI_MCB_INDEXED) {
		pcori_list_t *nx = m->chain.next;
		HASH_DELETE(hh, mq->index, &m->hent);
		m->flags &= ~PCORI_MCB_INDEXED;
		if (nx != &m->chain) {
			pcori_mcb_t *heir = PCORI_CONTAINER_OF(nx, pcori_mcb_t,
							       chain);
			/* Same key, same hash value: no rehash needed. */
			pcori_hash_oom = false;
			HASH_ADD_KEYPTR_BYHASHVALUE(
				hh, mq->index, &heir->hent.key,
				sizeof(pcori_mkey_t), m->hent.hh.hashv,
				&heir->hent);
			if (pcori_hash_oom) {
				pcori_list_remove(&m->chain);
				drop_index(mq);
				return;
			}
			heir->flags |= PCORI_MCB_INDEXED;
		}
	}
	pcori_list_remove(&m->chain);
	if (!mq->index_ok && mq->nunexp == 0)
		index_reset(mq);
}

static bool mcb_accepted(const pcori_req_t *r, const pcori_mcb_t *m)
{
	return pcori_mq_accepts(r, &m->hent.key);
}

pcori_mcb_t *pcori_mq_take_unexp(pcori_mq_t *mq, const pcori_req_t *r)
{
	PCORI_ASSERT_LOCKED(&mq->lock);
	if (mq->nunexp == 0)
		return NULL;
	pcori_mcb_t *found = NULL;
	if (mq->index_ok && r->pid != PCOR_ANY_PID &&
	    r->thid != PCOR_ANY_THID && r->tag != PCOR_ANY_TAG) {
		pcori_mkey_t k = {r->pid, r->thid, mq->thid, r->tag, r->ctx};
		pcori_mcb_hent_t *e;
		HASH_FIND(hh, mq->index, &k, sizeof(k), e);
		if (e && e != &mq->sentinel)
			found = PCORI_CONTAINER_OF(e, pcori_mcb_t, hent);
	} else {
		pcori_list_t *pos;
		pcori_list_foreach(pos, &mq->unexp)
		{
			pcori_mcb_t *m = PCORI_CONTAINER_OF(pos, pcori_mcb_t,
							    arrival);
			if (mcb_accepted(r, m)) {
				found = m;
				break;
			}
		}
	}
	if (found)
		pcori_mq_remove_unexp(mq, found);
	return found;
}
