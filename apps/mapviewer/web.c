/*
 * web.c -- mapviewer serve: the map in a browser.
 *
 *   GET /              the page (page.c)
 *   GET /map.json      the map's size and the loader
 *   GET /view?x=&y=&w=&h=&ww=&wh=[&fmt=png]
 *                      one view, rendered by the loader (the cluster with
 *                      --loader c), as JPEG (default) or PNG; the headers
 *                      say how long it took (X-Render-Ms) and who made
 *                      each part (X-Parts: "tx,ty,ox,oy,ow,oh,daemon,ms,
 *                      ok;..." with ox, oy relative to the image)
 *
 * Anything else is a 4xx with a one-line reason: unknown paths 404,
 * methods other than GET/HEAD 405, bad or out-of-range parameters 400.
 * libmicrohttpd answers on one internal thread, so renders run one at a
 * time and the loader needs no lock of its own.
 */
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mv.h"

typedef struct web {
	const mv_map_t *m;
	mv_loader_t *l;
	unsigned long views;
} web_t;

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned code,
				const char *type, const void *buf, size_t len,
				enum MHD_ResponseMemoryMode mode,
				struct MHD_Response **keep)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, (void *)buf, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result ok = MHD_YES;
	if (keep) {
		*keep = r;
		return ok;
	}
	ok = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code,
				 const char *msg)
{
	char buf[300];
	int n = snprintf(buf, sizeof(buf), "%s\n", msg);
	return send_buf(c, code, "text/plain; charset=utf-8", buf, (size_t)n,
			MHD_RESPMEM_MUST_COPY, NULL);
}

/* A query integer: digits only (an optional minus), in int range. */
static int qint(struct MHD_Connection *c, const char *key, int *v, int def)
{
	const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
						    key);
	if (!s) {
		if (def == INT_MIN)
			return -1;
		*v = def;
		return 0;
	}
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (!*s || *end || errno || x < INT_MIN / 2 || x > INT_MAX / 2)
		return -1;
	*v = (int)x;
	return 0;
}

static enum MHD_Result view(web_t *w, struct MHD_Connection *c)
{
	int x, y, wd, ht, ww, wh;
	char err[160];
	if (qint(c, "x", &x, INT_MIN) || qint(c, "y", &y, INT_MIN) ||
	    qint(c, "w", &wd, INT_MIN) || qint(c, "h", &ht, INT_MIN) ||
	    qint(c, "ww", &ww, 600) || qint(c, "wh", &wh, 600))
		return send_text(c, MHD_HTTP_BAD_REQUEST,
				 "need integer x, y, w, h (and ww, wh)");
	const char *fmt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
						      "fmt");
	int png = fmt && strcmp(fmt, "png") == 0;
	if (fmt && !png && strcmp(fmt, "jpg") != 0)
		return send_text(c, MHD_HTTP_BAD_REQUEST, "fmt is jpg or png");
	mv_view_t v;
	if (mv_view_init(w->m, x, y, wd, ht, ww, wh, &v, err, sizeof(err)))
		return send_text(c, MHD_HTTP_BAD_REQUEST, err);
	mv_image_t im;
	mv_part_t *parts;
	mv_result_t *res;
	mv_render_stats_t st;
	int rc = mv_render(w->l, w->m, &v, &im, &parts, &res, &st);
	if (rc)
		return send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				 "render failed");
	w->views++;
	uint8_t *buf = NULL;
	size_t len = 0;
	enum MHD_Result ok = MHD_NO;
	if (png) {
		/* libpng's simplified API writes to memory in two calls:
		 * the size, then the bytes. */
		rc = mv_png_encode(&im, &buf, &len);
	} else {
		rc = mv_jpeg_encode(&im, 90, &buf, &len);
	}
	if (rc) {
		ok = send_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "encode failed");
		goto out;
	}
	/* Per-part facts for the page's panel; a view of thousands of
	 * tiles (a huge map zoomed out) sends only their number. */
	int listed = st.nparts <= 1000 ? st.nparts : 0;
	size_t cap = (size_t)listed * 64 + 1;
	char *hp = malloc(cap);
	if (!hp)
		goto out;
	size_t n = 0;
	hp[0] = 0;
	for (int i = 0; i < listed && n < cap; i++) {
		const mv_part_t *p = &parts[i];
		n += (size_t)snprintf(hp + n, cap - n, "%s%d,%d,%d,%d,%d,%d,%d,%.1f,%d",
				      i ? ";" : "", p->tx, p->ty, p->ox - v.gx,
				      p->oy - v.gy, p->ow, p->oh, res[i].daemon,
				      res[i].ms,
				      res[i].status ? 0 : res[i].replica ? 2 : 1);
	}
	struct MHD_Response *r = NULL;
	send_buf(c, 0, png ? "image/png" : "image/jpeg", buf, len,
		 MHD_RESPMEM_MUST_COPY, &r);
	if (r) {
		char ms[32], sc[32], np[16];
		snprintf(np, sizeof(np), "%d", st.nparts);
		MHD_add_response_header(r, "X-Part-Count", np);
		snprintf(ms, sizeof(ms), "%.1f", st.ms_total);
		snprintf(sc, sizeof(sc), "%g", v.s);
		MHD_add_response_header(r, "X-Render-Ms", ms);
		MHD_add_response_header(r, "X-Scale", sc);
		MHD_add_response_header(r, "X-Loader", w->l->name);
		MHD_add_response_header(r, "X-Parts", hp);
		ok = MHD_queue_response(c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
	}
	free(hp);
out:
	if (png)
		free(buf);
	else
		mv_jpeg_buf_free(buf);
	mv_image_free(&im);
	free(parts);
	free(res);
	return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	web_t *w = cls;
	(void)version;
	(void)upload;
	/* The first call for a request only announces it; a body (none is
	 * wanted) would arrive in later calls. */
	if (!*con_cls) {
		*con_cls = w;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only");
	if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
		return send_buf(c, MHD_HTTP_OK, "text/html; charset=utf-8",
				mv_page_html, strlen(mv_page_html),
				MHD_RESPMEM_PERSISTENT, NULL);
	if (strcmp(url, "/map.json") == 0) {
		char js[200];
		int n = snprintf(js, sizeof(js),
				 "{\"width\":%d,\"height\":%d,\"cols\":%d,"
				 "\"rows\":%d,\"loader\":\"%s\",\"winMax\":%d}",
				 w->m->width, w->m->height, w->m->cols,
				 w->m->rows, w->l->name, MV_WIN_MAX);
		return send_buf(c, MHD_HTTP_OK, "application/json", js,
				(size_t)n, MHD_RESPMEM_MUST_COPY, NULL);
	}
	if (strcmp(url, "/view") == 0)
		return view(w, c);
	return send_text(c, MHD_HTTP_NOT_FOUND, "no such page");
}

int mv_serve(const mv_map_t *m, mv_loader_t *l, int port, int seconds)
{
	web_t w = { m, l, 0 };
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* One render of the whole map before the first visitor: the
	 * loader's threads and daemon addresses are set up, the tiles are
	 * in the page cache, and the first view is as quick as the rest. */
	mv_view_t v;
	char err[128];
	if (mv_view_init(m, 0, 0, m->width, m->height, 600, 600, &v, err,
			 sizeof(err)) == 0) {
		mv_image_t im;
		mv_render_stats_t st;
		if (mv_render(l, m, &v, &im, NULL, NULL, &st) == 0) {
			mv_image_free(&im);
			printf("mapviewer: warm-up render of %d tiles in %.1f ms\n",
			       st.nparts, st.ms_total);
		}
	}
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
		(uint16_t)port, NULL, NULL, handle, &w,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
		MHD_OPTION_END);
	if (!d) {
		mv_log("serve: cannot listen on port %d", port);
		return -1;
	}
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("mapviewer: serving %s on http://127.0.0.1:%u/ (%s)\n", m->dir,
	       di ? di->port : (unsigned)port, l->name);
	fflush(stdout);
	double end = seconds > 0 ? mv_now_ms() + seconds * 1e3 : 0;
	/* The server runs on its own thread; this one only waits for a
	 * signal or the time limit. */
	while (!stop_flag && (!end || mv_now_ms() < end)) {
		struct timespec ts = { 0, 100 * 1000000 };
		nanosleep(&ts, NULL);
	}
	MHD_stop_daemon(d);
	printf("mapviewer: served %lu views\n", w.views);
	return 0;
}
