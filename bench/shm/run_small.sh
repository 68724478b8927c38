#!/usr/bin/env bash
# run_small.sh -- small messages between two processes of one host: pcor
# over pcor-shm (no PCOR_* knob set, then each dispatcher mode) next to
# Open MPI (vader) and MPICH running bench/shm/mpi_p2p.c (as they are,
# and with MPI_THREAD_MULTIPLE, "-mt": the service pcor always gives;
# their bandwidth also with buffers in huge pages, "-huge", as pcor's
# DMA blocks of 64 KiB and more are)
# and, when a copy of the OSU micro-benchmarks is at hand, OSU's
# osu_latency, osu_bw and osu_mbw_mr, and the bare two-process
# references (bench/shm/futex_pp.c), all in one run, interleaved: every
# repetition runs every configuration once, in turn.
#
#   bench/shm/run_small.sh [--smoke] [BUILD_DIR]
#
# Measures 1-8 B one-way latency (mean, median and 99th percentile of
# the round trips, halved), 1 B message rate (window 64) and 64 KiB-4 MiB
# bandwidth; per message, pcor's frames, standalone acks and dispatcher
# CPU time (PCOR_STATS), context switches per round trip (pcor_lat) and
# the futex calls (strace -c, one extra short run per mode).  Prints the
# summary tables (median, min, max over repetitions, run-to-run max/min;
# per configuration and size the median over repetitions of each run's
# mean, median and p99 latency) and the ratios the fast-path targets
# name; writes raw.csv, summary.md and small.png to OUT.
#
# Environment: REPS (default 10), SCRATCH, OUT, and OSU_SRC: a directory
# holding an unpacked OSU micro-benchmarks source tree (any version whose
# layout has a pt2pt directory with osu_latency.c).  The script fetches
# nothing: with OSU_SRC it builds osu_latency, osu_bw and osu_mbw_mr
# into SCRATCH with mpicc.openmpi and mpicc.mpich (configure and make,
# out of the source tree; failing that, compiling the files directly)
# and runs them as osu-ompi-vader and osu-mpich; without it only
# mpi_p2p.c stands for the MPIs.  --smoke: pcor only, tiny.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "${1:-build}" && pwd)
SCRATCH=${SCRATCH:-$(dirname "$(mktemp -u)")/pcor-small-bench}
OUT=${OUT:-$SCRATCH/out}
REPS=${REPS:-10}
mkdir -p "$SCRATCH" "$OUT"
raw=$SCRATCH/raw.csv stats=$SCRATCH/stats.csv
pcorrun=$build/tools/pcorrun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No PCOR_* knob from the caller's environment: the default is measured.
pcor_knobs_unset

if [ $smoke = 1 ]; then
	REPS=1
	LAT="-m 1:8 -i 200 -x 20" MR="-i 20 -x 2" BW="-m 64k:256k -i 5 -x 1"
	FUT="-i 2000 -x 100"
else
	LAT="-m 1:8 -i 20000 -x 1000" MR="-i 2000 -x 200" BW="-m 64k:4m"
	FUT="-i 200000 -x 1000"
fi
# OSU's flags for the same sizes, counts and window (as mpi_p2p's bw:
# 20 iterations of 2 warm-up above 8 KiB); sizes MIN MAX for the parser.
OSU_LAT="-m 1:8 -i 20000 -x 1000" OSU_LAT_SIZES="1 8"
OSU_BW="-m 65536:4194304 -i 20 -x 2 -W 64" OSU_BW_SIZES="65536 4194304"
OSU_MR="-m 1:1 -i 2000 -x 200 -W 64" OSU_MR_SIZES="1 1"

echo "load: $(uptime)"

# pcor LABEL REP [VAR=VALUE...]: the three benchmarks, counters kept.
pcor() {
	local label=$1 rep=$2 b; shift 2
	for b in "pcor_lat $LAT" "pcor_mr $MR" "pcor_bw $BW"; do
		env PCOR_STATS=1 "$@" timeout 300 "$pcorrun" -n 2 \
			$build/bench/$b -t "$label" 2>"$SCRATCH/err" |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label: $b failed" >&2
		sed -n "s/^pcor-stats,/${label},${b%% *},/p" "$SCRATCH/err" >>"$stats"
	done
}

# build_osu IMPL -> the directory where osu_latency, osu_bw and
# osu_mbw_mr were built from OSU_SRC with that MPI (log: SCRATCH/osu.IMPL.log)
build_osu() {
	local impl=$1 top=$SCRATCH/osu.$1 log=$SCRATCH/osu.$1.log rel util b f
	local cxx=()
	command -v "mpicc.$impl" >/dev/null || return 1
	rel=$(cd "$OSU_SRC" && find . -path '*pt2pt*' -name osu_latency.c | head -n 1)
	[ -n "$rel" ] || return 1
	rel=${rel%/osu_latency.c}
	rel=${rel#./}
	command -v "mpicxx.$impl" >/dev/null && cxx=("CXX=mpicxx.$impl")
	rm -rf "$top"
	mkdir -p "$top"
	if (cd "$top" && "$OSU_SRC/configure" "CC=mpicc.$impl" "${cxx[@]}" &&
		make -C "$rel" osu_latency osu_bw osu_mbw_mr) >"$log" 2>&1; then
		echo "$top/$rel"
		return 0
	fi
	# A source tree configured in place refuses builds elsewhere: compile
	# each program with the helpers its version has (osu_util*.c in
	# util/, or osu_pt2pt.c beside it), or alone.
	echo "osu ($impl): configure and make failed, compiling directly" >&2
	util=$(cd "$OSU_SRC" && find . -name osu_util.c | head -n 1)
	util=$OSU_SRC/${util%/osu_util.c}
	local extra=()
	for f in "$util"/osu_util.c "$util"/osu_util_mpi.c \
		"$util"/osu_util_graph.c "$util"/osu_util_papi.c \
		"$OSU_SRC/$rel/osu_pt2pt.c"; do
		[ -f "$f" ] && extra+=("$f")
	done
	mkdir -p "$top/direct"
	for b in osu_latency osu_bw osu_mbw_mr; do
		f=("-O2" "-DFIELD_WIDTH=18" "-DFLOAT_PRECISION=2" "-I$util"
		   "-I$OSU_SRC/$rel" -o "$top/direct/$b" "$OSU_SRC/$rel/$b.c")
		"mpicc.$impl" "${f[@]}" "${extra[@]}" -lm >>"$log" 2>&1 ||
			"mpicc.$impl" "${f[@]}" -lm >>"$log" 2>&1 || return 1
	done
	echo "$top/direct"
}

# osu_knows NAME: OSU_SRC's options have the long name NAME.
osu_knows() {
	grep -rqs --include='*.[ch]' -e "\"$1\"" "$OSU_SRC"
}

# osu_flags FLAGS -> osu_args: FLAGS without what the OSU at hand does
# not know (before 5.4 or so: no -m, every size is run; no -W, the
# window is 64).
osu_flags() {
	local skip=0 x
	osu_args=()
	for x in $1; do
		if [ $skip = 1 ]; then skip=0; continue; fi
		case $x in
		-m) [ "$osu_m" = 1 ] || { skip=1; continue; } ;;
		-W) [ "$osu_w" = 1 ] || { skip=1; continue; } ;;
		esac
		osu_args+=("$x")
	done
}

osu() { # LABEL LAUNCHER DIR REP
	local label=$1 launcher=$2 dir=$3 rep=$4 k b flags sizes
	[ -n "$dir" ] || return 0
	for k in lat bw mr; do
		case $k in
		lat) b=osu_latency flags="$OSU_LAT $osu_z" sizes=$OSU_LAT_SIZES ;;
		bw) b=osu_bw flags=$OSU_BW sizes=$OSU_BW_SIZES ;;
		mr) b=osu_mbw_mr flags=$OSU_MR sizes=$OSU_MR_SIZES ;;
		esac
		osu_flags "$flags"
		timeout 300 $launcher "$dir/$b" "${osu_args[@]}" 2>/dev/null |
			python3 "$here/osu_csv.py" $k "$label" "$rep" $sizes >>"$raw" ||
			echo "$label: $b failed" >&2
	done
}

# mpi_bw_huge LABEL LAUNCHER EXE REP: bandwidth with the MPI's buffers in
# huge pages (-H), as pcor's DMA blocks of 64 KiB and more are: what the
# page size alone is worth to a cross-memory read.
mpi_bw_huge() {
	local label=$1 launcher=$2 exe=$3 rep=$4
	[ -n "$exe" ] || return 0
	timeout 300 $launcher "$exe" bw -H $BW -t "$label" 2>/dev/null |
		sed "s/\$/,$rep/" >>"$raw" || echo "$label: bw failed" >&2
}

mpi() { # LABEL LAUNCHER EXE REP [-T]
	local label=$1 launcher=$2 exe=$3 rep=$4 t=${5:-} b
	[ -n "$exe" ] || return 0
	for b in "lat $t $LAT" "mr $t $MR" "bw $t $BW"; do
		timeout 300 $launcher "$exe" $b -t "$label" 2>/dev/null |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label: $b failed" >&2
	done
}

: >"$raw"
: >"$stats"
MPI_OMPI='' MPI_MPICH='' OSU_OMPI='' OSU_MPICH=''
OMPI="mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl self,vader"
MPICH="mpiexec.mpich -n 2 -bind-to core"
if [ $smoke = 0 ]; then
	MPI_OMPI=$(mpi_p2p_build openmpi "$SCRATCH") || echo "no Open MPI: left out" >&2
	MPI_MPICH=$(mpi_p2p_build mpich "$SCRATCH") || echo "no MPICH: left out" >&2
	if [ -n "${OSU_SRC:-}" ] && [ -d "$OSU_SRC" ]; then
		OSU_SRC=$(cd "$OSU_SRC" && pwd)
		# -z: tail latencies (P50, P90, P99 of the halved round trips).
		osu_m=0 osu_w=0 osu_z=''
		osu_knows message-size && osu_m=1
		osu_knows window-size && osu_w=1
		osu_knows tail-lat && osu_z=-z
		[ -n "$osu_z" ] || echo "OSU without -z: its p50/p99 left out" >&2
		echo "OSU: building from $OSU_SRC" >&2
		[ -z "$MPI_OMPI" ] || OSU_OMPI=$(build_osu openmpi) ||
			echo "OSU with Open MPI failed to build (see $SCRATCH/osu.openmpi.log): left out" >&2
		[ -z "$MPI_MPICH" ] || OSU_MPICH=$(build_osu mpich) ||
			echo "OSU with MPICH failed to build (see $SCRATCH/osu.mpich.log): left out" >&2
	else
		echo "OSU not present: using bench/shm/mpi_p2p.c"
	fi
fi
for rep in $(seq "$REPS"); do
	[ $smoke = 1 ] || echo "== repetition $rep of $REPS" >&2
	pcor pcor-default "$rep"
	pcor pcor-poll "$rep" PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=poll
	pcor pcor-block "$rep" PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=block
	pcor pcor-block-nospin "$rep" PCOR_PROVIDERS=pcor-shm \
		PCOR_DISPATCH=block PCOR_SPIN_NS=0
	mpi ompi-vader "$OMPI" "$MPI_OMPI" "$rep"
	mpi ompi-vader-mt "$OMPI" "$MPI_OMPI" "$rep" -T
	mpi_bw_huge ompi-vader-huge "$OMPI" "$MPI_OMPI" "$rep"
	osu osu-ompi-vader "$OMPI" "$OSU_OMPI" "$rep"
	mpi mpich "$MPICH" "$MPI_MPICH" "$rep"
	mpi mpich-mt "$MPICH" "$MPI_MPICH" "$rep" -T
	mpi_bw_huge mpich-huge "$MPICH" "$MPI_MPICH" "$rep"
	osu osu-mpich "$MPICH" "$OSU_MPICH" "$rep"
	for k in spin futex; do
		"$build/bench/futex_pp" $k $FUT | sed "s/\$/,$rep/" >>"$raw"
	done
done

# Futex calls per message, one short traced run per mode.
sys=$SCRATCH/syscalls.csv
: >"$sys"
if [ $smoke = 0 ] && command -v strace >/dev/null; then
	for m in "default" "poll PCOR_DISPATCH=poll" "block PCOR_DISPATCH=block" \
		 "block-nospin PCOR_DISPATCH=block PCOR_SPIN_NS=0"; do
		set -- $m
		name=$1; shift
		env "$@" timeout 120 strace -f -c -o "$SCRATCH/strace" "$pcorrun" -n 2 \
			"$build/bench/pcor_lat" -m 8:8 -i 20000 -x 10 >/dev/null 2>&1 || true
		awk -v n="$name" '$NF == "futex" {print "futex," n "," $4}' \
			"$SCRATCH/strace" >>"$sys"
	done
fi

python3 - "$raw" "$stats" "$sys" "$OUT" "$smoke" <<'PY'
import csv, statistics, sys
raw, stats, sysf, out, smoke = sys.argv[1:6]
runs = {}
for r in csv.reader(open(raw)):
    if len(r) < 6: continue
    bench, label, size, val = r[0], r[1], int(r[2]), float(r[3])
    # mpi_p2p and pcor labels may carry their transport after a slash
    label = label.split('/')[0]
    runs.setdefault((bench, label, size), []).append(val)
if smoke == '1':
    want = {('latency', 'pcor-default'), ('lat-p50', 'pcor-default'),
            ('lat-p99', 'pcor-default'), ('rate', 'pcor-default'),
            ('bw', 'pcor-default'), ('latency', 'bare-futex')}
    have = {(b, l) for (b, l, s) in runs}
    missing = want - have
    if missing:
        sys.exit('small bench smoke: missing ' + str(sorted(missing)))
    print('small bench smoke: ok')
    sys.exit(0)
def med(k): return statistics.median(runs[k]) if k in runs else None
lines = ['| bench | config | size | median | min | max | max/min |',
         '|---|---|---:|---:|---:|---:|---:|']
for k in sorted(runs):
    v = runs[k]
    lines.append('| %s | %s | %d | %.3f | %.3f | %.3f | %.2f |' % (
        k[0], k[1], k[2], statistics.median(v), min(v), max(v),
        max(v) / min(v) if min(v) > 0 else 0))
def ratio(a, b):
    return '%.2f' % (a / b) if a and b else 'n/a'
def num(v):
    return 'n/a' if v is None else '%.3f' % v if v < 1000 else '%.0f' % v
def cell(k):
    v = med(k)
    return '–' if v is None else '%.3f' % v
# One-way latency per configuration: the median over repetitions of each
# run's mean, median (p50) and 99th percentile of the halved round trips,
# and of its stalls (round trips of 20 us or more, per 100,000) and what
# they add to the mean (ns one way; the programs that print them).
def cell1(k):
    v = med(k)
    return '–' if v is None else '%.1f' % v
lines += ['', '| one-way latency (us) | size | mean | p50 | p99 | stalls /100k | stall cost (ns) | runs |',
          '|---|---:|---:|---:|---:|---:|---:|---:|']
for (b, cfg, size) in sorted(k for k in runs if k[0] == 'latency'):
    lines.append('| %s | %d | %s | %s | %s | %s | %s | %d |' % (
        cfg, size, cell(('latency', cfg, size)), cell(('lat-p50', cfg, size)),
        cell(('lat-p99', cfg, size)), cell1(('stalls', cfg, size)),
        cell1(('stall-cost', cfg, size)), len(runs[('latency', cfg, size)])))
mpis = [m for m in ('ompi-vader', 'osu-ompi-vader')
        if any(k[0] == 'latency' and k[1] == m for k in runs)] or ['ompi-vader']
lines += ['', '| target | pcor | reference | ratio |', '|---|---:|---:|---:|']
for size in (1, 2, 4, 8):
    for cfg in ('pcor-default', 'pcor-poll'):
        for m in mpis:
            p, v = med(('latency', cfg, size)), med(('latency', m, size))
            lines.append('| %d B one way, %s / %s | %s | %s | %s |' % (
                size, cfg, m, num(p), num(v), ratio(p, v)))
for cfg in ('pcor-default', 'pcor-poll'):
    for m in mpis:
        p, v = med(('lat-p99', cfg, 8)), med(('lat-p99', m, 8))
        if p is not None and v is not None:
            lines.append('| 8 B one way p99, %s / %s | %s | %s | %s |' % (
                cfg, m, num(p), num(v), ratio(p, v)))
# Thread safety: pcor always is; the MPIs with MPI_THREAD_MULTIPLE (-T).
for size in (1, 8):
    for m in ('ompi-vader-mt', 'mpich-mt'):
        p, v = med(('latency', 'pcor-default', size)), med(('latency', m, size))
        if v is not None:
            lines.append('| %d B one way, pcor-default / %s (thread multiple) | %s | %s | %s |' % (
                size, m, num(p), num(v), ratio(p, v)))
# Within each repetition (interleaved, so the same machine state), the
# ratio to vader; and how much the bare line transfer itself moved
# between repetitions: the machine's own run-to-run spread.
def by_rep(bench, cfg, size):
    return {int(r[-1]): float(r[3]) for r in csv.reader(open(raw))
            if len(r) >= 6 and r[0] == bench and r[1].split('/')[0] == cfg
            and int(r[2]) == size}
pd, vd = by_rep('latency', 'pcor-default', 8), by_rep('latency', 'ompi-vader', 8)
per = [pd[i] / vd[i] for i in pd if i in vd and vd[i] > 0]
if per:
    lines.append('| 8 B one way, pcor-default / ompi-vader per repetition: median [min-max] | %.2f | | [%.2f-%.2f] |' % (
        statistics.median(per), min(per), max(per)))
# The same within the repetitions whose bare spin ping-pong was in the
# machine's fast mode (under twice the fastest): this guest sometimes
# runs every line transfer four times slower for seconds or minutes.
sd = by_rep('latency', 'bare-spin', 8)
fast = {i for i, v in sd.items() if sd and v < 2 * min(sd.values())}
for bench, size, m in (('latency', 8, 'ompi-vader'), ('latency', 8, 'mpich'),
                       ('rate', 1, 'ompi-vader')):
    pd, vd = by_rep(bench, 'pcor-default', size), by_rep(bench, m, size)
    per = [pd[i] / vd[i] for i in sorted(fast) if i in pd and vd.get(i)]
    if per:
        lines.append('| %d B %s, pcor-default / %s, the %d fast-mode repetitions: median [min-max] | %.2f | | [%.2f-%.2f] |' % (
            size, 'one way' if bench == 'latency' else 'rate', m, len(per),
            statistics.median(per), min(per), max(per)))
for cfg in ('pcor-default', 'ompi-vader', 'bare-spin'):
    v = runs.get(('latency', cfg, 8))
    if v and min(v) > 0:
        lines.append('| 8 B one way run-to-run max/min, %s | %.2f | | |' % (cfg, max(v) / min(v)))
    # Without the machine's slow spells: what is left is the library's.
    d = by_rep('latency', cfg, 8)
    v = [d[i] for i in sorted(fast) if d.get(i)]
    if len(v) > 1:
        lines.append('| 8 B one way run-to-run max/min, %s, the %d fast-mode repetitions | %.2f | | |' % (
            cfg, len(v), max(v) / min(v)))
p, f = med(('latency', 'pcor-block-nospin', 8)), med(('latency', 'bare-futex', 8))
lines.append('| 8 B block (PCOR_SPIN_NS=0) / bare futex | %s | %s | %s |' % (num(p), num(f), ratio(p, f)))
p, f = med(('latency', 'pcor-block', 8)), med(('latency', 'bare-futex', 8))
lines.append('| 8 B block (default spin) / bare futex | %s | %s | %s |' % (num(p), num(f), ratio(p, f)))
for cfg in ('pcor-default', 'pcor-poll', 'pcor-block'):
    c = med(('ctxsw', cfg, 8))
    if c is not None:
        lines.append('| 8 B, %s: context switches per round trip (pid 0, all threads) | %.4f | | |' % (cfg, c))
for m in ('ompi-vader', 'osu-ompi-vader'):
    p, v = med(('rate', 'pcor-default', 1)), med(('rate', m, 1))
    if m == 'ompi-vader' or v is not None:
        lines.append('| 1 B rate, pcor / %s (higher is better) | %s | %s | %s |' % (m, num(p), num(v), ratio(p, v)))
for size in (65536, 262144, 1048576, 4194304):
    p = med(('bw', 'pcor-default', size))
    best = max([x for x in (med(('bw', m, size)) for m in
                            ('ompi-vader', 'mpich', 'osu-ompi-vader', 'osu-mpich')) if x] or [0])
    lines.append('| %d B bandwidth, pcor / better MPI | %s | %s | %s |' % (size, num(p), num(best or None), ratio(p, best)))
    huge = max([x for x in (med(('bw', m, size)) for m in
                            ('ompi-vader-huge', 'mpich-huge')) if x] or [0])
    if huge:
        lines.append('| %d B bandwidth, pcor / better MPI with huge-page buffers | %s | %s | %s |' % (size, num(p), num(huge), ratio(p, huge)))
# counters per message
lines += ['', '| config | bench | frames/msg | standalone acks/msg | dispatcher CPU us/msg |', '|---|---|---:|---:|---:|']
acc = {}
for r in csv.reader(open(stats)):
    kv = dict(x.split('=', 1) for x in r[2:] if '=' in x)
    a = acc.setdefault((r[0], r[1]), [0, 0, 0])
    a[0] += int(kv.get('tx', 0)); a[1] += int(kv.get('acks', 0))
    a[2] += int(kv.get('dispatcher_cpu_ns', 0))
for (cfg, b), (tx, acks, cpu) in sorted(acc.items()):
    if tx:
        lines.append('| %s | %s | 1 | %.4f | %.3f |' % (cfg, b, acks / tx, cpu / tx / 1e3))
for r in csv.reader(open(sysf)):
    lines.append('| %s | pcor_lat 8 B | futex calls/msg: %.2f | | |' % (r[1], int(r[2]) / 40000.0))
open(out + '/summary.md', 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
# One data block per configuration measured, its name in latency.names.
cfgs = [c for c in ('pcor-default', 'pcor-poll', 'pcor-block', 'ompi-vader',
                    'ompi-vader-mt', 'mpich', 'mpich-mt', 'osu-ompi-vader',
                    'osu-mpich')
        if any(('latency', c, s) in runs for s in (1, 2, 4, 8))]
open(out + '/latency.names', 'w').write(' '.join(cfgs) + '\n')
with open(out + '/latency.dat', 'w') as f:
    for cfg in cfgs:
        for size in (1, 2, 4, 8):
            k = ('latency', cfg, size)
            if k in runs:
                f.write('%s %d %.3f %.3f %.3f\n' % (cfg, size, med(k), min(runs[k]), max(runs[k])))
        f.write('\n\n')
PY
[ $smoke = 1 ] && exit 0
if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal pngcairo size 800,480
set output "$OUT/small.png"
set title "one-way latency, 2 processes on one host (median, min-max over $REPS runs)"
set xlabel "message size (bytes)"; set ylabel "us"; set logscale x 2
set key top left
names = system("cat '$OUT/latency.names'")
plot for [i=0:words(names)-1] "$OUT/latency.dat" index i using 2:3:4:5 with yerrorlines title word(names, i+1)
GP
fi
echo "summary: $OUT/summary.md; plot: $OUT/small.png" >&2
