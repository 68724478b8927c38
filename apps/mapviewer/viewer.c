/*
 * viewer.c -- imgViewer: plan a view, let a loader fill it, mark what
 * could not be loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mv.h"

void mv_part_place(mv_image_t *out, const mv_view_t *v, const mv_part_t *p,
		   const mv_image_t *pix)
{
	mv_blit(out, pix, p->ox - v->gx, p->oy - v->gy);
}

int mv_render(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
	      mv_image_t *out, mv_part_t **parts_p, mv_result_t **res_p,
	      mv_render_stats_t *st)
{
	double t0 = mv_now_ms();
	mv_part_t *parts;
	int n = mv_view_parts(m, v, &parts);
	if (n < 0)
		return n;
	mv_result_t *res = calloc((size_t)n + 1, sizeof(*res));
	int rc = res ? mv_image_alloc(out, v->ow, v->oh) : -12;
	if (rc) {
		free(parts);
		free(res);
		return rc;
	}
	/* Pixels no part covers (none, by construction) stay black. */
	memset(out->px, 0, (size_t)out->w * out->h * 3);
	rc = l->load(l, m, v, parts, n, out, res);
	memset(st, 0, sizeof(*st));
	st->nparts = n;
	for (int i = 0; i < n; i++) {
		if (res[i].status == 0) {
			st->nreplica += res[i].replica;
			continue;
		}
		st->nfailed++;
		const mv_part_t *p = &parts[i];
		mv_log("tile r%d c%d (%s/tiles/r%03d_c%03d.jpg): %s", p->ty,
		       p->tx, m->dir, p->ty, p->tx,
		       res[i].why[0] ? res[i].why : "failed");
		char lab[32];
		snprintf(lab, sizeof(lab), "R%d C%d", p->ty, p->tx);
		mv_placeholder(out, p->ox - v->gx, p->oy - v->gy, p->ow, p->oh,
			       lab);
	}
	st->ms_total = mv_now_ms() - t0;
	if (parts_p)
		*parts_p = parts;
	else
		free(parts);
	if (res_p)
		*res_p = res;
	else
		free(res);
	return rc;
}
