/*
 * gen.c -- the procedural map generator.
 *
 * Everything is a pure function of whole-map coordinates and the seed
 * (height, colour, grid, labels), so each tile is computed alone, by any
 * thread of any host, and neighbouring tiles join without a seam.  A label
 * near a tile's edge is drawn by every tile it overlaps.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcor/pcor.h>

#include "mv.h"

#define SEA 0.47f
#define GRID 400       /* grid spacing, map pixels */
#define GRID_LABEL 800 /* a coordinate label every this many */

static uint32_t hash3(uint32_t seed, int32_t x, int32_t y, uint32_t o)
{
	uint32_t h = seed ^ (uint32_t)x * 0x27d4eb2du ^ (uint32_t)y * 0x165667b1u ^
		     o * 0x9E3779B9u;
	h ^= h >> 15;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* The gradient at a lattice corner: one of 16 unit directions. */
static float corner(uint32_t seed, int32_t xi, int32_t yi, uint32_t o,
		    float dx, float dy)
{
	static const float dir[16][2] = {
		{ 1.000f, 0.000f },  { 0.924f, 0.383f },  { 0.707f, 0.707f },
		{ 0.383f, 0.924f },  { 0.000f, 1.000f },  { -0.383f, 0.924f },
		{ -0.707f, 0.707f }, { -0.924f, 0.383f }, { -1.000f, 0.000f },
		{ -0.924f, -0.383f }, { -0.707f, -0.707f }, { -0.383f, -0.924f },
		{ 0.000f, -1.000f }, { 0.383f, -0.924f }, { 0.707f, -0.707f },
		{ 0.924f, -0.383f },
	};
	const float *g = dir[hash3(seed, xi, yi, o) >> 28];
	return g[0] * dx + g[1] * dy;
}

/*
 * Gradient noise (value noise shows its square lattice in the hill
 * shading), in about [0, 1]; wavelength in map pixels.
 */
static float vnoise(uint32_t seed, double x, double y, double wl, uint32_t o)
{
	/* Each octave is shifted so the lattices of octaves do not meet. */
	double fx = x / wl + o * 17.31, fy = y / wl + o * 9.73;
	double ix = floor(fx), iy = floor(fy);
	float px = (float)(fx - ix), py = (float)(fy - iy);
	int32_t xi = (int32_t)ix, yi = (int32_t)iy;
	float tx = px * px * px * (px * (px * 6 - 15) + 10);
	float ty = py * py * py * (py * (py * 6 - 15) + 10);
	float a = corner(seed, xi, yi, o, px, py);
	float b = corner(seed, xi + 1, yi, o, px - 1, py);
	float c = corner(seed, xi, yi + 1, o, px, py - 1);
	float d = corner(seed, xi + 1, yi + 1, o, px - 1, py - 1);
	float ab = a + (b - a) * tx, cd = c + (d - c) * tx;
	return 0.5f + 0.8f * (ab + (cd - ab) * ty);
}

/* The coarse octaves (wavelengths 3200 .. 100), in about [0, 1]. */
static float coarse(uint32_t seed, double x, double y)
{
	float sum = 0, amp = 0.5f, norm = 0;
	double wl = 3200;
	for (uint32_t o = 0; o < 6; o++, wl /= 2, amp *= 0.5f) {
		sum += amp * vnoise(seed, x, y, wl, o);
		norm += amp;
	}
	return sum / norm;
}

static float stretch(float h)
{
	/* Sums of octaves crowd around 0.5: spread them over the bands. */
	h = 0.5f + (h - 0.5f) * 2.0f;
	return h < 0 ? 0 : h > 1 ? 1 : h;
}

typedef struct band {
	float h;
	uint8_t r, g, b;
} band_t;

static const band_t bands[] = {
	{ 0.00f, 22, 52, 120 },   { 0.40f, 32, 78, 155 },
	{ 0.465f, 64, 130, 195 }, { 0.47f, 214, 204, 150 },
	{ 0.49f, 110, 170, 80 },  { 0.58f, 60, 130, 55 },
	{ 0.68f, 40, 95, 45 },    { 0.76f, 120, 110, 85 },
	{ 0.85f, 150, 145, 140 }, { 0.89f, 245, 246, 250 },
	{ 1.01f, 255, 255, 255 },
};

static void colour(float h, float *rgb)
{
	size_t i = 1;
	while (i < sizeof(bands) / sizeof(bands[0]) - 1 && h > bands[i].h)
		i++;
	const band_t *a = &bands[i - 1], *b = &bands[i];
	float t = (h - a->h) / (b->h - a->h);
	t = t < 0 ? 0 : t > 1 ? 1 : t;
	rgb[0] = a->r + (b->r - a->r) * t;
	rgb[1] = a->g + (b->g - a->g) * t;
	rgb[2] = a->b + (b->b - a->b) * t;
}

static const char *const syl[] = { "KA", "RO", "MEL", "IN", "TA", "VOR",
				   "EL", "SU", "NA", "DRA", "LIS", "BER",
				   "OS", "TI", "GAN", "MU" };

/* A place name for tile (tx, ty), or 0 when it has none (at sea). */
static int place(const mv_map_t *m, int tx, int ty, char *name, int *x,
		 int *y)
{
	uint32_t h = hash3(m->seed ^ 0xabcdu, tx, ty, 99);
	*x = tx * MV_TILE_W + 40 + (int)(h % 400);
	*y = ty * MV_TILE_H + 40 + (int)((h >> 9) % 360);
	if (stretch(coarse(m->seed, *x, *y)) < SEA + 0.03f)
		return 0;
	int n = 2 + (int)((h >> 20) % 2);
	name[0] = 0;
	for (int i = 0; i < n; i++)
		strcat(name, syl[(h >> (4 * i + 2)) % 16]);
	return 1;
}

static void draw_labels(const mv_map_t *m, int tx, int ty, mv_image_t *im)
{
	int x0 = tx * MV_TILE_W, y0 = ty * MV_TILE_H;
	/* Grid coordinates at every GRID_LABEL crossing near the tile. */
	for (int gy = (y0 - 20) / GRID_LABEL * GRID_LABEL; gy < y0 + im->h;
	     gy += GRID_LABEL)
		for (int gx = (x0 - 120) / GRID_LABEL * GRID_LABEL;
		     gx < x0 + im->w; gx += GRID_LABEL) {
			if (gx < 0 || gy < 0)
				continue;
			char t[32];
			snprintf(t, sizeof(t), "%d,%d", gx, gy);
			mv_text(im, gx - x0 + 4, gy - y0 + 4, 1, t, 255, 255,
				210);
		}
	for (int j = ty - 1; j <= ty + 1; j++)
		for (int i = tx - 1; i <= tx + 1; i++) {
			if (i < 0 || j < 0 || i >= m->cols || j >= m->rows)
				continue;
			char name[16];
			int px, py;
			if (!place(m, i, j, name, &px, &py))
				continue;
			mv_fill(im, px - x0 - 3, py - y0 - 3, 7, 7, 20, 20, 20);
			mv_fill(im, px - x0 - 2, py - y0 - 2, 5, 5, 230, 40, 40);
			mv_text(im, px - x0 + 8, py - y0 - 10, 3, name, 255, 255,
				255);
		}
}

static int gen_tile(const mv_map_t *m, int tx, int ty)
{
	const int w = MV_TILE_W, h = MV_TILE_H;
	int x0 = tx * w, y0 = ty * h, rc;
	/* Coarse octaves every second pixel (bilinear in between), the fine
	 * detail at every pixel: a third of the cost of full resolution. */
	int cw = w / 2 + 2, ch = h / 2 + 2;
	float *c = malloc(sizeof(float) * (size_t)cw * ch);
	float *hm = malloc(sizeof(float) * (size_t)(w + 1) * (h + 1));
	mv_image_t im = { 0 };
	if (!c || !hm || mv_image_alloc(&im, w, h)) {
		rc = -ENOMEM;
		goto out;
	}
	for (int j = 0; j < ch; j++)
		for (int i = 0; i < cw; i++)
			c[j * cw + i] = coarse(m->seed, x0 + 2 * i, y0 + 2 * j);
	for (int j = 0; j <= h; j++)
		for (int i = 0; i <= w; i++) {
			int ci = i / 2, cj = j / 2;
			float fx = (i & 1) * 0.5f, fy = (j & 1) * 0.5f;
			float a = c[cj * cw + ci], b = c[cj * cw + ci + 1];
			float d = c[(cj + 1) * cw + ci], e = c[(cj + 1) * cw + ci + 1];
			float v = (a + (b - a) * fx) * (1 - fy) +
				  (d + (e - d) * fx) * fy;
			v += 0.02f * (vnoise(m->seed, x0 + i, y0 + j, 48, 7) - 0.5f) +
			     0.008f * (vnoise(m->seed, x0 + i, y0 + j, 20, 8) - 0.5f);
			hm[j * (w + 1) + i] = stretch(v);
		}
	const float lx = -0.57f, ly = -0.57f, lz = 0.59f;
	for (int j = 0; j < h; j++)
		for (int i = 0; i < w; i++) {
			float v = hm[j * (w + 1) + i];
			float rgb[3];
			colour(v, rgb);
			if (v > SEA) {
				float dx = (hm[j * (w + 1) + i + 1] - v) * 120;
				float dy = (hm[(j + 1) * (w + 1) + i] - v) * 120;
				float nl = sqrtf(dx * dx + dy * dy + 1);
				float sh = (-dx * lx - dy * ly + lz) / nl;
				float f = 0.35f + 1.1f * sh;
				for (int k = 0; k < 3; k++)
					rgb[k] *= f;
			}
			int gx = (x0 + i) % GRID, gy = (y0 + j) % GRID;
			if (gx == 0 || gy == 0)
				for (int k = 0; k < 3; k++)
					rgb[k] = rgb[k] * 0.55f + 40;
			uint8_t *q = im.px + ((size_t)j * w + i) * 3;
			for (int k = 0; k < 3; k++)
				q[k] = rgb[k] < 0 ? 0 : rgb[k] > 255 ? 255 :
								  (uint8_t)rgb[k];
		}
	draw_labels(m, tx, ty, &im);
	uint8_t *jpg;
	size_t len;
	rc = mv_jpeg_encode(&im, 88, &jpg, &len);
	if (rc)
		goto out;
	char path[600], tmp[620];
	mv_tile_path(m, tx, ty, path, sizeof(path));
	/* Processes making overlapping shares may write the same tile at
	 * once: each writes its own temporary file and renames it. */
	snprintf(tmp, sizeof(tmp), "%s.%d.%lx.tmp", path, (int)getpid(),
		 (unsigned long)pthread_self());
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		rc = -errno;
	} else {
		if (fwrite(jpg, 1, len, f) != len)
			rc = -EIO;
		if (fclose(f) != 0 && !rc)
			rc = -EIO;
		if (!rc && rename(tmp, path) != 0)
			rc = -errno;
	}
	mv_jpeg_buf_free(jpg);
out:
	mv_image_free(&im);
	free(c);
	free(hm);
	return rc;
}

typedef struct gen_job {
	const mv_map_t *m;
	int *todo, ntodo;
	atomic_int next, done, err;
	mv_progress_fn progress;
	pthread_mutex_t lock; /* serialises progress reports */
} gen_job_t;

static void *gen_worker(void *arg)
{
	gen_job_t *j = arg;
	for (;;) {
		int k = atomic_fetch_add(&j->next, 1);
		if (k >= j->ntodo || atomic_load(&j->err))
			break;
		int t = j->todo[k];
		int rc = gen_tile(j->m, t % j->m->cols, t / j->m->cols);
		if (rc) {
			mv_log("gen: tile r%d c%d: %s", t / j->m->cols,
			       t % j->m->cols, strerror(-rc));
			atomic_store(&j->err, rc);
			break;
		}
		int d = atomic_fetch_add(&j->done, 1) + 1;
		if (j->progress) {
			pthread_mutex_lock(&j->lock);
			j->progress(d, j->ntodo);
			pthread_mutex_unlock(&j->lock);
		}
	}
	return NULL;
}

int mv_generate(const mv_map_t *m, int threads, int share, int nshare,
		mv_progress_fn progress)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/tiles", m->dir);
	if ((mkdir(m->dir, 0755) != 0 && errno != EEXIST) ||
	    (mkdir(dir, 0755) != 0 && errno != EEXIST))
		return -errno;
	if (threads < 1 || threads > 256 || nshare < 1 || share < 0 ||
	    share >= nshare)
		return -EINVAL;
	gen_job_t j = { .m = m, .progress = progress };
	pthread_mutex_init(&j.lock, NULL);
	j.todo = malloc(sizeof(int) * (size_t)m->cols * m->rows);
	if (!j.todo)
		return -ENOMEM;
	for (int t = 0; t < m->cols * m->rows; t++) {
		int o = mv_tile_owner(t % m->cols, t / m->cols, nshare);
		if (nshare == 1 || o == share || (o + 1) % nshare == share)
			j.todo[j.ntodo++] = t;
	}
	int thids[256], started = 0, rc = 0;
	for (; started < threads; started++) {
		rc = pcor_thread_create(gen_worker, &j, &thids[started]);
		if (rc != PCOR_OK) {
			mv_log("gen: thread: %s", pcor_strerror(rc));
			atomic_store(&j.err, -EAGAIN);
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pcor_thread_join(thids[i], NULL);
	rc = atomic_load(&j.err);
	free(j.todo);
	pthread_mutex_destroy(&j.lock);
	if (rc == 0)
		rc = mv_map_write_manifest(m);
	return rc;
}
