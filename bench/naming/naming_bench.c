/*
 * naming_bench -- costs of the directory service.
 *
 *   naming_bench bootstrap        print this process's wall-clock time
 *                                 right after pcor_init (run it under
 *                                 pcorrun; naming_bench.sh does the sums)
 *   naming_bench lookup [REPS]    pid 0: uncached and cached pid lookups
 *                                 and name lookups, in microseconds
 *   naming_bench memory [NAMES]   alone: heap bytes per published name
 *                                 held by the agent, and entry sizes
 * Output is one "key value" pair per line, for the script.
 */
#include "naming/naming_priv.h"

#include <malloc.h>
#include <time.h>

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void must(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "naming_bench: %s: %s\n", what,
			pcor_strerror(rc));
		exit(1);
	}
}

/* Everyone publishes, then waits for everyone (or their normal exit). */
static void barrier(const char *tag, int me, int n)
{
	char name[32];
	snprintf(name, sizeof(name), "%s/%d", tag, me);
	must(pcor_name_publish(name, me, 0), "publish");
	for (int q = 0; q < n; q++) {
		snprintf(name, sizeof(name), "%s/%d", tag, q);
		int pid, thid, rc = PCOR_ERR_TIMEDOUT;
		for (int t = 0; t < 600 && rc; t++) {
			rc = pcor_name_lookup(name, 100000000, &pid, &thid);
			pcor_proc_info_t pi;
			if (rc && pcor_proc_info(q, &pi) == PCOR_ERR_PEER_LOST &&
			    pi.state == PCOR_PROC_EXITED)
				rc = PCOR_OK;
		}
		must(rc, "barrier");
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: naming_bench bootstrap|lookup|memory "
				"[count]\n");
		return 2;
	}
	const char *what = argv[1];
	long count = argc > 2 ? atol(argv[2]) : 0;
	size_t heap0 = mallinfo2().uordblks;
	must(pcor_init(&argc, &argv), "pcor_init");
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int me = pcor_self_pid(), n = pcor_nprocs();
	if (!strcmp(what, "bootstrap")) {
		printf("init_done_ns %lld\n",
		       (long long)rt.tv_sec * 1000000000LL + rt.tv_nsec);
		barrier("bench", me, n);
	} else if (!strcmp(what, "lookup")) {
		long reps = count > 0 ? count : 2000;
		barrier("bench", me, n);
		if (me == 0 && n > 1) {
			pcori_member_t m;
			int64_t unc = 0, cached = 0;
			for (long i = 0; i < reps; i++) {
				int q = 1 + (int)(i % (n - 1));
				pcori_dir_cache_flush();
				int64_t t = mono_ns();
				must(pcori_dir_lookup(q, &m), "lookup");
				unc += mono_ns() - t;
				t = mono_ns();
				must(pcori_dir_lookup(q, &m), "lookup");
				cached += mono_ns() - t;
			}
			int64_t t = mono_ns();
			for (long i = 0; i < reps; i++) {
				char name[32];
				int pid, thid;
				snprintf(name, sizeof(name), "bench/%d",
					 (int)(i % n));
				must(pcor_name_lookup(name, 0, &pid, &thid),
				     "name lookup");
			}
			int64_t names = mono_ns() - t;
			printf("pid_lookup_uncached_us %.2f\n",
			       (double)unc / (double)reps / 1e3);
			printf("pid_lookup_cached_us %.3f\n",
			       (double)cached / (double)reps / 1e3);
			printf("name_lookup_us %.2f\n",
			       (double)names / (double)reps / 1e3);
		}
		barrier("end", me, n); /* keep homes up until pid 0 is done */
	} else if (!strcmp(what, "memory")) {
		long k = count > 0 ? count : 100000;
		size_t before = mallinfo2().uordblks;
		for (long i = 0; i < k; i++) {
			char name[32];
			snprintf(name, sizeof(name), "svc/%ld", i);
			must(pcor_name_publish(name, me, 0), "publish");
		}
		size_t after = mallinfo2().uordblks;
		/* Half of it is this process's own record of what it owns. */
		printf("names %ld\n", k);
		printf("bytes_per_name_total %.1f\n",
		       (double)(after - before) / (double)k);
		printf("sizeof_home_name %zu\n", sizeof(pcori_hname_t));
		printf("sizeof_owner_name %zu\n", sizeof(pcori_myname_t));
		printf("sizeof_home_member %zu\n", sizeof(pcori_hmember_t));
		printf("sizeof_view_entry %zu\n", sizeof(pcori_view_t));
		printf("heap_after_init %zu\n", before - heap0);
	}
	must(pcor_finalize(), "pcor_finalize");
	return 0;
}
