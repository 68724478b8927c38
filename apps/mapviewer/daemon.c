/*
 * daemon.c -- imgDaemon: serves tiles over pcor.
 *
 * Design notes.  The calling thread is the daemon's front door: it
 * publishes "mapd/<index>" and receives every request and the QUIT
 * message.  A request goes on a queue that a pool of pcor worker threads
 * drains; a worker reads, decodes and scales the tile and answers the
 * requesting thread directly (a DMA buffer handed over, so a reply to a
 * viewer in the same process moves no bytes).  The front door never
 * decodes, so a slow tile never delays the next request's hand-off.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcor/pcor.h>

#include "mv.h"

#define QCAP 1024

typedef struct qitem {
	mv_req_t req;
	int pid, thid;
} qitem_t;

typedef struct dstate {
	const mv_map_t *m;
	const mv_daemon_opts_t *o;
	pthread_mutex_t lock; /* guards the queue and closed */
	pthread_cond_t cv;
	qitem_t q[QCAP];
	int head, count, closed;
	atomic_int replies;
} dstate_t;

static void reply(dstate_t *d, const qitem_t *it)
{
	if (d->o->mute_after > 0 &&
	    atomic_load(&d->replies) >= d->o->mute_after)
		return; /* tests: alive but silent, as a wedged host would be */
	const mv_req_t *r = &it->req;
	mv_rep_t h = { MV_MAGIC, MV_VERSION, r->id, 0, d->o->index, 0, 0 };
	mv_image_t pix = { 0 };
	int bad = r->magic != MV_MAGIC || r->version != MV_VERSION ||
		  r->tx < 0 || r->ty < 0 || r->tx >= d->m->cols ||
		  r->ty >= d->m->rows || r->ow < 1 || r->oh < 1 ||
		  r->ow > MV_WIN_MAX || r->oh > MV_WIN_MAX ||
		  !(r->s >= MV_SCALE_MIN && r->s <= 1e4);
	if (bad) {
		h.status = -EINVAL;
	} else {
		char path[600];
		mv_part_t p = { r->tx, r->ty, r->ox, r->oy, r->ow, r->oh };
		mv_tile_path(d->m, r->tx, r->ty, path, sizeof(path));
		h.status = mv_tile_render(path, r->s, &p, &pix);
		if (h.status)
			mv_log("daemon %d: tile r%d c%d (%s): %s", d->o->index,
			       r->ty, r->tx, path, strerror(-h.status));
	}
	size_t len = sizeof(h);
	if (!h.status) {
		h.ow = pix.w;
		h.oh = pix.h;
		len += (size_t)pix.w * pix.h * 3;
	}
	void *buf;
	pcor_handle_t sh;
	int rc = pcor_dma_alloc(len, &buf);
	if (rc == PCOR_OK) {
		memcpy(buf, &h, sizeof(h));
		if (!h.status)
			memcpy((char *)buf + sizeof(h), pix.px, len - sizeof(h));
		rc = pcor_send_dma(it->pid, it->thid, MV_TAG_REP, buf, len,
				   PCOR_SEND_HANDOVER, &sh);
		if (rc == PCOR_OK)
			rc = pcor_handle_wait(sh, 30 * 1000000000LL);
		else
			pcor_dma_free(buf);
	}
	if (rc != PCOR_OK)
		mv_log("daemon %d: reply to %d/%d: %s", d->o->index, it->pid,
		       it->thid, pcor_strerror(rc));
	mv_image_free(&pix);
	int n = atomic_fetch_add(&d->replies, 1) + 1;
	if (d->o->die_after > 0 && n >= d->o->die_after) {
		/* Tests: die as a crash would, mid-render, no goodbye. */
		mv_log("daemon %d: dying after %d replies (--die-after)",
		       d->o->index, n);
		_exit(3);
	}
}

static void *dworker(void *arg)
{
	dstate_t *d = arg;
	for (;;) {
		pthread_mutex_lock(&d->lock);
		while (d->count == 0 && !d->closed)
			pthread_cond_wait(&d->cv, &d->lock);
		if (d->count == 0) {
			pthread_mutex_unlock(&d->lock);
			return NULL;
		}
		qitem_t it = d->q[d->head];
		d->head = (d->head + 1) % QCAP;
		d->count--;
		pthread_mutex_unlock(&d->lock);
		reply(d, &it);
	}
}

static void enqueue(dstate_t *d, const qitem_t *it)
{
	pthread_mutex_lock(&d->lock);
	if (d->count < QCAP) {
		d->q[(d->head + d->count) % QCAP] = *it;
		d->count++;
		pthread_cond_signal(&d->cv);
	} else {
		mv_log("daemon %d: queue full, request from %d/%d dropped",
		       d->o->index, it->pid, it->thid);
	}
	pthread_mutex_unlock(&d->lock);
}

/* Set when the viewer (process 0) has left: a daemon in another process
 * then ends even if the QUIT message never comes. */
static atomic_int viewer_gone;

static void on_member(int pid, pcor_member_event_t ev, void *arg)
{
	(void)arg;
	if (pid == 0 && (ev == PCOR_MEMBER_EXIT || ev == PCOR_MEMBER_FAILURE))
		atomic_store(&viewer_gone, 1);
}

int mv_daemon_run(const mv_map_t *m, const mv_daemon_opts_t *o)
{
	if (o->workers < 1 || o->workers > 64 || o->index < 0)
		return PCOR_ERR_INVAL;
	dstate_t *d = calloc(1, sizeof(*d));
	if (!d)
		return PCOR_ERR_NOMEM;
	d->m = m;
	d->o = o;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cv, NULL);
	int thids[64], nw = 0, rc = PCOR_OK;
	for (; nw < o->workers; nw++) {
		rc = pcor_thread_create(dworker, d, &thids[nw]);
		if (rc != PCOR_OK)
			goto stop;
	}
	char name[32];
	snprintf(name, sizeof(name), "mapd/%d", o->index);
	rc = pcor_name_publish(name, pcor_self_pid(), pcor_self_thid());
	if (rc != PCOR_OK) {
		mv_log("daemon %d: publish %s: %s", o->index, name,
		       pcor_strerror(rc));
		goto stop;
	}
	if (pcor_self_pid() > 0)
		pcor_member_callback(on_member, NULL);
	for (;;) {
		/* Static: a receive still posted when the daemon ends (the
		 * viewer gone) keeps its buffer until pcor_finalize.  One
		 * daemon per process. */
		static qitem_t it;
		static pcor_msginfo_t mi;
		pcor_handle_t h;
		rc = pcor_recv_copy(PCOR_ANY_PID, PCOR_ANY_THID, PCOR_ANY_TAG,
				    &it.req, sizeof(it.req), &mi, &h);
		while (rc == PCOR_OK &&
		       (rc = pcor_handle_wait(h, 1000000000LL)) ==
			       PCOR_ERR_TIMEDOUT) {
			if (atomic_load(&viewer_gone))
				break;
			rc = PCOR_OK;
		}
		if (rc == PCOR_ERR_TIMEDOUT) {
			mv_log("daemon %d: the viewer has gone; ending",
			       o->index);
			rc = PCOR_OK;
			break;
		}
		if (rc != PCOR_OK && rc != PCOR_ERR_TRUNCATE) {
			mv_log("daemon %d: receive: %s", o->index,
			       pcor_strerror(rc));
			break;
		}
		if (mi.tag == MV_TAG_QUIT) {
			rc = PCOR_OK;
			break;
		}
		if (mi.tag != MV_TAG_REQ || mi.size != sizeof(it.req)) {
			mv_log("daemon %d: stray message (tag %d, %zu bytes) "
			       "from %d/%d dropped", o->index, mi.tag, mi.size,
			       mi.pid, mi.thid);
			continue;
		}
		it.pid = mi.pid;
		it.thid = mi.thid;
		enqueue(d, &it);
	}
	if (pcor_self_pid() > 0)
		pcor_member_callback(NULL, NULL);
	pcor_name_unpublish(name);
stop:
	pthread_mutex_lock(&d->lock);
	d->closed = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->lock);
	for (int i = 0; i < nw; i++)
		pcor_thread_join(thids[i], NULL);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return rc;
}

void mv_daemons_quit(int ndaemons)
{
	for (int k = 0; k < ndaemons; k++) {
		char name[32];
		int pid, thid;
		snprintf(name, sizeof(name), "mapd/%d", k);
		/* Under pcorrun daemon k is the main thread of process k+1:
		 * that is where QUIT goes if the directory cannot say. */
		if (pcor_name_lookup(name, 0, &pid, &thid) != PCOR_OK) {
			if (pcor_nprocs() <= k + 1)
				continue;
			pid = k + 1;
			thid = 0;
		}
		pcor_proc_info_t pi;
		if (pid != pcor_self_pid() &&
		    pcor_proc_info(pid, &pi) == PCOR_ERR_PEER_LOST)
			continue; /* died: nothing to end */
		pcor_handle_t h;
		char z = 0;
		if (pcor_send_copy(pid, thid, MV_TAG_QUIT, &z, 1, &h) == PCOR_OK)
			pcor_handle_wait(h, 5 * 1000000000LL);
	}
}
