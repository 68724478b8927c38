/*
 * harness.c -- the shared benchmark harness (see harness.h).
 *
 * Design notes
 *  - Every time is CLOCK_MONOTONIC, read outside the measured loop only
 *    (and once per message where a one-way latency needs a stamp).
 *  - The bare baselines run on fresh threads pinned to CPUs 0 and 1, the
 *    CPUs pcor's own benchmark threads use, so a quotient compares the same
 *    pair of cores.  They are measured inside the benchmark process, in
 *    the same repetition as the pcor figure they are compared with, so a
 *    noisy host slows both sides of a ratio alike.
 */
#include "harness.h"

#include <ctype.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- parsing */

int bh_parse_size(const char *s, size_t *out_p)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	int shift = 0;
	switch (tolower((unsigned char)*end)) {
	case '\0':
		break;
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	default:
		return -1;
	}
	if (*end && end[1])
		return -1;
	if (v > (SIZE_MAX >> shift))
		return -1;
	*out_p = (size_t)(v << shift);
	return 0;
}

int bh_parse_size_list(const char *s, size_t *out, int max)
{
	char buf[1024];
	int n = 0;
	if (!s || strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (char *save = NULL, *it = strtok_r(buf, ",", &save); it;
	     it = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(it, ':');
		size_t a, b;
		if (colon) {
			*colon = '\0';
			if (bh_parse_size(it, &a) ||
			    bh_parse_size(colon + 1, &b) || a == 0 || b < a)
				return -1;
			for (size_t v = a; v <= b; v *= 2) {
				if (n == max)
					return -1;
				out[n++] = v;
				if (v > SIZE_MAX / 2)
					break;
			}
		} else {
			if (bh_parse_size(it, &a) || n == max)
				return -1;
			out[n++] = a;
		}
	}
	return n;
}

bool bh_list_has(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == wl && !strncmp(p, word, wl))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

static int parse_long(const char *s, long min, long *out_p)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < min)
		return -1;
	*out_p = v;
	return 0;
}

static void usage(FILE *f, const char *prog, const char *synopsis,
		  const bh_opts_t *o, const bh_extra_t *extra, int nextra)
{
	fprintf(f, "usage: %s [flags]\n%s\n\nflags:\n", prog, synopsis);
	fprintf(f, "  --sizes LIST     message sizes: 8,64k,1m or 1:16m "
		   "(powers of two)\n");
	fprintf(f, "  --threads LIST   thread counts (where it applies)\n");
	fprintf(f,
		"  --iters N        timed iterations per point (default "
		"%ld; fewer above 64 KiB)\n",
		o->iters);
	fprintf(f,
		"  --warmup N       untimed iterations first (default %ld)\n",
		o->warmup);
	fprintf(f,
		"  --min-iters N    floor for scaled iterations (default "
		"%ld)\n",
		o->min_iters);
	fprintf(f,
		"  --reps N         repetitions; figures are medians "
		"(default %d)\n",
		o->reps);
	fprintf(f, "  --csv PATH       also write the CSV to PATH\n");
	fprintf(f, "  --quiet          no CSV on stdout\n");
	for (int i = 0; i < nextra; i++) {
		char lhs[64];
		snprintf(lhs, sizeof(lhs), "--%s %s", extra[i].name,
			 extra[i].arg);
		fprintf(f, "  %-16s %s (default %s)\n", lhs, extra[i].help,
			*extra[i].val_p ? *extra[i].val_p : "none");
	}
}

void bh_parse(int argc, char **argv, bh_opts_t *o, const bh_extra_t *extra,
	      int nextra, const char *synopsis)
{
	const char *prog = argc > 0 ? argv[0] : o->bench;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2))
			goto bad;
		a += 2;
		if (!strcmp(a, "help")) {
			usage(stdout, prog, synopsis, o, extra, nextra);
			exit(0);
		}
		if (!strcmp(a, "quiet")) {
			o->quiet = true;
			continue;
		}
		/* Every other flag takes a value: --name=value or --name value.
		 */
		char name[64];
		const char *val;
		const char *eq = strchr(a, '=');
		if (eq) {
			if ((size_t)(eq - a) >= sizeof(name))
				goto bad;
			memcpy(name, a, (size_t)(eq - a));
			name[eq - a] = '\0';
			val = eq + 1;
		} else {
			if (strlen(a) >= sizeof(name) || i + 1 >= argc)
				goto bad;
			strcpy(name, a);
			val = argv[++i];
		}
		long l;
		if (!strcmp(name, "sizes")) {
			int n = bh_parse_size_list(val, o->sizes, BH_MAX_LIST);
			if (n <= 0)
				goto bad;
			o->nsizes = n;
		} else if (!strcmp(name, "threads")) {
			size_t t[BH_MAX_LIST];
			int n = bh_parse_size_list(val, t, BH_MAX_LIST);
			if (n <= 0)
				goto bad;
			for (int k = 0; k < n; k++) {
				if (t[k] < 1 || t[k] > 65536)
					goto bad;
				o->threads[k] = (long)t[k];
			}
			o->nthreads = n;
		} else if (!strcmp(name, "iters")) {
			if (parse_long(val, 1, &o->iters))
				goto bad;
		} else if (!strcmp(name, "warmup")) {
			if (parse_long(val, 0, &o->warmup))
				goto bad;
		} else if (!strcmp(name, "min-iters")) {
			if (parse_long(val, 1, &o->min_iters))
				goto bad;
		} else if (!strcmp(name, "reps")) {
			if (parse_long(val, 1, &l) || l > 1000)
				goto bad;
			o->reps = (int)l;
		} else if (!strcmp(name, "csv")) {
			o->csv_path = val;
		} else {
			int k;
			for (k = 0; k < nextra; k++)
				if (!strcmp(name, extra[k].name))
					break;
			if (k == nextra)
				goto bad;
			*extra[k].val_p = val;
		}
		continue;
	bad:
		fprintf(stderr, "%s: bad flag or value: %s\n", prog, argv[i]);
		usage(stderr, prog, synopsis, o, extra, nextra);
		exit(2);
	}
}

long bh_iters_for(const bh_opts_t *o, size_t size, long base)
{
	if (size <= BH_SCALE_FROM || base == 0)
		return base;
	double scaled = (double)base * (double)BH_SCALE_FROM / (double)size;
	long n = (long)scaled;
	return n < o->min_iters ? (base < o->min_iters ? base : o->min_iters)
				: n;
}

/* ----------------------------------------------------- time, statistics */

uint64_t bh_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

long bh_clock_init(bh_clock_t *c, long iters, long warmup)
{
	if (iters < 1)
		iters = 1;
	c->batch = iters >= BH_BATCHES ? iters / BH_BATCHES : 1;
	c->nb = (int)(iters / c->batch);
	if (c->nb > BH_BATCHES)
		c->nb = BH_BATCHES;
	c->left = warmup + 1; /* the first stamp opens iteration `warmup` */
	c->n = 0;
	return c->batch * c->nb;
}

double bh_clock_end(bh_clock_t *c)
{
	double per[BH_BATCHES];
	c->stamp[c->n] = bh_now_ns();
	int k = c->n;
	for (int i = 0; i < k; i++)
		per[i] =
		    (double)(c->stamp[i + 1] - c->stamp[i]) / (double)c->batch;
	return bh_median(per, k);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bh_median(double *v, int n)
{
	if (n <= 0)
		return 0.0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double bh_min(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0.0;
	for (int i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

double bh_max(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0.0;
	for (int i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/* ---------------------------------------------------------- CPUs, tids */

int bh_ncpus(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof(s), &s))
		return 1;
	int n = CPU_COUNT(&s);
	return n > 0 ? n : 1;
}

int bh_pin_self(int cpu)
{
	cpu_set_t allowed, s;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return -1;
	/* The cpu-th allowed CPU, wrapping: also works on 1-CPU machines. */
	int n = CPU_COUNT(&allowed), want = cpu % (n > 0 ? n : 1), seen = 0;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &allowed))
			continue;
		if (seen++ == want) {
			CPU_ZERO(&s);
			CPU_SET(c, &s);
			return pthread_setaffinity_np(pthread_self(), sizeof(s),
						      &s)
				   ? -1
				   : 0;
		}
	}
	return -1;
}

int bh_gettid(void)
{
	return (int)syscall(SYS_gettid);
}

bool bh_thread_sleeping(int tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "tid (comm) S ...": comm may hold spaces and parentheses. */
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

/* ----------------------------------------------------------------- CSV */

static const char csv_header[] = "bench,metric,variant,wait,size,threads,"
				 "iters,reps,median,min,max,unit,note\n";

void bh_csv_begin(bh_opts_t *o)
{
	if (o->csv_path) {
		o->csv = fopen(o->csv_path, "w");
		if (!o->csv) {
			fprintf(stderr, "%s: cannot write %s: %s\n", o->bench,
				o->csv_path, strerror(errno));
			exit(1);
		}
		fputs(csv_header, o->csv);
	}
	if (!o->quiet)
		fputs(csv_header, stdout);
	bh_csv_flush(o);
}

static void put_row(FILE *f, const bh_opts_t *o, const char *metric,
		    const char *variant, const char *wait, size_t size,
		    long threads, long iters, double med, double mn, double mx,
		    int n, const char *unit, const char *note)
{
	fprintf(f, "%s,%s,%s,%s,%zu,%ld,%ld,%d,%.6g,%.6g,%.6g,%s,%s\n",
		o->bench, metric, variant, wait ? wait : "-", size, threads,
		iters, n, med, mn, mx, unit, note ? note : "");
}

static void emit(const bh_opts_t *o, const char *metric, const char *variant,
		 const char *wait, size_t size, long threads, long iters,
		 double med, double mn, double mx, int n, const char *unit,
		 const char *note)
{
	if (o->csv)
		put_row(o->csv, o, metric, variant, wait, size, threads, iters,
			med, mn, mx, n, unit, note);
	if (!o->quiet)
		put_row(stdout, o, metric, variant, wait, size, threads, iters,
			med, mn, mx, n, unit, note);
}

void bh_csv_row(const bh_opts_t *o, const char *metric, const char *variant,
		const char *wait, size_t size, long threads, long iters,
		double *v, int n, const char *unit, const char *note)
{
	double mn = bh_min(v, n), mx = bh_max(v, n);
	emit(o, metric, variant, wait, size, threads, iters, bh_median(v, n),
	     mn, mx, n, unit, note);
}

void bh_csv_flush(const bh_opts_t *o)
{
	if (o->csv)
		fflush(o->csv);
	fflush(stdout);
	fflush(stderr);
}

void bh_csv_end(bh_opts_t *o)
{
	bh_csv_flush(o);
	if (o->csv)
		fclose(o->csv);
	o->csv = NULL;
}

int bh_ratio_row(const bh_opts_t *o, const char *name, const char *wait,
		 size_t size, long threads, const double *num,
		 const double *den, int n, const char *unit, double target,
		 bool at_most, const char *what)
{
	double q[BH_MAX_LIST * 16], a[BH_MAX_LIST * 16], b[BH_MAX_LIST * 16];
	int k = 0;
	for (int i = 0; i < n && k < (int)(sizeof(q) / sizeof(q[0])); i++)
		if (den[i] > 0 && num[i] > 0) {
			a[k] = num[i];
			b[k] = den[i];
			q[k++] = num[i] / den[i];
		}
	if (k == 0)
		return -1;
	double mn = bh_min(q, k), mx = bh_max(q, k), med = bh_median(q, k);
	char note[160];
	int met = -1, len = 0;
	if (target > 0) {
		met = at_most ? med <= target : med >= target;
		len = snprintf(note, sizeof(note), "target %s %.2g: %s; ",
			       at_most ? "<=" : ">=", target,
			       met ? "met" : "missed");
	}
	/* The operands' medians, and how many pairs were usable. */
	snprintf(note + len, sizeof(note) - (size_t)len,
		 "%.4g / %.4g %s; %d of %d pairs", bh_median(a, k),
		 bh_median(b, k), unit, k, n);
	emit(o, "ratio", name, wait, size, threads, 0, med, mn, mx, k, "x",
	     note);
	fprintf(stderr, "%s: %-30s %6.2fx  [%.2f..%.2f]  %s\n%*s  %s\n",
		o->bench, name, med, mn, mx, what, (int)strlen(o->bench) + 30,
		"", note);
	return met;
}

/* ----------------------------------------------------------- baselines */

/* Two pinned threads meet at a start line, then run a side each. */
typedef struct pair {
	void *(*fn[2])(void *);
	void *arg;
	pthread_barrier_t start;
} pair_t;

typedef struct side {
	pair_t *pair;
	int who;
} side_t;

static void *side_main(void *p)
{
	side_t *s = p;
	bh_pin_self(s->who);
	pthread_barrier_wait(&s->pair->start);
	return s->pair->fn[s->who](s->pair->arg);
}

static void run_pair(void *(*a)(void *), void *(*b)(void *), void *arg)
{
	pair_t pr = {.fn = {a, b}, .arg = arg};
	side_t sd[2] = {{&pr, 0}, {&pr, 1}};
	pthread_t t[2];
	pthread_barrier_init(&pr.start, NULL, 2);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, side_main, &sd[i])) {
			fprintf(stderr, "harness: pthread_create failed\n");
			exit(1);
		}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&pr.start);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static long sys_futex(_Atomic uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)w, op | FUTEX_PRIVATE_FLAG, val,
		       NULL, NULL, 0);
}

/*
 * State of one bare ping-pong.  Each word the two sides exchange has its
 * own line; the rest is read before the loop or written after it, never
 * inside, so no other line moves between the cores while timing.
 */
typedef struct bare {
	_Alignas(BH_CACHELINE) _Atomic uint32_t shared; /* both directions */
	_Alignas(BH_CACHELINE) _Atomic uint32_t ping;	/* A -> B only */
	_Alignas(BH_CACHELINE) _Atomic uint32_t pong;	/* B -> A only */
	_Alignas(BH_CACHELINE) _Atomic uint32_t ack; /* wake test: B stamped */
	_Alignas(BH_CACHELINE) _Atomic int tid_b; /* wake test: B's kernel id */
	_Alignas(BH_CACHELINE) long total;	  /* iterations, warm-up too */
	uint64_t *t_sent, *t_woken, *t_call;	  /* wake test */
	bh_clock_t clk; /* set up before, copied by A */
	double ns;	/* A's result: per round trip */
} bare_t;

/* Shared line: odd values are pings, even values pongs. */
static void *spin_shared_a(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	bh_clock_t clk = s->clk;
	for (long i = 0; i < total; i++) {
		bh_clock_tick(&clk);
		uint32_t v = 2 * (uint32_t)i + 1;
		atomic_store_explicit(&s->shared, v, memory_order_release);
		while (atomic_load_explicit(&s->shared, memory_order_acquire) !=
		       v + 1)
			cpu_relax();
	}
	s->ns = bh_clock_end(&clk);
	return NULL;
}

static void *spin_shared_b(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	for (long i = 0; i < total; i++) {
		uint32_t v = 2 * (uint32_t)i + 1;
		while (atomic_load_explicit(&s->shared, memory_order_acquire) !=
		       v)
			cpu_relax();
		atomic_store_explicit(&s->shared, v + 1, memory_order_release);
	}
	return NULL;
}

/* A line per direction: the layout of a single-producer flag pair. */
static void *spin_line_a(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	bh_clock_t clk = s->clk;
	for (long i = 0; i < total; i++) {
		bh_clock_tick(&clk);
		uint32_t v = (uint32_t)i + 1;
		atomic_store_explicit(&s->ping, v, memory_order_release);
		while (atomic_load_explicit(&s->pong, memory_order_acquire) !=
		       v)
			cpu_relax();
	}
	s->ns = bh_clock_end(&clk);
	return NULL;
}

static void *spin_line_b(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	for (long i = 0; i < total; i++) {
		uint32_t v = (uint32_t)i + 1;
		while (atomic_load_explicit(&s->ping, memory_order_acquire) !=
		       v)
			cpu_relax();
		atomic_store_explicit(&s->pong, v, memory_order_release);
	}
	return NULL;
}

double bh_bare_spin_rtt(bh_spin_layout_t layout, long iters, long warmup)
{
	bare_t *s = aligned_alloc(BH_CACHELINE, sizeof(*s));
	memset(s, 0, sizeof(*s));
	s->total = warmup + bh_clock_init(&s->clk, iters, warmup);
	if (layout == BH_SPIN_SHARED)
		run_pair(spin_shared_a, spin_shared_b, s);
	else
		run_pair(spin_line_a, spin_line_b, s);
	double ns = s->ns;
	free(s);
	return ns;
}

/* Sleep until *w holds want (rechecking after every wake-up). */
static void futex_wait_for(_Atomic uint32_t *w, uint32_t want)
{
	uint32_t cur;
	while ((cur = atomic_load_explicit(w, memory_order_acquire)) != want)
		sys_futex(w, FUTEX_WAIT, cur);
}

static void *futex_a(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	bh_clock_t clk = s->clk;
	for (long i = 0; i < total; i++) {
		bh_clock_tick(&clk);
		uint32_t v = 2 * (uint32_t)i + 1;
		atomic_store_explicit(&s->shared, v, memory_order_release);
		sys_futex(&s->shared, FUTEX_WAKE, 1);
		futex_wait_for(&s->shared, v + 1);
	}
	s->ns = bh_clock_end(&clk);
	return NULL;
}

static void *futex_b(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	for (long i = 0; i < total; i++) {
		uint32_t v = 2 * (uint32_t)i + 1;
		futex_wait_for(&s->shared, v);
		atomic_store_explicit(&s->shared, v + 1, memory_order_release);
		sys_futex(&s->shared, FUTEX_WAKE, 1);
	}
	return NULL;
}

double bh_bare_futex_rtt(long iters, long warmup)
{
	bare_t *s = aligned_alloc(BH_CACHELINE, sizeof(*s));
	memset(s, 0, sizeof(*s));
	s->total = warmup + bh_clock_init(&s->clk, iters, warmup);
	run_pair(futex_a, futex_b, s);
	double ns = s->ns;
	free(s);
	return ns;
}

/* bh_bare_queue_rtt: one side's queue line and request line. */
typedef struct bq_queue {
	_Alignas(BH_CACHELINE) _Atomic uint32_t lock;
	uint32_t nunexp; /* read by a poster, as pcor checks its queue */
	struct bq_req *head;
} bq_queue_t;

typedef struct bq_req {
	_Alignas(BH_CACHELINE) _Atomic uint32_t state; /* even: pending */
	int32_t status, tag;
	struct bq_req *next, *prev;
	char *buf;
	size_t len;
} bq_req_t;

typedef struct bq {
	bq_queue_t q[2];
	bq_req_t r[2];
	_Alignas(BH_CACHELINE) char buf[2][BH_CACHELINE];
	_Alignas(BH_CACHELINE) long total;
	bh_clock_t clk;
	double ns;
	pthread_barrier_t start;
} bq_t;

#if defined(__x86_64__) && defined(__GNUC__)
static bool bq_have_prefetchw;

/* Once, before main: CPUID 0x80000001, ECX bit 8 (clang has no name for
 * it in __builtin_cpu_supports). */
__attribute__((constructor)) static void bq_detect(void)
{
	unsigned a, b, c, d;
	if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
		bq_have_prefetchw = (c >> 8) & 1u;
}
#endif

/* The same hint pcor uses (sync.c), where the CPU has it. */
static void bq_prefetchw(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (bq_have_prefetchw)
		__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

static void bq_lock(bq_queue_t *q)
{
	for (;;) {
		uint32_t zero = 0;
		if (atomic_compare_exchange_weak_explicit(&q->lock, &zero, 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
		cpu_relax();
	}
}

static void bq_unlock(bq_queue_t *q)
{
	atomic_exchange_explicit(&q->lock, 0, memory_order_release);
}

static void bq_post(bq_t *b, int me, uint32_t round)
{
	bq_queue_t *q = &b->q[me];
	bq_req_t *r = &b->r[me];
	bq_prefetchw(q);
	atomic_store_explicit(&r->state, 2 * round, memory_order_relaxed);
	r->status = 0;
	r->tag = 7;
	r->buf = b->buf[me];
	r->len = 8;
	r->next = r->prev = NULL;
	bq_lock(q);
	if (q->nunexp == 0)
		q->head = r;
	bq_unlock(q);
}

static void bq_send(bq_t *b, int peer)
{
	static const char msg[8] = "8 bytes";
	bq_queue_t *q = &b->q[peer];
	bq_prefetchw(q);
	bq_req_t *r;
	for (;;) { /* the peer posts before it could be sent to */
		bq_lock(q);
		if ((r = q->head))
			break;
		bq_unlock(q);
		cpu_relax();
	}
	bq_prefetchw(r);
	if (r->tag != 7 || r->len < sizeof(msg))
		abort();
	q->head = r->next;
	r->next = r->prev = r;
	memcpy(r->buf, msg, sizeof(msg));
	r->status = 0;
	atomic_exchange_explicit(&r->state, 1, memory_order_acq_rel);
	bq_unlock(q);
}

static void bq_wait(bq_req_t *r)
{
	while (atomic_load_explicit(&r->state, memory_order_acquire) != 1)
		cpu_relax();
	bq_prefetchw(r);
}

static void *bq_side(bq_t *b, int me)
{
	const long total = b->total;
	bh_clock_t clk = b->clk;
	pthread_barrier_wait(&b->start);
	if (me == 1)
		bq_post(b, 1, 1);
	for (long i = 0; i < total; i++) {
		uint32_t round = (uint32_t)i + 1;
		if (me == 0) {
			bh_clock_tick(&clk);
			bq_post(b, 0, round);
			bq_send(b, 1);
			bq_wait(&b->r[0]);
		} else {
			bq_wait(&b->r[1]);
			if (i + 1 < total)
				bq_post(b, 1, round + 1);
			bq_send(b, 0);
		}
	}
	if (me == 0)
		b->ns = bh_clock_end(&clk);
	return NULL;
}

static void *bq_a(void *p)
{
	return bq_side(p, 0);
}

static void *bq_b(void *p)
{
	return bq_side(p, 1);
}

double bh_bare_queue_rtt(long iters, long warmup)
{
	bq_t *b = aligned_alloc(BH_CACHELINE, sizeof(*b));
	memset(b, 0, sizeof(*b));
	b->total = warmup + bh_clock_init(&b->clk, iters, warmup);
	/* Both sides set up: B's first post must not race A's first send. */
	pthread_barrier_init(&b->start, NULL, 2);
	run_pair(bq_a, bq_b, b);
	pthread_barrier_destroy(&b->start);
	double ns = b->ns;
	free(b);
	return ns;
}

/* Wake test, waker: wait until B sleeps, then stamp, store and wake. */
static void *wake_a(void *p)
{
	bare_t *s = p;
	int tid;
	while ((tid = atomic_load(&s->tid_b)) == 0)
		sched_yield();
	const long total = s->total;
	for (long i = 0; i < total; i++) {
		while (atomic_load_explicit(&s->ack, memory_order_acquire) !=
		       (uint32_t)i)
			sched_yield();
		while (!bh_thread_sleeping(tid))
			sched_yield();
		uint64_t t0 = bh_now_ns();
		atomic_store_explicit(&s->shared, (uint32_t)i + 1,
				      memory_order_release);
		sys_futex(&s->shared, FUTEX_WAKE, 1);
		uint64_t t1 = bh_now_ns();
		s->t_sent[i] = t0;
		s->t_call[i] = t1 - t0;
	}
	return NULL;
}

static void *wake_b(void *p)
{
	bare_t *s = p;
	const long total = s->total;
	for (long i = 0; i < total; i++) {
		futex_wait_for(&s->shared, (uint32_t)i + 1);
		s->t_woken[i] = bh_now_ns();
		atomic_store_explicit(&s->ack, (uint32_t)i + 1,
				      memory_order_release);
	}
	return NULL;
}

static void *wake_b_start(void *p)
{
	bare_t *s = p;
	atomic_store(&s->tid_b, bh_gettid());
	return wake_b(p);
}

double bh_bare_futex_wake(long iters, double *send_ns_p)
{
	bare_t *s = aligned_alloc(BH_CACHELINE, sizeof(*s));
	memset(s, 0, sizeof(*s));
	s->total = iters;
	s->t_sent = calloc((size_t)iters, sizeof(uint64_t));
	s->t_woken = calloc((size_t)iters, sizeof(uint64_t));
	s->t_call = calloc((size_t)iters, sizeof(uint64_t));
	double *lat = calloc((size_t)iters, sizeof(double));
	double *call = calloc((size_t)iters, sizeof(double));
	if (!s->t_sent || !s->t_woken || !s->t_call || !lat || !call) {
		fprintf(stderr, "harness: out of memory\n");
		exit(1);
	}
	run_pair(wake_a, wake_b_start, s);
	for (long i = 0; i < iters; i++) {
		lat[i] = (double)(s->t_woken[i] - s->t_sent[i]);
		call[i] = (double)s->t_call[i];
	}
	double med = bh_median(lat, (int)iters);
	if (send_ns_p)
		*send_ns_p = bh_median(call, (int)iters);
	free(lat);
	free(call);
	free(s->t_sent);
	free(s->t_woken);
	free(s->t_call);
	free(s);
	return med;
}

/* memcpy on one pinned thread. */
typedef struct copyjob {
	size_t size;
	long iters, warmup;
	double ns;
} copyjob_t;

static void *copy_main(void *p)
{
	copyjob_t *j = p;
	bh_pin_self(0);
	size_t cap = j->size ? j->size : 1;
	char *src = aligned_alloc(BH_CACHELINE, (cap + 63) & ~(size_t)63);
	char *dst = aligned_alloc(BH_CACHELINE, (cap + 63) & ~(size_t)63);
	if (!src || !dst) {
		fprintf(stderr, "harness: out of memory\n");
		exit(1);
	}
	memset(src, 0x5a, cap);
	memset(dst, 0, cap);
	bh_clock_t clk;
	long total = j->warmup + bh_clock_init(&clk, j->iters, j->warmup);
	for (long i = 0; i < total; i++) {
		bh_clock_tick(&clk);
		memcpy(dst, src, j->size);
		/* The copy must happen: dst escapes, memory is clobbered. */
		__asm__ __volatile__("" : : "r"(dst) : "memory");
	}
	j->ns = bh_clock_end(&clk);
	free(src);
	free(dst);
	return NULL;
}

double bh_memcpy_ns(size_t size, long iters, long warmup)
{
	copyjob_t j = {.size = size, .iters = iters, .warmup = warmup};
	pthread_t t;
	if (pthread_create(&t, NULL, copy_main, &j)) {
		fprintf(stderr, "harness: pthread_create failed\n");
		exit(1);
	}
	pthread_join(t, NULL);
	return j.ns;
}
