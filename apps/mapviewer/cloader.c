/*
 * cloader.c -- imgCLoader: one pcor thread per tile asks the daemon that
 * owns it (the paper's cluster loader).
 *
 * A request that fails -- the daemon died (PCOR_ERR_PEER_LOST) or did not
 * answer within the timeout -- marks that daemon down for the rest of the
 * loader's life and goes to the replica, the next daemon in index order,
 * which holds the same tiles (mapviewer gen --share places each tile on
 * its owner and the owner's successor).  Without a live replica the part
 * becomes a placeholder.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcor/pcor.h>

#include "mv.h"

#define MAXD 64

typedef struct cloader {
	mv_loader_t l;
	int nd, recv_dma, timeout_ms;
	int pid[MAXD], thid[MAXD];
	atomic_int down[MAXD];
	atomic_uint next_id;
	pthread_mutex_t lock; /* guards orphans and pid/thid resolution */
	void **orphans;       /* slots of receives left posted (slot_t) */
	int norphans, corphans;
	/*
	 * The loader threads live as long as the loader, so a render costs
	 * a wake-up per thread, not a thread creation (300 creations cost
	 * more than 300 tiles' messages).  pool_lock guards the fields
	 * below; it is never held with lock.  One render at a time.
	 */
	pthread_mutex_t pool_lock;
	pthread_cond_t go, done;
	int *thids, nthreads, cap_threads, stop;
	unsigned gen, spawn_gen; /* job generation; the one new threads saw */
	struct cjob *job;
	int running;             /* pool threads not yet done with job */
} cloader_t;

typedef struct cjob {
	cloader_t *c;
	const mv_view_t *v;
	const mv_part_t *parts;
	mv_result_t *res;
	mv_image_t *out;
	int n;
	atomic_int next;
} cjob_t;

/*
 * What a posted receive writes into: pcor owns the buffer (recvCopy), the
 * buffer pointer (recvDMA) and the info until the receive completes, so
 * they live on the heap, not in the asking thread's stack frame.
 */
typedef struct slot {
	void *buf;
	pcor_msginfo_t mi;
	int dma;
} slot_t;

static void slot_free(slot_t *sl)
{
	if (sl->dma)
		pcor_dma_free(sl->buf); /* NULL is fine */
	else
		free(sl->buf);
	free(sl);
}

/*
 * A receive still posted when its thread gives up: its slot is kept until
 * the loader ends.  By then the thread has ended, which cancels the
 * receive, so nothing writes into the slot any more.
 */
static void orphan(cloader_t *c, slot_t *sl)
{
	pthread_mutex_lock(&c->lock);
	if (c->norphans == c->corphans) {
		int nc = c->corphans ? 2 * c->corphans : 16;
		void **o = realloc(c->orphans, sizeof(void *) * (size_t)nc);
		if (!o) {
			/* Better a small leak than a write into freed memory. */
			pthread_mutex_unlock(&c->lock);
			return;
		}
		c->orphans = o;
		c->corphans = nc;
	}
	c->orphans[c->norphans++] = sl;
	pthread_mutex_unlock(&c->lock);
}

static int resolve(cloader_t *c, int k)
{
	pthread_mutex_lock(&c->lock);
	int rc = PCOR_OK;
	if (c->pid[k] < 0) {
		char name[32];
		snprintf(name, sizeof(name), "mapd/%d", k);
		/* Daemons publish as they start: wait for a late one. */
		rc = pcor_name_lookup(name, 30 * 1000000000LL, &c->pid[k],
				      &c->thid[k]);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int post(cloader_t *c, int k, slot_t *sl, size_t cap,
		pcor_handle_t *rh)
{
	return sl->dma ? pcor_recv_dma(c->pid[k], PCOR_ANY_THID, MV_TAG_REP,
				       &sl->buf, &sl->mi, rh) :
			 pcor_recv_copy(c->pid[k], PCOR_ANY_THID, MV_TAG_REP,
					sl->buf, cap, &sl->mi, rh);
}

/* Ask daemon k for part p; on success the pixels are in the output. */
static int ask(cjob_t *j, int k, const mv_part_t *p, char *why, size_t wl)
{
	cloader_t *c = j->c;
	const mv_view_t *v = j->v;
	mv_req_t rq = { MV_MAGIC, MV_VERSION, atomic_fetch_add(&c->next_id, 1),
			p->tx, p->ty, p->ox, p->oy, p->ow, p->oh, v->s };
	size_t cap = sizeof(mv_rep_t) + (size_t)p->ow * p->oh * 3;
	int64_t tmo = (int64_t)c->timeout_ms * 1000000;
	pcor_handle_t rh, sh;
	int rc, posted = 0;
	slot_t *sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	sl->dma = c->recv_dma;
	if (!sl->dma && !(sl->buf = malloc(cap))) {
		free(sl);
		return -ENOMEM;
	}
	/* The receive goes first, so the reply never waits as an
	 * unexpected message. */
	rc = post(c, k, sl, cap, &rh);
	if (rc != PCOR_OK) {
		snprintf(why, wl, "post receive: %s", pcor_strerror(rc));
		goto out;
	}
	posted = 1;
	rc = pcor_send_copy(c->pid[k], c->thid[k], MV_TAG_REQ, &rq, sizeof(rq),
			    &sh);
	if (rc == PCOR_OK)
		rc = pcor_handle_wait(sh, tmo);
	while (rc == PCOR_OK) {
		rc = pcor_handle_wait(rh, tmo);
		if (rc == PCOR_ERR_TIMEDOUT)
			break;
		posted = 0; /* completed, whatever its status */
		const mv_rep_t *h = sl->buf;
		if (rc != PCOR_OK ||
		    (sl->mi.size >= sizeof(*h) && h->id == rq.id))
			break;
		/* A late answer to an earlier request of this thread: drop
		 * it and wait again. */
		if (sl->dma) {
			pcor_dma_free(sl->buf);
			sl->buf = NULL;
		}
		rc = post(c, k, sl, cap, &rh);
		if (rc == PCOR_OK)
			posted = 1;
	}
	if (rc != PCOR_OK) {
		if (rc == PCOR_ERR_TIMEDOUT)
			snprintf(why, wl, "daemon %d: no answer in %d ms", k,
				 c->timeout_ms);
		else
			snprintf(why, wl, "daemon %d: %s", k, pcor_strerror(rc));
		goto out;
	}
	const mv_rep_t *h = sl->buf;
	if (h->status != 0) {
		rc = h->status;
		snprintf(why, wl, "daemon %d: %s", k, strerror(-rc));
		goto out;
	}
	if (h->ow != p->ow || h->oh != p->oh ||
	    sl->mi.size != sizeof(*h) + (size_t)p->ow * p->oh * 3) {
		rc = -EBADMSG;
		snprintf(why, wl, "daemon %d: reply of the wrong size", k);
		goto out;
	}
	mv_image_t pix = { p->ow, p->oh, (uint8_t *)sl->buf + sizeof(*h) };
	mv_part_place(j->out, v, p, &pix);
	rc = 0;
out:
	if (posted)
		orphan(c, sl);
	else
		slot_free(sl);
	return rc;
}

static void run_job(cjob_t *j)
{
	cloader_t *c = j->c;
	int i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
		const mv_part_t *p = &j->parts[i];
		mv_result_t *r = &j->res[i];
		int owner = mv_tile_owner(p->tx, p->ty, c->nd);
		int tries = c->nd > 1 ? 2 : 1;
		double t0 = mv_now_ms();
		r->status = -ENODEV;
		snprintf(r->why, sizeof(r->why), "daemon %d down", owner);
		for (int t = 0; t < tries; t++) {
			int k = (owner + t) % c->nd;
			if (atomic_load(&c->down[k]))
				continue;
			int rc = resolve(c, k);
			if (rc == PCOR_OK)
				rc = ask(j, k, p, r->why, sizeof(r->why));
			else
				snprintf(r->why, sizeof(r->why),
					 "daemon %d: lookup: %s", k,
					 pcor_strerror(rc));
			r->status = rc;
			r->daemon = k;
			r->replica = t > 0;
			if (rc == PCOR_OK)
				break;
			/* A daemon that answered with an error (a bad tile)
			 * is alive; only silence or loss marks it down. */
			if (rc == PCOR_ERR_PEER_LOST || rc == PCOR_ERR_TIMEDOUT ||
			    rc == PCOR_ERR_NOPEER || rc == PCOR_ERR_UNREACHABLE) {
				if (!atomic_exchange(&c->down[k], 1))
					mv_log("daemon %d marked down (%s)", k,
					       r->why);
			}
		}
		r->ms = mv_now_ms() - t0;
	}
}

static void *pool_worker(void *arg)
{
	cloader_t *c = arg;
	pthread_mutex_lock(&c->pool_lock);
	unsigned seen = c->spawn_gen;
	for (;;) {
		while (!c->stop && c->gen == seen)
			pthread_cond_wait(&c->go, &c->pool_lock);
		if (c->stop)
			break;
		seen = c->gen;
		cjob_t *j = c->job;
		pthread_mutex_unlock(&c->pool_lock);
		run_job(j);
		pthread_mutex_lock(&c->pool_lock);
		if (--c->running == 0)
			pthread_cond_signal(&c->done);
	}
	pthread_mutex_unlock(&c->pool_lock);
	return NULL;
}

/* Grow the pool to want threads (fewer if pcor has no more ids). */
static void pool_grow(cloader_t *c, int want)
{
	if (want <= c->nthreads)
		return;
	if (want > c->cap_threads) {
		int *t = realloc(c->thids, sizeof(int) * (size_t)want);
		if (!t)
			return;
		c->thids = t;
		c->cap_threads = want;
	}
	pthread_mutex_lock(&c->pool_lock);
	c->spawn_gen = c->gen;
	pthread_mutex_unlock(&c->pool_lock);
	while (c->nthreads < want &&
	       pcor_thread_create(pool_worker, c, &c->thids[c->nthreads]) ==
		       PCOR_OK)
		c->nthreads++;
}

static int cload(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
		 const mv_part_t *parts, int n, mv_image_t *out,
		 mv_result_t *res)
{
	(void)m;
	cloader_t *c = (cloader_t *)l;
	cjob_t j = { .c = c, .v = v, .parts = parts, .res = res, .out = out,
		     .n = n };
	/* One thread per tile (threads 0) or the fixed number asked. */
	pool_grow(c, l->threads > 0 ? l->threads : n);
	if (c->nthreads == 0)
		return -EAGAIN;
	pthread_mutex_lock(&c->pool_lock);
	c->job = &j;
	c->running = c->nthreads;
	c->gen++;
	pthread_cond_broadcast(&c->go);
	while (c->running > 0)
		pthread_cond_wait(&c->done, &c->pool_lock);
	c->job = NULL;
	pthread_mutex_unlock(&c->pool_lock);
	return 0;
}

static void cdestroy(mv_loader_t *l)
{
	cloader_t *c = (cloader_t *)l;
	pthread_mutex_lock(&c->pool_lock);
	c->stop = 1;
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->pool_lock);
	for (int i = 0; i < c->nthreads; i++)
		pcor_thread_join(c->thids[i], NULL);
	free(c->thids);
	pthread_cond_destroy(&c->go);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->pool_lock);
	/* The threads have ended, which canceled any receive still
	 * posted: the orphaned slots are ours again. */
	for (int i = 0; i < c->norphans; i++)
		slot_free(c->orphans[i]);
	free(c->orphans);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

mv_loader_t *mv_cloader_create(int ndaemons, int threads, int recv_dma,
			       int timeout_ms)
{
	if (ndaemons < 1 || ndaemons > MAXD || threads < 0 || timeout_ms < 1)
		return NULL;
	cloader_t *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->l.name = "imgCLoader";
	c->l.load = cload;
	c->l.destroy = cdestroy;
	c->l.threads = threads;
	c->nd = ndaemons;
	c->recv_dma = recv_dma;
	c->timeout_ms = timeout_ms;
	atomic_init(&c->next_id, 1);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->pool_lock, NULL);
	pthread_cond_init(&c->go, NULL);
	pthread_cond_init(&c->done, NULL);
	for (int k = 0; k < MAXD; k++) {
		c->pid[k] = -1;
		atomic_init(&c->down[k], 0);
	}
	return c->l.threads >= 0 ? &c->l : NULL;
}
