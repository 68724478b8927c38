/*
 * dir.c -- the naming module's lifecycle and the client side of the
 * directory: the membership view, the entry cache, internal hooks and
 * the user's membership events.
 */
#include "naming_priv.h"

#include <sodium.h>
#include <unistd.h>

#define NM pcori_nm

uint64_t pcori_hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t pcori_hash_pid(int pid)
{
	uint64_t x = (uint64_t)(uint32_t)pid + 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void pcori_dir_grow_nprocs(int pid)
{
	/* Monotonic: pids are never reused, so nprocs only grows. */
	int cur = atomic_load(&pcori_rt.nprocs);
	while (pid >= cur &&
	       !atomic_compare_exchange_weak(&pcori_rt.nprocs, &cur, pid + 1))
		;
}

/* ------------------------------------------------------------- events */

static void *event_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&NM.evlock);
	while (!NM.evstop) {
		if (pcori_list_empty(&NM.evq)) {
			pthread_cond_wait(&NM.evcond, &NM.evlock);
			continue;
		}
		pcori_evt_t *e =
			PCORI_CONTAINER_OF(NM.evq.next, pcori_evt_t, link);
		pcori_list_remove(&e->link);
		pcor_member_fn fn = NM.user_fn;
		void *ctx = NM.user_ctx;
		pthread_mutex_unlock(&NM.evlock);
		if (fn)
			fn(e->pid, (pcor_member_event_t)e->ev, ctx);
		free(e);
		pthread_mutex_lock(&NM.evlock);
	}
	pthread_mutex_unlock(&NM.evlock);
	return NULL;
}

void pcori_dir_event(int pid, int ev)
{
	pcori_lock(&NM.lock);
	pcori_view_t *e;
	HASH_FIND_INT(NM.view, &pid, e);
	if (e) {
		e->state = ev == PCORI_EV_STARTUP ? PCORI_MEMBER_ALIVE
			   : ev == PCORI_EV_EXIT  ? PCORI_MEMBER_EXITED
						  : PCORI_MEMBER_FAILED;
		e->member.state = e->state;
	}
	int n = NM.nhooks;
	pcori_member_hook_fn fns[PCORI_MAX_HOOKS];
	void *ctxs[PCORI_MAX_HOOKS];
	for (int i = 0; i < n; i++) {
		fns[i] = NM.hooks[i].fn;
		ctxs[i] = NM.hooks[i].ctx;
	}
	pcori_unlock(&NM.lock);
	for (int i = 0; i < n; i++)
		fns[i](pid, (pcori_member_event_t)ev, ctxs[i]);

	pthread_mutex_lock(&NM.evlock);
	if (NM.user_fn) {
		pcori_evt_t *x = malloc(sizeof(*x));
		if (x) {
			x->pid = pid;
			x->ev = ev;
			pcori_list_push_back(&NM.evq, &x->link);
			pthread_cond_signal(&NM.evcond);
		} else {
			PCORI_WARN(PCORI_SUB_NAMING,
				   "event for process %d dropped: no memory",
				   pid);
		}
	}
	pthread_mutex_unlock(&NM.evlock);
}

int pcori_dir_hook_add(pcori_member_hook_fn fn, void *ctx)
{
	if (!fn)
		return PCOR_ERR_INVAL;
	pcori_lock(&NM.lock);
	int rc = PCOR_ERR_NOMEM;
	if (NM.nhooks < PCORI_MAX_HOOKS) {
		NM.hooks[NM.nhooks].fn = fn;
		NM.hooks[NM.nhooks].ctx = ctx;
		NM.nhooks++;
		rc = PCOR_OK;
	}
	pcori_unlock(&NM.lock);
	return rc;
}

int pcori_dir_callback_set(pcor_member_fn fn, void *ctx)
{
	pthread_mutex_lock(&NM.evlock);
	NM.user_fn = fn;
	NM.user_ctx = ctx;
	int rc = PCOR_OK;
	if (fn && !NM.evthread_started) {
		if (pthread_create(&NM.evthread, NULL, event_main, NULL))
			rc = PCOR_ERR_SYSTEM;
		else
			NM.evthread_started = true;
	}
	if (!fn) {
		pcori_list_t *pos, *tmp;
		pcori_list_foreach_safe(pos, tmp, &NM.evq)
		{
			pcori_list_remove(pos);
			free(PCORI_CONTAINER_OF(pos, pcori_evt_t, link));
		}
	}
	pthread_mutex_unlock(&NM.evlock);
	return rc;
}

static void events_stop(void)
{
	pthread_mutex_lock(&NM.evlock);
	NM.evstop = true;
	NM.user_fn = NULL;
	pthread_cond_signal(&NM.evcond);
	bool started = NM.evthread_started;
	pthread_mutex_unlock(&NM.evlock);
	if (started)
		pthread_join(NM.evthread, NULL);
	pcori_list_t *pos, *tmp;
	pcori_list_foreach_safe(pos, tmp, &NM.evq)
	{
		pcori_list_remove(pos);
		free(PCORI_CONTAINER_OF(pos, pcori_evt_t, link));
	}
	pthread_mutex_destroy(&NM.evlock);
	pthread_cond_destroy(&NM.evcond);
}

/* ---------------------------------------------------------- lifecycle */

int pcori_naming_init(const pcori_config_t *cfg, pcori_boot_t *boot_p)
{
	if (!cfg || !boot_p)
		return PCOR_ERR_INVAL;
	memset(&NM, 0, sizeof(NM));
	pcori_lock_init(&NM.lock);
	pcori_lock_init(&NM.qlock);
	pcori_list_init(&NM.reqq);
	pcori_list_init(&NM.evq);
	pcori_list_init(&NM.conns);
	pcori_list_init(&NM.waiting);
	pcori_list_init(&NM.hwaits);
	pthread_mutex_init(&NM.evlock, NULL);
	pthread_cond_init(&NM.evcond, NULL);
	NM.listen_fd = NM.efd = NM.epfd = -1;
	NM.self.pid = -1;
	NM.join_timeout_ms = cfg->join_timeout_ms;
	NM.req_timeout_ms = cfg->naming_timeout_ms;
	NM.auth_timeout_ms = cfg->auth_timeout_ms;
	NM.peer_timeout_ms = cfg->peer_timeout_ms;
	pcori_sock_set_user_timeout(cfg->peer_timeout_ms);
	NM.fault_connect_pct = cfg->fault_connect_pct;
	NM.fault_connect_to = cfg->fault_connect_to;
	NM.unauth_max = (int)cfg->unauth_max;
	NM.unauth_per_addr = (int)cfg->unauth_per_addr;

	pcori_boot_out_t bo;
	int rc = pcori_boot_run(cfg, &NM.boot, &bo);
	if (rc) {
		events_stop();
		return rc;
	}
	NM.mode = bo.mode;
	snprintf(NM.agent, sizeof(NM.agent), "%s", bo.agent);
	pcori_os_proc_self(&NM.self_proc);
	atomic_store(&pcori_rt.nprocs, NM.boot.nprocs);
	pcori_dir_grow_nprocs(NM.boot.pid);
	rc = pcori_agent_start(&bo);
	free(bo.table);
	if (rc) {
		pcori_naming_fini();
		return rc;
	}
	PCORI_INFO(PCORI_SUB_NAMING,
		   "agent: pid %d of %d, listening on %s (%s), host %s",
		   NM.boot.pid, NM.boot.nprocs, NM.agent,
		   NM.mode == PCORI_BOOT_PCORRUN ? "pcorrun"
		   : NM.mode == PCORI_BOOT_PMIX  ? "PMIx"
						 : "alone",
		   NM.boot.host);
	*boot_p = NM.boot;
	return PCOR_OK;
}

int pcori_naming_join(const pcori_member_t *self)
{
	if (!self || self->nports < 0 || self->nports > PCORI_MAX_PORTS)
		return PCOR_ERR_INVAL;
	pcori_lock(&NM.lock);
	NM.self = *self;
	NM.self.pid = NM.boot.pid;
	NM.self.state = PCORI_MEMBER_ALIVE;
	if (!NM.self.host[0])
		snprintf(NM.self.host, sizeof(NM.self.host), "%s",
			 NM.boot.host);
	pcori_unlock(&NM.lock);
	pcori_dreq_t r = {.op = PCORI_OP_JOIN};
	int rc = pcori_agent_call(&r);
	if (rc)
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "join: pid %d could not join the application: %s",
			    NM.boot.pid, pcor_strerror(rc));
	return rc;
}

void pcori_naming_fini(void)
{
	pcori_agent_stop();
	events_stop();
	pcori_boot_fini(NM.mode);
	/* Dispatchers may still look members up until the ports close. */
	pcori_lock(&NM.lock);
	pcori_view_t *e, *t;
	HASH_ITER(hh, NM.view, e, t)
	{
		HASH_DEL(NM.view, e);
		pcori_wbuf_free(&e->backlog);
		free(e);
	}
	pcori_unlock(&NM.lock);
	sodium_memzero(NM.boot.key, sizeof(NM.boot.key));
}

/* ------------------------------------------------------------- lookups */

int pcori_dir_lookup(int pid, pcori_member_t *m_p)
{
	if (!m_p)
		return PCOR_ERR_INVAL;
	if (pid < 0)
		return PCOR_ERR_NOPEER;
	pcori_lock(&NM.lock);
	pcori_view_t *e;
	HASH_FIND_INT(NM.view, &pid, e);
	int rc = PCOR_ERR_NOPEER;
	if (pid == NM.boot.pid && NM.self.pid == pid) {
		*m_p = NM.self;
		rc = PCOR_OK;
	} else if (!e) {
		rc = PCOR_ERR_NOPEER;
	} else if (e->state == PCORI_MEMBER_EXITED ||
		   e->state == PCORI_MEMBER_FAILED) {
		if (e->cached) {
			*m_p = e->member;
		} else {
			memset(m_p, 0, sizeof(*m_p));
			m_p->pid = pid;
		}
		m_p->state = e->state;
		rc = PCOR_ERR_PEER_LOST;
	} else if (e->state == PCORI_VIEW_JOINING) {
		rc = PCOR_ERR_NOPEER; /* not a member until it is registered */
	} else if (e->cached) {
		*m_p = e->member;
		rc = PCOR_OK;
	} else {
		rc = PCOR_INPROGRESS;
	}
	pcori_unlock(&NM.lock);
	if (rc != PCOR_INPROGRESS)
		return rc;
	/* The agent cannot wait for itself: hooks see the cache only. */
	if (NM.thread_started && pthread_equal(pthread_self(), NM.thread))
		return PCOR_ERR_AGAIN;
	pcori_member_t m;
	pcori_dreq_t r = {.op = PCORI_OP_MLOOKUP, .pid = pid, .out_member = &m};
	rc = pcori_agent_call(&r);
	if (rc == PCOR_OK) {
		*m_p = m;
		return PCOR_OK;
	}
	/* It may have died while we asked. */
	pcori_lock(&NM.lock);
	HASH_FIND_INT(NM.view, &pid, e);
	if (e && (e->state == PCORI_MEMBER_EXITED ||
		  e->state == PCORI_MEMBER_FAILED)) {
		memset(m_p, 0, sizeof(*m_p));
		m_p->pid = pid;
		m_p->state = e->state;
		rc = PCOR_ERR_PEER_LOST;
	}
	pcori_unlock(&NM.lock);
	return rc;
}

/* View state and agent address of pid; PCOR_ERR_NOPEER if unknown. */
int pcori_dir_view(int pid, int *state_p, char *agent, size_t len)
{
	pcori_lock(&NM.lock);
	pcori_view_t *e;
	HASH_FIND_INT(NM.view, &pid, e);
	if (e) {
		*state_p = e->state;
		snprintf(agent, len, "%s", e->agent);
	}
	pcori_unlock(&NM.lock);
	return e ? PCOR_OK : PCOR_ERR_NOPEER;
}

void pcori_dir_cache_flush(void)
{
	pcori_lock(&NM.lock);
	for (pcori_view_t *e = NM.view; e; e = e->hh.next)
		e->cached = false;
	pcori_unlock(&NM.lock);
}

void pcori_naming_stats(uint64_t *auth_fail, uint64_t *proto_fail,
			uint64_t *accepted)
{
	*auth_fail = atomic_load(&NM.n_auth_fail);
	*proto_fail = atomic_load(&NM.n_proto_fail);
	*accepted = atomic_load(&NM.n_accepted);
}
