/*
 * image.c -- the image code every part shares: decode, scale, compose,
 * write.  One implementation, so a tile scaled by a daemon and the same
 * tile scaled by a local loader are the same bytes.
 */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "mv.h"

int mv_image_alloc(mv_image_t *im, int w, int h)
{
	if (w <= 0 || h <= 0)
		return -EINVAL;
	im->px = malloc((size_t)w * (size_t)h * 3);
	if (!im->px)
		return -ENOMEM;
	im->w = w;
	im->h = h;
	return 0;
}

void mv_image_free(mv_image_t *im)
{
	free(im->px);
	im->px = NULL;
	im->w = im->h = 0;
}

int mv_read_file(const char *path, uint8_t **buf_p, size_t *len_p)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	int rc = 0;
	uint8_t *buf = NULL;
	if (fseek(f, 0, SEEK_END) != 0) {
		rc = -EIO;
		goto out;
	}
	long n = ftell(f);
	if (n <= 0 || n > (64L << 20)) {
		rc = n == 0 ? -ENODATA : -EFBIG;
		goto out;
	}
	rewind(f);
	buf = malloc((size_t)n);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		rc = -EIO;
		goto out;
	}
	*buf_p = buf;
	*len_p = (size_t)n;
out:
	fclose(f);
	return rc;
}

/* One decompressor per thread, kept for the thread's life: setting one
 * up costs about as much as decoding a tile at 1/8. */
static pthread_key_t dec_key;
static pthread_once_t dec_once = PTHREAD_ONCE_INIT;

static void dec_free(void *tj)
{
	tjDestroy(tj);
}

static void dec_key_init(void)
{
	if (pthread_key_create(&dec_key, dec_free) != 0)
		abort(); /* only when the process is out of keys at start */
}

static tjhandle decoder(void)
{
	pthread_once(&dec_once, dec_key_init);
	tjhandle tj = pthread_getspecific(dec_key);
	if (!tj && (tj = tjInitDecompress()) &&
	    pthread_setspecific(dec_key, tj) != 0) {
		tjDestroy(tj);
		tj = NULL;
	}
	return tj;
}

int mv_jpeg_decode(const uint8_t *jpg, size_t len, int denom, mv_image_t *out)
{
	tjhandle tj = decoder();
	if (!tj)
		return -ENOMEM;
	int w = 0, h = 0, sub, cs;
	/* The header of a damaged file may name any size: a tile is small. */
	if (tjDecompressHeader3(tj, jpg, (unsigned long)len, &w, &h, &sub,
				&cs) != 0 ||
	    w < 1 || h < 1 || w > 8 * MV_TILE_W || h > 8 * MV_TILE_H)
		return -EBADMSG;
	tjscalingfactor sf = { 1, denom };
	int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
	int rc = mv_image_alloc(out, sw, sh);
	if (rc)
		return rc;
	/* A truncated or damaged file may still decode partly: only a
	 * fatal error counts, a warning keeps the pixels. */
	if (tjDecompress2(tj, jpg, (unsigned long)len, out->px, sw, 0, sh,
			  TJPF_RGB, 0) != 0 &&
	    tjGetErrorCode(tj) == TJERR_FATAL) {
		mv_image_free(out);
		return -EBADMSG;
	}
	return 0;
}

int mv_jpeg_encode(const mv_image_t *im, int quality, uint8_t **buf_p,
		   size_t *len_p)
{
	tjhandle tj = tjInitCompress();
	if (!tj)
		return -ENOMEM;
	unsigned char *buf = NULL;
	unsigned long len = 0;
	int rc = tjCompress2(tj, im->px, im->w, 0, im->h, TJPF_RGB, &buf, &len,
			     TJSAMP_420, quality, 0);
	tjDestroy(tj);
	if (rc != 0) {
		tjFree(buf);
		return -EIO;
	}
	*buf_p = buf;
	*len_p = len;
	return 0;
}

void mv_jpeg_buf_free(uint8_t *buf)
{
	tjFree(buf);
}

int mv_png_write(const mv_image_t *im, const char *path)
{
	png_image p;
	memset(&p, 0, sizeof(p));
	p.version = PNG_IMAGE_VERSION;
	p.width = (png_uint_32)im->w;
	p.height = (png_uint_32)im->h;
	p.format = PNG_FORMAT_RGB;
	if (!png_image_write_to_file(&p, path, 0, im->px, 0, NULL))
		return -EIO;
	return 0;
}

int mv_png_encode(const mv_image_t *im, uint8_t **buf_p, size_t *len_p)
{
	png_image p;
	memset(&p, 0, sizeof(p));
	p.version = PNG_IMAGE_VERSION;
	p.width = (png_uint_32)im->w;
	p.height = (png_uint_32)im->h;
	p.format = PNG_FORMAT_RGB;
	png_alloc_size_t len = 0;
	if (!png_image_write_to_memory(&p, NULL, &len, 0, im->px, 0, NULL))
		return -EIO;
	uint8_t *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	if (!png_image_write_to_memory(&p, buf, &len, 0, im->px, 0, NULL)) {
		free(buf);
		return -EIO;
	}
	*buf_p = buf;
	*len_p = len;
	return 0;
}

int mv_image_read_png(const char *path, mv_image_t *out)
{
	png_image p;
	memset(&p, 0, sizeof(p));
	p.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_file(&p, path))
		return -EBADMSG;
	p.format = PNG_FORMAT_RGB;
	int rc = mv_image_alloc(out, (int)p.width, (int)p.height);
	if (rc) {
		png_image_free(&p);
		return rc;
	}
	if (!png_image_finish_read(&p, NULL, out->px, 0, NULL)) {
		mv_image_free(out);
		return -EBADMSG;
	}
	return 0;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

int mv_image_write(const mv_image_t *im, const char *path)
{
	if (ends_with(path, ".png"))
		return mv_png_write(im, path);
	if (!ends_with(path, ".jpg") && !ends_with(path, ".jpeg"))
		return -EINVAL;
	uint8_t *buf;
	size_t len;
	int rc = mv_jpeg_encode(im, 90, &buf, &len);
	if (rc)
		return rc;
	FILE *f = fopen(path, "wb");
	if (!f) {
		rc = -errno;
	} else {
		if (fwrite(buf, 1, len, f) != len)
			rc = -EIO;
		if (fclose(f) != 0 && !rc)
			rc = -EIO;
	}
	mv_jpeg_buf_free(buf);
	return rc;
}

int mv_pick_denom(double s)
{
	int d = 8;
	while (d > 1 && (double)d > s + 1e-9)
		d /= 2;
	return d;
}

/*
 * The source pixels [a, b) covers and their weights (the overlap of the
 * interval with each pixel), clipped to [0, n).  Returns the first
 * index; fills w[0..*cnt).
 */
static int span(double a, double b, int n, float *w, int *cnt, int cap)
{
	if (a < 0)
		a = 0;
	if (b > n)
		b = n;
	if (b <= a) {
		/* Only a pixel whose centre is a hair past the edge gets
		 * here: take the nearest source pixel. */
		int k = a >= n ? n - 1 : (int)a;
		w[0] = 1.0f;
		*cnt = 1;
		return k < 0 ? 0 : k;
	}
	int k0 = (int)floor(a), k1 = (int)ceil(b);
	if (k1 - k0 > cap)
		k1 = k0 + cap;
	float sum = 0;
	for (int k = k0; k < k1; k++) {
		double lo = a > k ? a : k, hi = b < k + 1 ? b : k + 1;
		w[k - k0] = (float)(hi - lo);
		sum += w[k - k0];
	}
	for (int k = 0; k < k1 - k0; k++)
		w[k] /= sum;
	*cnt = k1 - k0;
	return k0;
}

#define SPAN_CAP 24 /* s/denom < 16 source pixels, plus the partial ends */

void mv_scale_tile(const mv_image_t *dec, int denom, double s,
		   const mv_part_t *p, mv_image_t *out)
{
	double x0 = (double)p->tx * MV_TILE_W, y0 = (double)p->ty * MV_TILE_H;
	int *xs = malloc(sizeof(int) * (size_t)p->ow * 2);
	float *xw = malloc(sizeof(float) * (size_t)p->ow * SPAN_CAP);
	float *row = malloc(sizeof(float) * (size_t)p->ow * 3);
	if (!xs || !xw || !row) {
		mv_fill(out, 0, 0, out->w, out->h, 0, 0, 0);
		goto out;
	}
	for (int i = 0; i < p->ow; i++) {
		double a = ((p->ox + i) * s - x0) / denom;
		xs[2 * i] = span(a, a + s / denom, dec->w, xw + i * SPAN_CAP,
				 &xs[2 * i + 1], SPAN_CAP);
	}
	for (int j = 0; j < p->oh; j++) {
		float yw[SPAN_CAP];
		int ny;
		double a = ((p->oy + j) * s - y0) / denom;
		int ys = span(a, a + s / denom, dec->h, yw, &ny, SPAN_CAP);
		memset(row, 0, sizeof(float) * (size_t)p->ow * 3);
		for (int k = 0; k < ny; k++) {
			const uint8_t *src = dec->px + (size_t)(ys + k) * dec->w * 3;
			for (int i = 0; i < p->ow; i++) {
				const float *w = xw + i * SPAN_CAP;
				const uint8_t *q = src + (size_t)xs[2 * i] * 3;
				float r = 0, g = 0, b = 0;
				for (int m = 0; m < xs[2 * i + 1]; m++) {
					r += w[m] * q[3 * m];
					g += w[m] * q[3 * m + 1];
					b += w[m] * q[3 * m + 2];
				}
				row[3 * i] += yw[k] * r;
				row[3 * i + 1] += yw[k] * g;
				row[3 * i + 2] += yw[k] * b;
			}
		}
		uint8_t *d = out->px + (size_t)j * out->w * 3;
		for (int i = 0; i < p->ow * 3; i++) {
			float v = row[i] + 0.5f;
			d[i] = v >= 255.f ? 255 : (uint8_t)v;
		}
	}
out:
	free(xs);
	free(xw);
	free(row);
}

int mv_tile_render(const char *path, double s, const mv_part_t *p,
		   mv_image_t *out)
{
	uint8_t *jpg;
	size_t len;
	int rc = mv_read_file(path, &jpg, &len);
	if (rc)
		return rc;
	mv_image_t dec;
	int denom = mv_pick_denom(s);
	rc = mv_jpeg_decode(jpg, len, denom, &dec);
	free(jpg);
	if (rc)
		return rc;
	/* A tile of the wrong size is as bad as a corrupt one. */
	if (dec.w * denom != MV_TILE_W || dec.h * denom != MV_TILE_H) {
		mv_image_free(&dec);
		return -EBADMSG;
	}
	rc = mv_image_alloc(out, p->ow, p->oh);
	if (!rc)
		mv_scale_tile(&dec, denom, s, p, out);
	mv_image_free(&dec);
	return rc;
}

void mv_blit(mv_image_t *dst, const mv_image_t *src, int x, int y)
{
	for (int j = 0; j < src->h; j++) {
		int dy = y + j;
		if (dy < 0 || dy >= dst->h)
			continue;
		int i0 = x < 0 ? -x : 0;
		int i1 = x + src->w > dst->w ? dst->w - x : src->w;
		if (i1 <= i0)
			return;
		memcpy(dst->px + ((size_t)dy * dst->w + x + i0) * 3,
		       src->px + ((size_t)j * src->w + i0) * 3,
		       (size_t)(i1 - i0) * 3);
	}
}

void mv_fill(mv_image_t *im, int x, int y, int w, int h, uint8_t r,
	     uint8_t g, uint8_t b)
{
	for (int j = y < 0 ? 0 : y; j < y + h && j < im->h; j++)
		for (int i = x < 0 ? 0 : x; i < x + w && i < im->w; i++) {
			uint8_t *q = im->px + ((size_t)j * im->w + i) * 3;
			q[0] = r;
			q[1] = g;
			q[2] = b;
		}
}

void mv_placeholder(mv_image_t *dst, int x, int y, int w, int h,
		    const char *label)
{
	for (int j = 0; j < h; j++)
		for (int i = 0; i < w; i++) {
			int v = ((i + j) / 6) % 2 ? 150 : 120;
			mv_fill(dst, x + i, y + j, 1, 1, (uint8_t)v, (uint8_t)v,
				(uint8_t)v);
		}
	/* A red frame and cross say "not the map" at any size. */
	mv_fill(dst, x, y, w, 2, 220, 30, 30);
	mv_fill(dst, x, y + h - 2, w, 2, 220, 30, 30);
	mv_fill(dst, x, y, 2, h, 220, 30, 30);
	mv_fill(dst, x + w - 2, y, 2, h, 220, 30, 30);
	int n = w > h ? w : h;
	for (int k = 0; k < n; k++) {
		int i = (int)((long)k * w / n), j = (int)((long)k * h / n);
		mv_fill(dst, x + i - 1, y + j - 1, 3, 3, 220, 30, 30);
		mv_fill(dst, x + w - 1 - i - 1, y + j - 1, 3, 3, 220, 30, 30);
	}
	if (label && mv_text_width(label, 1) + 8 < w && h > 14) {
		int tw = mv_text_width(label, 1);
		mv_text(dst, x + (w - tw) / 2, y + h / 2 - 3, 1, label, 255,
			255, 255);
	}
}
