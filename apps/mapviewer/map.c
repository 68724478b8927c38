/*
 * map.c -- the manifest, tile names, placement and view geometry.
 *
 * The manifest (DIR/map.txt) is a few "key value" lines:
 *   pcor-map 1 / tile 640 480 / grid COLS ROWS / seed S
 * Tiles are DIR/tiles/rRRR_cCCC.jpg.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mv.h"

double mv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void mv_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* One write per line so lines of many threads do not mix. */
	fprintf(stderr, "mapviewer: %s\n", buf);
}

int mv_map_open(const char *dir, mv_map_t *m)
{
	memset(m, 0, sizeof(*m));
	if (strlen(dir) >= sizeof(m->dir) - 32)
		return -ENAMETOOLONG;
	strcpy(m->dir, dir);
	char path[600];
	snprintf(path, sizeof(path), "%s/map.txt", dir);
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	char key[32];
	int ver = 0, tw = 0, th = 0;
	unsigned long seed = 0;
	while (fscanf(f, "%31s", key) == 1) {
		int ok = 1;
		if (strcmp(key, "pcor-map") == 0)
			ok = fscanf(f, "%d", &ver) == 1;
		else if (strcmp(key, "tile") == 0)
			ok = fscanf(f, "%d %d", &tw, &th) == 2;
		else if (strcmp(key, "grid") == 0)
			ok = fscanf(f, "%d %d", &m->cols, &m->rows) == 2;
		else if (strcmp(key, "seed") == 0)
			ok = fscanf(f, "%lu", &seed) == 1;
		if (!ok)
			break;
	}
	fclose(f);
	if (ver != 1 || tw != MV_TILE_W || th != MV_TILE_H || m->cols < 1 ||
	    m->rows < 1 || m->cols > 1000 || m->rows > 1000)
		return -EBADMSG;
	m->seed = (uint32_t)seed;
	m->width = m->cols * MV_TILE_W;
	m->height = m->rows * MV_TILE_H;
	return 0;
}

int mv_map_write_manifest(const mv_map_t *m)
{
	char path[600], tmp[620];
	snprintf(path, sizeof(path), "%s/map.txt", m->dir);
	/* Processes making shares of one map each write the (same) manifest:
	 * a temporary name of their own, so one's rename cannot take
	 * another's file away. */
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "pcor-map 1\ntile %d %d\ngrid %d %d\nseed %u\n", MV_TILE_W,
		MV_TILE_H, m->cols, m->rows, m->seed);
	if (fclose(f) != 0)
		return -EIO;
	/* Written last and renamed: a manifest means the tiles are there. */
	return rename(tmp, path) == 0 ? 0 : -errno;
}

void mv_tile_path(const mv_map_t *m, int tx, int ty, char *buf, size_t n)
{
	snprintf(buf, n, "%s/tiles/r%03d_c%03d.jpg", m->dir, ty, tx);
}

int mv_tile_owner(int tx, int ty, int ndaemons)
{
	/* A multiplicative hash spreads neighbouring tiles over daemons, so
	 * any region asks all of them. */
	uint32_t h = (uint32_t)tx * 0x9E3779B1u ^ (uint32_t)ty * 0x85EBCA77u;
	h ^= h >> 15;
	h *= 0x2C1B3C6Du;
	h ^= h >> 12;
	return (int)(h % (uint32_t)ndaemons);
}

/* The first output pixel whose centre lies at or after source a. */
static int first_px(double a, double s)
{
	return (int)ceil(a / s - 0.5 - 1e-9);
}

int mv_view_init(const mv_map_t *m, int x, int y, int w, int h, int ww,
		 int wh, mv_view_t *v, char *err, size_t errlen)
{
	if (ww < 1 || wh < 1 || ww > MV_WIN_MAX || wh > MV_WIN_MAX) {
		snprintf(err, errlen, "window %dx%d outside 1..%d", ww, wh,
			 MV_WIN_MAX);
		return -1;
	}
	if (x < 0 || y < 0 || w < 1 || h < 1 || x > m->width - w ||
	    y > m->height - h) {
		snprintf(err, errlen, "region %d,%d,%d,%d outside the %dx%d map",
			 x, y, w, h, m->width, m->height);
		return -1;
	}
	double s = (double)w / ww;
	if ((double)h / wh > s)
		s = (double)h / wh;
	if (s < MV_SCALE_MIN) {
		snprintf(err, errlen, "zoom beyond %gx", 1 / MV_SCALE_MIN);
		return -1;
	}
	v->x = x;
	v->y = y;
	v->w = w;
	v->h = h;
	v->ww = ww;
	v->wh = wh;
	v->s = s;
	v->gx = first_px(x, s);
	v->gy = first_px(y, s);
	v->ow = first_px(x + w, s) - v->gx;
	v->oh = first_px(y + h, s) - v->gy;
	if (v->ow > ww)
		v->ow = ww;
	if (v->oh > wh)
		v->oh = wh;
	if (v->ow < 1)
		v->ow = 1;
	if (v->oh < 1)
		v->oh = 1;
	return 0;
}

int mv_view_parts(const mv_map_t *m, const mv_view_t *v, mv_part_t **parts_p)
{
	int tx0 = v->x / MV_TILE_W, tx1 = (v->x + v->w - 1) / MV_TILE_W;
	int ty0 = v->y / MV_TILE_H, ty1 = (v->y + v->h - 1) / MV_TILE_H;
	mv_part_t *p = calloc((size_t)(tx1 - tx0 + 1) * (size_t)(ty1 - ty0 + 1),
			      sizeof(*p));
	if (!p)
		return -ENOMEM;
	int n = 0;
	for (int ty = ty0; ty <= ty1 && ty < m->rows; ty++)
		for (int tx = tx0; tx <= tx1 && tx < m->cols; tx++) {
			int a = first_px((double)tx * MV_TILE_W, v->s);
			int b = first_px((double)(tx + 1) * MV_TILE_W, v->s);
			int c = first_px((double)ty * MV_TILE_H, v->s);
			int d = first_px((double)(ty + 1) * MV_TILE_H, v->s);
			if (a < v->gx)
				a = v->gx;
			if (b > v->gx + v->ow)
				b = v->gx + v->ow;
			if (c < v->gy)
				c = v->gy;
			if (d > v->gy + v->oh)
				d = v->gy + v->oh;
			/* At strong reductions a tile may hold no pixel
			 * centre of the view. */
			if (b <= a || d <= c)
				continue;
			p[n++] = (mv_part_t){ tx, ty, a, c, b - a, d - c };
		}
	*parts_p = p;
	return n;
}
