/*
 * mv.h -- the map viewer's private header.
 *
 * Objects, one file each:
 *   image.c    RGB images: JPEG decode with DCT scaling, area-filter
 *              reduction, compose, placeholders, PNG/JPEG output
 *   font.c     a 5x7 bitmap font for labels and placeholder marks
 *   map.c      the manifest, tile paths, placement of tiles on daemons,
 *              the geometry of a view (which tile fills which pixels)
 *   gen.c      the procedural map generator
 *   tloader.c  imgTLoader: local threads read and scale tiles
 *   cloader.c  imgCLoader: one pcor thread per tile asks a daemon
 *   daemon.c   imgDaemon: a pool of threads serving tiles over pcor
 *   viewer.c   imgViewer: plans a view, runs a loader, assembles it
 *   web.c      the HTTP front end (libmicrohttpd); page.c its assets
 *   main.c     the command line
 *
 * Geometry.  A view is a region (X, Y, W, H) of the whole map shown in a
 * window; one scale s = max(W/ww, H/wh) source pixels per output pixel
 * serves both axes.  Output pixels live on a grid anchored at the map's
 * origin: output column i covers source [i*s, (i+1)*s).  A pixel belongs
 * to the tile that holds its centre, so every tile's part of a view can
 * be computed alone, by any process, and the parts tile the window.
 */
#ifndef MV_H
#define MV_H

#include <stddef.h>
#include <stdint.h>

#define MV_TILE_W 640
#define MV_TILE_H 480
#define MV_WIN_MAX 4096  /* largest window side accepted */
#define MV_SCALE_MIN 0.0625 /* zoom in at most 16x */

/* ------------------------------------------------------------- images */

typedef struct mv_image {
	int w, h;
	uint8_t *px; /* RGB, rows of 3*w bytes, owned by the image */
} mv_image_t;

int mv_image_alloc(mv_image_t *im, int w, int h);
void mv_image_free(mv_image_t *im);
/* Decode JPEG bytes, scaled down in the DCT by 1/denom (1, 2, 4 or 8). */
int mv_jpeg_decode(const uint8_t *jpg, size_t len, int denom, mv_image_t *out);
int mv_jpeg_encode(const mv_image_t *im, int quality, uint8_t **buf_p,
		   size_t *len_p);
void mv_jpeg_buf_free(uint8_t *buf);
int mv_png_write(const mv_image_t *im, const char *path);
/* PNG bytes in memory; *buf_p is freed with free(). */
int mv_png_encode(const mv_image_t *im, uint8_t **buf_p, size_t *len_p);
/* Write .png or .jpg by the file name's ending. */
int mv_image_write(const mv_image_t *im, const char *path);
int mv_image_read_png(const char *path, mv_image_t *out);
int mv_read_file(const char *path, uint8_t **buf_p, size_t *len_p);

/*
 * The part one tile contributes to a view: output pixels [ox, ox+ow) x
 * [oy, oy+oh) on the map-anchored output grid at scale s.
 */
typedef struct mv_part {
	int tx, ty;     /* tile column and row */
	int ox, oy;     /* first output pixel (grid coordinates) */
	int ow, oh;     /* size in output pixels */
} mv_part_t;

/* Largest DCT denominator that keeps at least one decoded pixel per
 * output pixel. */
int mv_pick_denom(double s);
/*
 * Scale a decoded tile (decoded at 1/denom) into its part: each output
 * pixel is the area-weighted mean of the source pixels under it, clipped
 * to the tile.  out must be p->ow x p->oh.
 */
void mv_scale_tile(const mv_image_t *dec, int denom, double s,
		   const mv_part_t *p, mv_image_t *out);
/* Read, decode and scale one tile file into out (allocated here). */
int mv_tile_render(const char *path, double s, const mv_part_t *p,
		   mv_image_t *out);
/* Copy src into dst at (x, y), clipped. */
void mv_blit(mv_image_t *dst, const mv_image_t *src, int x, int y);
/* A marked placeholder: hatched grey with a red cross and a label. */
void mv_placeholder(mv_image_t *dst, int x, int y, int w, int h,
		    const char *label);
void mv_fill(mv_image_t *im, int x, int y, int w, int h, uint8_t r,
	     uint8_t g, uint8_t b);

/* --------------------------------------------------------------- font */

#define MV_FONT_W 5
#define MV_FONT_H 7
/* Draw text at (x, y) with each font pixel a k x k block; a one-pixel
 * dark outline keeps it readable on any terrain. */
void mv_text(mv_image_t *im, int x, int y, int k, const char *s,
	     uint8_t r, uint8_t g, uint8_t b);
int mv_text_width(const char *s, int k);

/* ----------------------------------------------------------------- map */

typedef struct mv_map {
	char dir[512];
	int cols, rows;     /* tiles */
	int width, height;  /* pixels */
	uint32_t seed;
} mv_map_t;

int mv_map_open(const char *dir, mv_map_t *m);
int mv_map_write_manifest(const mv_map_t *m);
void mv_tile_path(const mv_map_t *m, int tx, int ty, char *buf, size_t n);
/* The daemon (0 .. n-1) that owns a tile: a hash of its position. */
int mv_tile_owner(int tx, int ty, int ndaemons);

typedef struct mv_view {
	int x, y, w, h;     /* region, source pixels */
	int ww, wh;         /* window */
	double s;           /* source pixels per output pixel */
	int gx, gy;         /* output grid origin of the view */
	int ow, oh;         /* output size */
} mv_view_t;

/* Check a region and window against the map and work out the scale.
 * Returns 0 or -1 with a reason in err. */
int mv_view_init(const mv_map_t *m, int x, int y, int w, int h, int ww,
		 int wh, mv_view_t *v, char *err, size_t errlen);
/* The parts of a view (allocated here); returns their number. */
int mv_view_parts(const mv_map_t *m, const mv_view_t *v, mv_part_t **parts_p);

/* ------------------------------------------------------------- loaders */

/* What a loader reports for one part. */
typedef struct mv_result {
	int status;       /* 0, or negative: the part is a placeholder */
	int daemon;       /* who produced it: daemon index, -1 local */
	int replica;      /* 1 when a replica answered for a lost owner */
	double ms;        /* time from request to pixels */
	char why[48];     /* for a failed part */
} mv_result_t;

/*
 * A loader fills each part's pixels straight into the view's output
 * image (the parts are disjoint, so threads write without a lock).
 */
typedef struct mv_loader mv_loader_t;
struct mv_loader {
	const char *name;
	int (*load)(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
		    const mv_part_t *parts, int n, mv_image_t *out,
		    mv_result_t *res);
	void (*destroy)(mv_loader_t *l);
	int threads;      /* concurrent workers; 0 = one per part */
};

mv_loader_t *mv_tloader_create(int threads);
/* ndaemons published as "mapd/<k>"; recv_dma picks recvDMA over recvCopy;
 * timeout_ms bounds each request. */
mv_loader_t *mv_cloader_create(int ndaemons, int threads, int recv_dma,
			       int timeout_ms);

/* Blit a part rendered elsewhere into the view's output. */
void mv_part_place(mv_image_t *out, const mv_view_t *v, const mv_part_t *p,
		   const mv_image_t *pix);

/* ------------------------------------------------------------- viewer */

typedef struct mv_render_stats {
	double ms_total;
	int nparts, nfailed, nreplica;
} mv_render_stats_t;

/* Render a view through a loader: out gets v->ow x v->oh pixels, res one
 * result per part (allocated here when res_p is not NULL). */
int mv_render(mv_loader_t *l, const mv_map_t *m, const mv_view_t *v,
	      mv_image_t *out, mv_part_t **parts_p, mv_result_t **res_p,
	      mv_render_stats_t *st);

/* ------------------------------------------------------------- daemon */

#define MV_TAG_REQ 7100
#define MV_TAG_REP 7101
#define MV_TAG_QUIT 7102
#define MV_MAGIC 0x4d56u  /* "MV" */
#define MV_VERSION 1

/* A tile request (host byte order: the demo's processes share one ABI). */
typedef struct mv_req {
	uint16_t magic, version;
	uint32_t id;        /* echoed in the reply */
	int32_t tx, ty;
	int32_t ox, oy, ow, oh;
	double s;
} mv_req_t;

typedef struct mv_rep {
	uint16_t magic, version;
	uint32_t id;
	int32_t status;     /* 0, or -errno-like: pixels are absent */
	int32_t daemon;
	int32_t ow, oh;     /* RGB bytes follow */
} mv_rep_t;

typedef struct mv_daemon_opts {
	int index, ndaemons, workers;
	int die_after;      /* tests: _exit after this many replies, 0 never */
	int mute_after;     /* tests: answer nothing after this many, 0 never */
} mv_daemon_opts_t;

/* Serve tiles on the calling pcor thread until a QUIT message; returns
 * 0 or a pcor status. */
int mv_daemon_run(const mv_map_t *m, const mv_daemon_opts_t *o);
/* Ask every published daemon to quit. */
void mv_daemons_quit(int ndaemons);

/* ------------------------------------------------------------ generator */

typedef void (*mv_progress_fn)(int done, int total);
/* Generate tiles (all, or those daemon share of nshare holds: the owner's
 * and its replica's) with threads pcor threads. */
int mv_generate(const mv_map_t *m, int threads, int share, int nshare,
		mv_progress_fn progress);

/* ------------------------------------------------------------------ web */

int mv_serve(const mv_map_t *m, mv_loader_t *l, int port, int seconds);
extern const char mv_page_html[];

double mv_now_ms(void);
void mv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
