/*
 * tile_fuzz -- a map tile is whatever is on a host's disk: any bytes given
 * to the viewer's JPEG decoding and area filter must give an image or an
 * error, never a crash, an overrun or a leak.  The first input byte picks
 * the DCT scale and the reduction; the rest is the file.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "mv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const double scales[8] = { 0.5, 1, 1.6, 2, 3.2, 5, 8, 16 };
	double s = scales[data[0] & 7];
	int denom = mv_pick_denom(s);
	mv_image_t dec;
	if (mv_jpeg_decode(data + 1, size - 1, denom, &dec) != 0)
		return 0;
	/* Only a tile of the right size is scaled, as mv_tile_render does. */
	if (dec.w * denom == MV_TILE_W && dec.h * denom == MV_TILE_H) {
		mv_map_t m = { .cols = 2, .rows = 2, .width = 2 * MV_TILE_W,
			       .height = 2 * MV_TILE_H };
		mv_view_t v;
		char err[128];
		mv_part_t *p;
		if (mv_view_init(&m, 0, 0, m.width, m.height,
				 (int)(m.width / s), (int)(m.height / s), &v, err,
				 sizeof(err)) == 0) {
			int n = mv_view_parts(&m, &v, &p);
			if (n > 0) {
				mv_image_t out;
				if (mv_image_alloc(&out, p[0].ow, p[0].oh) == 0) {
					mv_scale_tile(&dec, denom, s, &p[0], &out);
					mv_image_free(&out);
				}
				free(p);
			}
		}
	}
	mv_image_free(&dec);
	return 0;
}
