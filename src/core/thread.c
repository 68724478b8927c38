/*
 * thread.c -- the thread registry: thread ids, pcor_thread_create/join,
 * attach/detach.
 *
 * Design notes: a thread id is a slot index.  It is taken (lowest free
 * first, so ids stay small) when a thread is created or attaches, and given
 * back when an attached thread detaches or a created thread is joined.
 * Messages addressed to an id belong to the id, not to the thread: a
 * message for an id not in use waits as unexpected for its next owner.
 */
#include "core.h"

#include <errno.h>

enum slot_state {
	SLOT_FREE = 0,
	SLOT_RUNNING, /* reserved by create, or attached */
	SLOT_EXITED,  /* created thread returned; waits for its join */
};

typedef struct tslot {
	_Atomic int state;
	bool created;            /* by pcor_thread_create: joinable */
	bool autofree;           /* not joinable: id freed when fn returns */
	_Atomic bool join_taken; /* a join has claimed this slot */
	pthread_t pt;
	pcor_thread_fn fn;
	void *arg;
	void *ret;
} tslot_t;

static struct {
	pcori_lock_t lock; /* guards slot allocation, nattached */
	tslot_t *slots;
	int max;
	int nattached; /* threads with a thid, including reserved ones */
	_Atomic int nauto; /* threads pcor started for peers, still running */
	pthread_key_t key;
	bool key_ok;
	pcori_thread_hook_fn on_detach;
} reg;

/* Take the lowest free id.  Lock held. */
static int take_id(bool created)
{
	PCORI_ASSERT_LOCKED(&reg.lock);
	for (int i = 0; i < reg.max; i++) {
		tslot_t *s = &reg.slots[i];
		if (atomic_load_explicit(&s->state, memory_order_relaxed) ==
		    SLOT_FREE) {
			s->created = created;
			atomic_store_explicit(&s->join_taken, false,
					      memory_order_relaxed);
			s->ret = NULL;
			atomic_store_explicit(&s->state, SLOT_RUNNING,
					      memory_order_relaxed);
			reg.nattached++;
			return i;
		}
	}
	return -1;
}

static void key_destructor(void *v);

int pcori_threads_init(int max_threads, pcori_thread_hook_fn on_detach)
{
	memset(&reg, 0, sizeof(reg));
	pcori_lock_init(&reg.lock);
	reg.slots = calloc((size_t)max_threads, sizeof(tslot_t));
	if (!reg.slots)
		return PCOR_ERR_NOMEM;
	reg.max = max_threads;
	reg.on_detach = on_detach;
	if (pthread_key_create(&reg.key, key_destructor) != 0) {
		free(reg.slots);
		return PCOR_ERR_SYSTEM;
	}
	reg.key_ok = true;
	return PCOR_OK;
}

void pcori_threads_fini(void)
{
	if (reg.key_ok)
		pthread_key_delete(reg.key);
	free(reg.slots);
	memset(&reg, 0, sizeof(reg));
}

void pcori_threads_wait_spawned(uint64_t timeout_ns)
{
	uint64_t end = pcori_now_ns() + timeout_ns;
	while (atomic_load(&reg.nauto) > 0 && pcori_now_ns() < end) {
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
}

int pcori_threads_others(void)
{
	pcori_lock(&reg.lock);
	int n = reg.nattached - (pcori_self_thid() >= 0 ? 1 : 0);
	pcori_unlock(&reg.lock);
	return n;
}

static void become(int thid)
{
	pcori_tls.thid_plus1 = thid + 1;
	pcori_tls.ncache = 0;
}

int pcori_thread_register_self(int *thid_p)
{
	if (pcori_self_thid() >= 0)
		return PCOR_ERR_BUSY;
	pcori_lock(&reg.lock);
	int thid = take_id(false);
	pcori_unlock(&reg.lock);
	if (thid < 0)
		return PCOR_ERR_TOOMANY;
	become(thid);
	*thid_p = thid;
	return PCOR_OK;
}

/*
 * Undo what makes the calling thread a pcor thread.  Created threads keep
 * their slot until joined; attached ones free it now.
 */
static void detach_self(void)
{
	int thid = pcori_self_thid();
	PCORI_ASSERT(thid >= 0);
	if (reg.on_detach)
		reg.on_detach(thid);
	pcori_htable_flush_tls();
	if (reg.key_ok)
		pthread_setspecific(reg.key, NULL);
	pcori_tls.thid_plus1 = 0;
	tslot_t *s = &reg.slots[thid];
	pcori_lock(&reg.lock);
	reg.nattached--;
	if (!s->created)
		atomic_store_explicit(&s->state, SLOT_FREE,
				      memory_order_release);
	pcori_unlock(&reg.lock);
}

/* An attached thread that exits without detaching is detached here. */
static void key_destructor(void *v)
{
	(void)v;
	if (pcori_rt_check() == PCOR_OK && pcori_self_thid() >= 0)
		detach_self();
}

static void *trampoline(void *p)
{
	tslot_t *s = p;
	int thid = (int)(s - reg.slots);
	become(thid);
	void *ret = s->fn(s->arg);
	/* Still ours unless the thread detached itself. */
	if (pcori_self_thid() == thid) {
		pcori_htable_flush_tls();
		if (reg.on_detach)
			reg.on_detach(thid);
		pcori_tls.thid_plus1 = 0;
		pcori_lock(&reg.lock);
		reg.nattached--;
		pcori_unlock(&reg.lock);
	}
	s->ret = ret;
	if (s->autofree) {
		atomic_fetch_sub(&reg.nauto, 1);
		pcori_lock(&reg.lock);
		s->created = false;
		s->autofree = false;
		atomic_store_explicit(&s->state, SLOT_FREE,
				      memory_order_release);
		pcori_unlock(&reg.lock);
	} else {
		atomic_store_explicit(&s->state, SLOT_EXITED,
				      memory_order_release);
	}
	return ret;
}

int pcori_thread_start(pcor_thread_fn fn, void *arg, bool autofree,
		       int *thid_p)
{
	pcori_lock(&reg.lock);
	int thid = take_id(true);
	if (thid >= 0)
		reg.slots[thid].autofree = autofree;
	pcori_unlock(&reg.lock);
	if (thid < 0)
		return PCOR_ERR_TOOMANY;
	if (autofree)
		atomic_fetch_add(&reg.nauto, 1);
	tslot_t *s = &reg.slots[thid];
	s->fn = fn;
	s->arg = arg;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (autofree)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int err = pthread_create(&s->pt, &attr, trampoline, s);
	pthread_attr_destroy(&attr);
	if (err) {
		PCORI_WARN(PCORI_SUB_CORE, "thread create: pthread_create: %s",
			   strerror(err));
		if (autofree)
			atomic_fetch_sub(&reg.nauto, 1);
		pcori_lock(&reg.lock);
		reg.nattached--;
		s->created = false;
		atomic_store_explicit(&s->state, SLOT_FREE,
				      memory_order_release);
		pcori_unlock(&reg.lock);
		return PCOR_ERR_SYSTEM;
	}
	*thid_p = thid;
	return PCOR_OK;
}

PCOR_API int pcor_thread_create(pcor_thread_fn fn, void *arg, int *thid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!fn || !thid_p)
		return PCOR_ERR_INVAL;
	return pcori_thread_start(fn, arg, false, thid_p);
}

PCOR_API int pcor_thread_join(int thid, void **ret_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (thid < 0 || thid >= reg.max)
		return PCOR_ERR_BADTHID;
	if (thid == pcori_self_thid())
		return PCOR_ERR_INVAL;
	tslot_t *s = &reg.slots[thid];
	pcori_lock(&reg.lock);
	bool ok = s->created && !s->autofree &&
		  atomic_load_explicit(&s->state, memory_order_relaxed) !=
			  SLOT_FREE &&
		  !atomic_exchange_explicit(&s->join_taken, true,
					    memory_order_relaxed);
	pcori_unlock(&reg.lock);
	if (!ok)
		return PCOR_ERR_BADTHID;
	pthread_join(s->pt, NULL);
	if (ret_p)
		*ret_p = s->ret;
	pcori_lock(&reg.lock);
	s->created = false;
	atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
	pcori_unlock(&reg.lock);
	return PCOR_OK;
}

PCOR_API int pcor_thread_attach(int *thid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!thid_p)
		return PCOR_ERR_INVAL;
	int thid;
	rc = pcori_thread_register_self(&thid);
	if (rc)
		return rc;
	/* Non-NULL value so the destructor runs at thread exit. */
	pthread_setspecific(reg.key, (void *)(intptr_t)(thid + 1));
	*thid_p = thid;
	return PCOR_OK;
}

PCOR_API int pcor_thread_detach(void)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (pcori_self_thid() < 0)
		return PCOR_ERR_NOTATTACHED;
	detach_self();
	return PCOR_OK;
}
