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
	void **orphans;       /* receive buffers a timed-out receive holds */
	int norphans, corphans;
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

static void orphan(cloader_t *c, void *buf)
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
	c->orphans[c->norphans++] = buf;
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

/* Ask daemon k for part p; on success the pixels are in the output. */
static int ask(cjob_t *j, int k, const mv_part_t *p, char *why, size_t wl)
{
	cloader_t *c = j->c;
	const mv_view_t *v = j->v;
	mv_req_t rq = { MV_MAGIC, MV_VERSION, atomic_fetch_add(&c->next_id, 1),
			p->tx, p->ty, p->ox, p->oy, p->ow, p->oh, v->s };
	size_t cap = sizeof(mv_rep_t) + (size_t)p->ow * p->oh * 3;
	int64_t tmo = (int64_t)c->timeout_ms * 1000000;
	void *buf = NULL;
	pcor_msginfo_t mi;
	pcor_handle_t rh, sh;
	int rc;
	if (!c->recv_dma && !(buf = malloc(cap)))
		return -ENOMEM;
	/* The receive goes first, so the reply never waits as an
	 * unexpected message. */
	rc = c->recv_dma ?
		pcor_recv_dma(c->pid[k], PCOR_ANY_THID, MV_TAG_REP, &buf, &mi,
			      &rh) :
		pcor_recv_copy(c->pid[k], PCOR_ANY_THID, MV_TAG_REP, buf, cap,
			       &mi, &rh);
	if (rc != PCOR_OK) {
		snprintf(why, wl, "post receive: %s", pcor_strerror(rc));
		free(buf);
		return rc;
	}
	rc = pcor_send_copy(c->pid[k], c->thid[k], MV_TAG_REQ, &rq, sizeof(rq),
			    &sh);
	if (rc == PCOR_OK)
		rc = pcor_handle_wait(sh, tmo);
	if (rc == PCOR_OK) {
		for (;;) {
			rc = pcor_handle_wait(rh, tmo);
			if (rc != PCOR_OK)
				break;
			const mv_rep_t *h = buf;
			if (mi.size >= sizeof(*h) && h->id == rq.id)
				break;
			/* A late answer to an earlier request of this
			 * thread: drop it and wait again. */
			if (c->recv_dma)
				pcor_dma_free(buf);
			buf = c->recv_dma ? NULL : buf;
			rc = c->recv_dma ?
				pcor_recv_dma(c->pid[k], PCOR_ANY_THID,
					      MV_TAG_REP, &buf, &mi, &rh) :
				pcor_recv_copy(c->pid[k], PCOR_ANY_THID,
					       MV_TAG_REP, buf, cap, &mi, &rh);
			if (rc != PCOR_OK)
				break;
		}
	}
	if (rc == PCOR_ERR_TIMEDOUT) {
		/* The receive stays posted: its buffer must outlive it. */
		snprintf(why, wl, "daemon %d: no answer in %d ms", k,
			 c->timeout_ms);
		if (!c->recv_dma)
			orphan(c, buf);
		return rc;
	}
	if (rc != PCOR_OK) {
		snprintf(why, wl, "daemon %d: %s", k, pcor_strerror(rc));
		goto out;
	}
	const mv_rep_t *h = buf;
	if (h->status != 0) {
		rc = h->status;
		snprintf(why, wl, "daemon %d: %s", k, strerror(-rc));
		goto out;
	}
	if (h->ow != p->ow || h->oh != p->oh ||
	    mi.size != sizeof(*h) + (size_t)p->ow * p->oh * 3) {
		rc = -EBADMSG;
		snprintf(why, wl, "daemon %d: reply of the wrong size", k);
		goto out;
	}
	mv_image_t pix = { p->ow, p->oh, (uint8_t *)buf + sizeof(*h) };
	mv_part_place(j->out, v, p, &pix);
	rc = 0;
out:
	if (c->recv_dma)
		pcor_dma_free(buf);
	else
		free(buf);
	return rc;
}

static void *cworker(void *arg)
{
	cjob_t *j = arg;
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
	return NULL;
}

static int cload(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
		 const mv_part_t *parts, int n, mv_image_t *out,
		 mv_result_t *res)
{
	(void)m;
	cloader_t *c = (cloader_t *)l;
	cjob_t j = { .c = c, .v = v, .parts = parts, .res = res, .out = out,
		     .n = n };
	int nt = l->threads > 0 && l->threads < n ? l->threads : n;
	int *thids = calloc((size_t)nt, sizeof(int));
	if (!thids)
		return -ENOMEM;
	int started = 0;
	for (; started < nt; started++)
		if (pcor_thread_create(cworker, &j, &thids[started]) != PCOR_OK)
			break;
	if (started == 0) {
		free(thids);
		return -EAGAIN;
	}
	for (int i = 0; i < started; i++)
		pcor_thread_join(thids[i], NULL);
	free(thids);
	return 0;
}

static void cdestroy(mv_loader_t *l)
{
	cloader_t *c = (cloader_t *)l;
	for (int i = 0; i < c->norphans; i++)
		free(c->orphans[i]);
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
	for (int k = 0; k < MAXD; k++) {
		c->pid[k] = -1;
		atomic_init(&c->down[k], 0);
	}
	return c->l.threads >= 0 ? &c->l : NULL;
}
