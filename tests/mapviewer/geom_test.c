/*
 * geom_test -- the map viewer's image code and view geometry, without
 * pcor: the parts of any view cover every output pixel exactly once; the
 * area filter keeps a flat colour flat and averages exactly; a JPEG
 * round trip through DCT-scaled decoding keeps its size; bad views are
 * refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mv.h"

static int fails;
#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);            \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
			fails++;                                               \
		}                                                              \
	} while (0)

static void cover(const mv_map_t *m, int x, int y, int w, int h, int ww,
		  int wh)
{
	mv_view_t v;
	char err[128];
	if (mv_view_init(m, x, y, w, h, ww, wh, &v, err, sizeof(err))) {
		CHECK(0, "view %d,%d,%d,%d in %dx%d refused: %s", x, y, w, h,
		      ww, wh, err);
		return;
	}
	CHECK(v.ow >= 1 && v.ow <= ww && v.oh >= 1 && v.oh <= wh,
	      "output %dx%d for window %dx%d", v.ow, v.oh, ww, wh);
	mv_part_t *p;
	int n = mv_view_parts(m, &v, &p);
	CHECK(n > 0, "no parts");
	unsigned char *hit = calloc((size_t)v.ow * v.oh, 1);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < p[i].oh; j++)
			for (int k = 0; k < p[i].ow; k++) {
				int ox = p[i].ox - v.gx + k, oy = p[i].oy - v.gy + j;
				if (ox < 0 || oy < 0 || ox >= v.ow || oy >= v.oh) {
					CHECK(0, "part %d outside the view", i);
					continue;
				}
				hit[(size_t)oy * v.ow + ox]++;
			}
	int bad = 0;
	for (size_t i = 0; i < (size_t)v.ow * v.oh; i++)
		bad += hit[i] != 1;
	CHECK(bad == 0, "view %d,%d,%d,%d in %dx%d: %d pixels not covered "
	      "exactly once", x, y, w, h, ww, wh, bad);
	free(hit);
	free(p);
}

int main(void)
{
	mv_map_t m = { .cols = 15, .rows = 20, .width = 9600, .height = 9600 };
	/* The paper's regions, odd scales, zoom in, tiny windows, and a
	 * fixed pseudo-random sample of views. */
	for (int s = 1; s <= 16; s++)
		cover(&m, 0, 0, 600 * s > 9600 ? 9600 : 600 * s,
		      600 * s > 9600 ? 9600 : 600 * s, 600, 600);
	cover(&m, 123, 457, 777, 333, 600, 600);
	cover(&m, 9000, 9000, 600, 600, 1200, 1200);
	cover(&m, 0, 0, 9600, 9600, 1, 1);
	cover(&m, 5000, 5000, 37, 37, 592, 592);
	unsigned r = 12345;
	for (int i = 0; i < 300; i++) {
		r = r * 1103515245u + 12345u;
		int w = 16 + (int)(r >> 8) % 9584;
		r = r * 1103515245u + 12345u;
		int h = 16 + (int)(r >> 8) % 9584;
		r = r * 1103515245u + 12345u;
		int x = (int)(r >> 8) % (9600 - w + 1);
		r = r * 1103515245u + 12345u;
		int y = (int)(r >> 8) % (9600 - h + 1);
		r = r * 1103515245u + 12345u;
		int ww = 1 + (int)(r >> 8) % 1000, wh = 1 + (int)(r >> 3) % 1000;
		mv_view_t v;
		char err[128];
		if (mv_view_init(&m, x, y, w, h, ww, wh, &v, err, sizeof(err)))
			continue; /* zoomed in too far: refused, fine */
		cover(&m, x, y, w, h, ww, wh);
	}

	/* Refusals. */
	mv_view_t v;
	char err[128];
	CHECK(mv_view_init(&m, 0, 0, 9601, 10, 600, 600, &v, err, sizeof(err)),
	      "region wider than the map accepted");
	CHECK(mv_view_init(&m, -1, 0, 10, 10, 600, 600, &v, err, sizeof(err)),
	      "negative x accepted");
	CHECK(mv_view_init(&m, 0, 0, 100, 100, 0, 600, &v, err, sizeof(err)),
	      "zero window accepted");
	CHECK(mv_view_init(&m, 0, 0, 100, 100, MV_WIN_MAX + 1, 10, &v, err,
			   sizeof(err)), "huge window accepted");
	CHECK(mv_view_init(&m, 0, 0, 10, 10, 600, 600, &v, err, sizeof(err)),
	      "60x zoom accepted");

	/* The area filter: a 2x2 checker of 0 and 200 at 1:2 is 100 each. */
	mv_image_t dec, out;
	mv_image_alloc(&dec, MV_TILE_W, MV_TILE_H);
	for (int j = 0; j < dec.h; j++)
		for (int i = 0; i < dec.w; i++)
			memset(dec.px + ((size_t)j * dec.w + i) * 3,
			       (i + j) % 2 ? 200 : 0, 3);
	mv_part_t p = { 0, 0, 0, 0, 320, 240 };
	mv_image_alloc(&out, 320, 240);
	mv_scale_tile(&dec, 1, 2.0, &p, &out);
	int off = 0;
	for (size_t i = 0; i < (size_t)320 * 240 * 3; i++)
		off += out.px[i] != 100;
	CHECK(off == 0, "checker at 1:2: %d channels not 100", off);
	mv_image_free(&out);

	/* JPEG round trip: a flat tile stays flat at every DCT scale. */
	memset(dec.px, 77, (size_t)dec.w * dec.h * 3);
	uint8_t *jpg;
	size_t len;
	CHECK(mv_jpeg_encode(&dec, 90, &jpg, &len) == 0, "encode");
	for (int d = 1; d <= 8; d *= 2) {
		mv_image_t s;
		CHECK(mv_jpeg_decode(jpg, len, d, &s) == 0, "decode 1/%d", d);
		CHECK(s.w == MV_TILE_W / d && s.h == MV_TILE_H / d,
		      "1/%d: %dx%d", d, s.w, s.h);
		int far = 0;
		for (size_t i = 0; i < (size_t)s.w * s.h * 3; i++)
			far += abs(s.px[i] - 77) > 2;
		CHECK(far == 0, "1/%d: %d channels off", d, far);
		mv_image_free(&s);
	}
	/* A truncated file may decode in part (what a damaged tile shows);
	 * it must not crash or leak. */
	if (mv_jpeg_decode(jpg, 100, 1, &out) == 0)
		mv_image_free(&out);
	uint8_t junk[64] = { 1, 2, 3 };
	CHECK(mv_jpeg_decode(junk, sizeof(junk), 1, &out) != 0,
	      "junk decoded");
	mv_jpeg_buf_free(jpg);
	mv_image_free(&dec);
	CHECK(mv_pick_denom(1.0) == 1 && mv_pick_denom(3.9) == 2 &&
	      mv_pick_denom(4.0) == 4 && mv_pick_denom(16) == 8 &&
	      mv_pick_denom(0.5) == 1, "pick_denom");
	printf("%s\n", fails ? "FAIL" : "PASS: geom");
	return fails ? 1 : 0;
}
