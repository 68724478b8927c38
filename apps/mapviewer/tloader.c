/*
 * tloader.c -- imgTLoader: threads of this process read, decode and
 * scale the tiles themselves (the paper's single-host loader).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mv.h"

typedef struct tjob {
	const mv_map_t *m;
	const mv_view_t *v;
	const mv_part_t *parts;
	mv_result_t *res;
	mv_image_t *out;
	int n;
	atomic_int next;
} tjob_t;

static void *tworker(void *arg)
{
	tjob_t *j = arg;
	int k;
	while ((k = atomic_fetch_add(&j->next, 1)) < j->n) {
		const mv_part_t *p = &j->parts[k];
		mv_result_t *r = &j->res[k];
		double t0 = mv_now_ms();
		char path[600];
		mv_tile_path(j->m, p->tx, p->ty, path, sizeof(path));
		mv_image_t pix;
		r->daemon = -1;
		r->status = mv_tile_render(path, j->v->s, p, &pix);
		if (r->status) {
			strncpy(r->why, strerror(-r->status), sizeof(r->why) - 1);
			continue;
		}
		mv_part_place(j->out, j->v, p, &pix);
		mv_image_free(&pix);
		r->ms = mv_now_ms() - t0;
	}
	return NULL;
}

static int tload(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
		 const mv_part_t *parts, int n, mv_image_t *out,
		 mv_result_t *res)
{
	tjob_t j = { .m = m, .v = v, .parts = parts, .res = res, .out = out,
		     .n = n };
	int nt = l->threads > 0 && l->threads < n ? l->threads : n;
	pthread_t *th = calloc((size_t)nt, sizeof(*th));
	if (!th)
		return -ENOMEM;
	int started = 0;
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, tworker, &j) != 0)
			break;
	if (started == 0)
		tworker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	return 0;
}

static void tdestroy(mv_loader_t *l)
{
	free(l);
}

mv_loader_t *mv_tloader_create(int threads)
{
	mv_loader_t *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->name = "imgTLoader";
	l->load = tload;
	l->destroy = tdestroy;
	l->threads = threads;
	return l;
}
