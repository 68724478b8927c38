/*
 * main.c -- the mapviewer command line.
 *
 *   mapviewer gen    [--map DIR] [--grid CxR] [--seed N] [--threads N]
 *                    [--share K/N] [--force]
 *   mapviewer render [--map DIR] --region X,Y,W,H [--window WxH] -o FILE
 *                    [--loader t|c] [--threads N] [--dma] [--timeout-ms N]
 *   mapviewer render [--map DIR] --paper -o DIR [--repeat N] [--csv FILE]
 *   mapviewer serve  [--map DIR] [--port P] [--seconds N] [--loader t|c]
 *
 * Under pcorrun, process 0 runs the command and every other process runs
 * an imgDaemon (index pid-1); process 0 ends them when it is done.  With
 * --loader c and a single process, a daemon runs inside the process.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcor/pcor.h>

#include "mv.h"

#define MAXREG 16

typedef struct opts {
	const char *cmd, *map, *out, *csv;
	const char *outs[MAXREG]; /* -o per --region, in order */
	int nout, wins[MAXREG][2], nwin; /* --window per --region */
	int cols, rows, threads, share, nshare, force;
	unsigned seed;
	int nreg, reg[MAXREG][4];
	int ww, wh;
	char loader;
	int dma, timeout_ms, repeat, paper, port, seconds, workers;
	int die_daemon, die_after, mute_daemon, mute_after, hosts;
} opts_t;

/* The paper's seven regions of the 9600x9600 map into 600x600. */
static const int paper_scales[7] = { 1, 2, 4, 5, 8, 10, 16 };

static void usage(FILE *f)
{
	fprintf(f,
"usage: mapviewer gen    [--map DIR] [--grid CxR] [--seed N] [--threads N]\n"
"                        [--share K/N] [--force]\n"
"       mapviewer render [--map DIR] --region X,Y,W,H [--window WxH] -o FILE\n"
"                        (repeat the three for more views in one run)\n"
"                        [--loader t|c] [--threads N] [--dma] [--timeout-ms N]\n"
"       mapviewer render [--map DIR] --paper -o DIR [--repeat N] [--csv FILE]\n"
"       mapviewer serve  [--map DIR] [--port P] [--seconds N] [--loader t|c]\n"
"       mapviewer cmp A.png B.png [TOL]\n"
"options common to all: --workers N (threads per daemon),\n"
"  --hosts (print where the viewer and each daemon run),\n"
"  --die-after K,N (tests: daemon K exits after N replies),\n"
"  --mute-after K,N (tests: daemon K answers nothing after N replies)\n"
"Under pcorrun -n N, processes 1..N-1 are the daemons.  Output is .png or .jpg.\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->map = "map";
	o->cols = 15;
	o->rows = 20;
	o->seed = 1994;
	o->threads = 0;
	o->nshare = 1;
	o->ww = o->wh = 600;
	o->loader = 't';
	o->timeout_ms = 10000;
	o->repeat = 1;
	o->port = 8080;
	o->workers = 2;
	o->die_daemon = -1;
	o->mute_daemon = -1;
	if (argc < 2)
		return -1;
	o->cmd = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int used = 1;
		if (strcmp(a, "--force") == 0) {
			o->force = 1;
			used = 0;
		} else if (strcmp(a, "--dma") == 0) {
			o->dma = 1;
			used = 0;
		} else if (strcmp(a, "--hosts") == 0) {
			o->hosts = 1;
			used = 0;
		} else if (strcmp(a, "--paper") == 0) {
			o->paper = 1;
			used = 0;
		} else if (!v) {
			fprintf(stderr, "mapviewer: %s needs a value\n", a);
			return -1;
		} else if (strcmp(a, "--map") == 0) {
			o->map = v;
		} else if (strcmp(a, "-o") == 0) {
			if (o->nout == MAXREG)
				goto bad;
			o->out = o->outs[o->nout++] = v;
		} else if (strcmp(a, "--csv") == 0) {
			o->csv = v;
		} else if (strcmp(a, "--grid") == 0) {
			if (sscanf(v, "%dx%d", &o->cols, &o->rows) != 2)
				goto bad;
		} else if (strcmp(a, "--seed") == 0) {
			o->seed = (unsigned)strtoul(v, NULL, 10);
		} else if (strcmp(a, "--threads") == 0) {
			o->threads = atoi(v);
		} else if (strcmp(a, "--workers") == 0) {
			o->workers = atoi(v);
		} else if (strcmp(a, "--share") == 0) {
			if (sscanf(v, "%d/%d", &o->share, &o->nshare) != 2)
				goto bad;
		} else if (strcmp(a, "--region") == 0) {
			if (o->nreg == MAXREG)
				goto bad;
			int *r = o->reg[o->nreg++];
			if (sscanf(v, "%d,%d,%d,%d", &r[0], &r[1], &r[2], &r[3]) != 4)
				goto bad;
		} else if (strcmp(a, "--window") == 0) {
			if (o->nwin == MAXREG ||
			    sscanf(v, "%dx%d", &o->ww, &o->wh) != 2)
				goto bad;
			o->wins[o->nwin][0] = o->ww;
			o->wins[o->nwin++][1] = o->wh;
		} else if (strcmp(a, "--loader") == 0) {
			o->loader = v[0];
			if ((v[0] != 't' && v[0] != 'c') || v[1])
				goto bad;
		} else if (strcmp(a, "--timeout-ms") == 0) {
			o->timeout_ms = atoi(v);
		} else if (strcmp(a, "--repeat") == 0) {
			o->repeat = atoi(v);
		} else if (strcmp(a, "--port") == 0) {
			o->port = atoi(v);
		} else if (strcmp(a, "--seconds") == 0) {
			o->seconds = atoi(v);
		} else if (strcmp(a, "--die-after") == 0) {
			if (sscanf(v, "%d,%d", &o->die_daemon, &o->die_after) != 2)
				goto bad;
		} else if (strcmp(a, "--mute-after") == 0) {
			if (sscanf(v, "%d,%d", &o->mute_daemon, &o->mute_after) != 2)
				goto bad;
		} else {
			fprintf(stderr, "mapviewer: unknown option %s\n", a);
			return -1;
		}
		i += used;
		continue;
bad:
		fprintf(stderr, "mapviewer: bad value for %s: %s\n", a, v);
		return -1;
	}
	if (o->threads < 0 || o->threads > 4000 || o->timeout_ms < 1 ||
	    o->repeat < 1 || o->workers < 1 || o->workers > 64 ||
	    o->port < 0 || o->port > 65535) {
		fprintf(stderr, "mapviewer: a numeric option is out of range\n");
		return -1;
	}
	return 0;
}

static void progress(int done, int total)
{
	int w = 40, k = total ? done * w / total : w;
	fprintf(stderr, "\rgenerating [%.*s%*s] %d/%d tiles", k,
		"########################################", w - k, "", done,
		total);
	if (done == total)
		fputc('\n', stderr);
}

static int cmd_gen(const opts_t *o)
{
	mv_map_t m = { 0 }, old;
	if (!o->force && mv_map_open(o->map, &old) == 0 && old.cols == o->cols &&
	    old.rows == o->rows && old.seed == o->seed && o->nshare == 1) {
		printf("map %s: %dx%d tiles already there\n", o->map, o->cols,
		       o->rows);
		return 0;
	}
	if (o->cols < 1 || o->rows < 1 || o->cols > 1000 || o->rows > 1000 ||
	    strlen(o->map) >= sizeof(m.dir) - 32) {
		fprintf(stderr, "mapviewer: bad grid or map path\n");
		return 2;
	}
	strcpy(m.dir, o->map);
	m.cols = o->cols;
	m.rows = o->rows;
	m.width = m.cols * MV_TILE_W;
	m.height = m.rows * MV_TILE_H;
	m.seed = o->seed;
	int nt = o->threads ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nt < 1)
		nt = 1;
	double t0 = mv_now_ms();
	int rc = mv_generate(&m, nt > 256 ? 256 : nt, o->share, o->nshare,
			     isatty(2) ? progress : NULL);
	if (rc) {
		fprintf(stderr, "mapviewer: gen: %s\n", strerror(-rc));
		return 1;
	}
	printf("map %s: %dx%d tiles (%dx%d pixels) in %.1f s\n", o->map,
	       m.cols, m.rows, m.width, m.height, (mv_now_ms() - t0) / 1e3);
	return 0;
}

static int render_one(mv_loader_t *l, const mv_map_t *m, const int *r,
		      int ww, int wh, const char *out, FILE *csv, int repeat,
		      int threads)
{
	mv_view_t v;
	char err[128];
	if (mv_view_init(m, r[0], r[1], r[2], r[3], ww, wh, &v, err,
			 sizeof(err))) {
		fprintf(stderr, "mapviewer: %s\n", err);
		return 2;
	}
	double best = 1e30;
	mv_render_stats_t st = { 0 };
	for (int k = 0; k < repeat; k++) {
		mv_image_t im;
		int rc = mv_render(l, m, &v, &im, NULL, NULL, &st);
		if (rc) {
			fprintf(stderr, "mapviewer: render: %s\n", strerror(-rc));
			return 1;
		}
		if (st.ms_total < best)
			best = st.ms_total;
		if (k == 0 && out && (rc = mv_image_write(&im, out))) {
			fprintf(stderr, "mapviewer: write %s: %s\n", out,
				strerror(-rc));
			mv_image_free(&im);
			return 1;
		}
		mv_image_free(&im);
	}
	printf("%-10s %5d,%-5d %5dx%-5d %4d tiles  1:%-5.4g %4dx%-4d %8.1f ms"
	       "%s", l->name, r[0], r[1], r[2], r[3], st.nparts, v.s, v.ow,
	       v.oh, best, st.nfailed ? "" : "\n");
	if (st.nfailed)
		printf("  %d placeholder(s)\n", st.nfailed);
	if (st.nreplica)
		printf("  %d part(s) from a replica\n", st.nreplica);
	if (csv)
		fprintf(csv, "%s,%d,%d,%g,%d,%.3f,%d\n", l->name, st.nparts,
			r[2], v.s, threads, best, st.nfailed);
	return st.nfailed ? 3 : 0;
}

static int cmd_render(const opts_t *o, const mv_map_t *m, mv_loader_t *l)
{
	if (!o->paper && (o->nreg == 0 || !o->out)) {
		fprintf(stderr, "mapviewer: render needs --region and -o\n");
		return 2;
	}
	FILE *csv = NULL;
	if (o->csv && !(csv = fopen(o->csv, "a"))) {
		fprintf(stderr, "mapviewer: %s: %s\n", o->csv, strerror(errno));
		return 1;
	}
	int worst = 0;
	if (!o->paper) {
		/* The i-th --window and -o go with the i-th --region; the
		 * last one given serves the regions after it. */
		for (int i = 0; i < o->nreg && !worst; i++) {
			int w = i < o->nwin ? i : o->nwin - 1;
			int f = i < o->nout ? i : o->nout - 1;
			worst = render_one(l, m, o->reg[i],
					   w >= 0 ? o->wins[w][0] : o->ww,
					   w >= 0 ? o->wins[w][1] : o->wh,
					   o->outs[f], csv, o->repeat, o->threads);
		}
	} else {
		printf("loader     region       size        tiles  scale    "
		       "output      time\n");
		/* Regions from the map's top-left corner, each s times the
		 * window, clipped to the map. */
		for (int i = 0; i < 7; i++) {
			int s = paper_scales[i];
			int r[4] = { 0, 0, o->ww * s, o->wh * s };
			if (r[2] > m->width)
				r[2] = m->width;
			if (r[3] > m->height)
				r[3] = m->height;
			char path[700];
			snprintf(path, sizeof(path), "%s/region%d-1to%d.jpg",
				 o->out ? o->out : ".", i + 1, s);
			int rc = render_one(l, m, r, o->ww, o->wh,
					    o->out ? path : NULL, csv, o->repeat,
					    o->threads);
			if (rc > worst)
				worst = rc;
		}
	}
	if (csv)
		fclose(csv);
	return worst;
}

/*
 * mapviewer cmp A.png B.png [TOL]: compare A with the top-left corner of
 * B (a screenshot may be larger).  Exit 0 when the mean absolute channel
 * difference is at most TOL (default 0: identical), 1 otherwise.
 */
static int cmd_cmp(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	double tol = argc > 4 ? atof(argv[4]) : 0;
	mv_image_t a, b;
	if (mv_image_read_png(argv[2], &a) || mv_image_read_png(argv[3], &b)) {
		fprintf(stderr, "mapviewer: cmp: cannot read the images\n");
		return 2;
	}
	int ret = 1;
	if (b.w < a.w || b.h < a.h) {
		printf("cmp: %dx%d does not fit in %dx%d\n", a.w, a.h, b.w, b.h);
		goto out;
	}
	double sum = 0;
	int maxd = 0;
	for (int j = 0; j < a.h; j++)
		for (int i = 0; i < a.w * 3; i++) {
			int d = a.px[(size_t)j * a.w * 3 + i] -
				b.px[(size_t)j * b.w * 3 + i];
			d = d < 0 ? -d : d;
			sum += d;
			maxd = d > maxd ? d : maxd;
		}
	double mean = sum / ((double)a.w * a.h * 3);
	printf("cmp: %dx%d mean diff %.3f max %d (tolerance %g)\n", a.w, a.h,
	       mean, maxd, tol);
	ret = mean <= tol && (tol > 0 || maxd == 0) ? 0 : 1;
out:
	mv_image_free(&a);
	mv_image_free(&b);
	return ret;
}

/* Where the viewer and each daemon run (the directory's host identity). */
static void print_hosts(int nd)
{
	pcor_proc_info_t pi;
	if (pcor_proc_info(pcor_self_pid(), &pi) == PCOR_OK)
		printf("viewer: pid %d on host %s\n", pi.pid, pi.host);
	for (int k = 0; k < nd; k++) {
		char name[32];
		int pid, thid;
		snprintf(name, sizeof(name), "mapd/%d", k);
		if (pcor_name_lookup(name, 0, &pid, &thid) == PCOR_OK &&
		    pcor_proc_info(pid, &pi) == PCOR_OK)
			printf("daemon %d: pid %d on host %s\n", k, pid, pi.host);
	}
}

typedef struct local_daemon {
	const mv_map_t *m;
	mv_daemon_opts_t o;
} local_daemon_t;

static void *local_daemon(void *arg)
{
	local_daemon_t *d = arg;
	mv_daemon_run(d->m, &d->o);
	return NULL;
}

int main(int argc, char **argv)
{
	opts_t o;
	if (argc > 1 && strcmp(argv[1], "cmp") == 0)
		return cmd_cmp(argc, argv);
	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (strcmp(o.cmd, "-h") == 0 || strcmp(o.cmd, "--help") == 0) {
		usage(stdout);
		return 0;
	}
	/* Hundreds of loader and daemon threads wait while tiles decode on
	 * a few cores: a waiter or dispatcher that spins takes the CPU the
	 * decoders need (measured: a third more CPU per render).  So wait
	 * by sleeping, unless the user chose otherwise. */
	setenv("PCOR_DISPATCH", "block", 0);
	setenv("PCOR_SPIN_NS", "0", 0);
	int rc = pcor_init(&argc, &argv);
	if (rc != PCOR_OK) {
		fprintf(stderr, "mapviewer: pcor_init: %s\n", pcor_strerror(rc));
		return 1;
	}
	int me = pcor_self_pid(), np = pcor_nprocs(), ret = 0;
	mv_map_t m;
	if (strcmp(o.cmd, "gen") == 0) {
		opts_t g = o;
		if (np > 1) {
			/* Each process makes its own share. */
			g.share = me;
			g.nshare = np;
		}
		ret = cmd_gen(&g);
		goto out;
	}
	if (strcmp(o.cmd, "render") != 0 && strcmp(o.cmd, "serve") != 0) {
		fprintf(stderr, "mapviewer: unknown command %s\n", o.cmd);
		usage(stderr);
		ret = 2;
		goto out;
	}
	if ((rc = mv_map_open(o.map, &m)) != 0) {
		fprintf(stderr, "mapviewer: map %s: %s (mapviewer gen makes one)\n",
			o.map, rc == -EBADMSG ? "bad manifest" : strerror(-rc));
		ret = 1;
		goto out;
	}
	if (me > 0) {
		mv_daemon_opts_t d = { me - 1, np - 1, o.workers,
				       o.die_daemon == me - 1 ? o.die_after : 0,
				       o.mute_daemon == me - 1 ? o.mute_after : 0 };
		rc = mv_daemon_run(&m, &d);
		ret = rc == PCOR_OK ? 0 : 1;
		goto out;
	}
	int nd = np > 1 ? np - 1 : 1, dthid = -1;
	local_daemon_t ld = { &m, { 0, 1, o.workers,
				    o.die_daemon == 0 ? o.die_after : 0,
				    o.mute_daemon == 0 ? o.mute_after : 0 } };
	mv_loader_t *l;
	if (o.loader == 'c') {
		if (np == 1 && (rc = pcor_thread_create(local_daemon, &ld,
							 &dthid)) != PCOR_OK) {
			fprintf(stderr, "mapviewer: daemon: %s\n",
				pcor_strerror(rc));
			ret = 1;
			goto out;
		}
		l = mv_cloader_create(nd, o.threads, o.dma, o.timeout_ms);
	} else {
		l = mv_tloader_create(o.threads);
	}
	if (!l) {
		ret = 1;
	} else {
		if (strcmp(o.cmd, "render") == 0)
			ret = cmd_render(&o, &m, l);
		else
			ret = mv_serve(&m, l, o.port, o.seconds) ? 1 : 0;
		l->destroy(l);
	}
	if (o.hosts && o.loader == 'c')
		print_hosts(nd);
	if (o.loader == 'c')
		mv_daemons_quit(nd);
	if (dthid >= 0)
		pcor_thread_join(dthid, NULL);
out:
	pcor_finalize();
	return ret;
}
