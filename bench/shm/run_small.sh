#!/usr/bin/env bash
# run_small.sh -- small messages between two processes of one host: pcor
# over pcor-shm (no PCOR_* knob set, then each dispatcher mode) next to
# Open MPI (vader) and MPICH running bench/shm/mpi_p2p.c, and the bare
# two-process references (bench/shm/futex_pp.c), all in one run,
# interleaved: every repetition runs every configuration once, in turn.
#
#   bench/shm/run_small.sh [--smoke] [BUILD_DIR]
#
# Measures 1-8 B one-way latency, 1 B message rate (window 64) and
# 64 KiB-4 MiB bandwidth; per message, pcor's frames, standalone acks and
# dispatcher CPU time (PCOR_STATS), context switches per round trip
# (pcor_lat) and the futex calls (strace -c, one extra short run per mode).  Prints the summary table (median, min, max
# over repetitions, run-to-run max/min) and the ratios the fast-path
# targets name; writes raw.csv, summary.md and small.png to OUT.
# Environment: REPS (default 10), SCRATCH, OUT.  --smoke: pcor only, tiny.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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
for v in $(env | sed -n 's/^\(PCOR_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

if [ $smoke = 1 ]; then
	REPS=1
	LAT="-m 1:8 -i 200 -x 20" MR="-i 20 -x 2" BW="-m 64k:256k -i 5 -x 1"
	FUT="-i 2000 -x 100"
else
	LAT="-m 1:8 -i 20000 -x 1000" MR="-i 2000 -x 200" BW="-m 64k:4m"
	FUT="-i 200000 -x 1000"
fi
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

build_mpi() { # IMPL -> the path of mpi_p2p built with that MPI
	local exe=$SCRATCH/mpi_p2p.$1
	command -v "mpicc.$1" >/dev/null || return 1
	"mpicc.$1" -O2 -std=c11 -o "$exe" "$here/mpi_p2p.c" || return 1
	echo "$exe"
}

mpi() { # LABEL LAUNCHER EXE REP
	local label=$1 launcher=$2 exe=$3 rep=$4 b
	[ -n "$exe" ] || return 0
	for b in "lat $LAT" "mr $MR" "bw $BW"; do
		timeout 300 $launcher "$exe" $b -t "$label" 2>/dev/null |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label: $b failed" >&2
	done
}

: >"$raw"
: >"$stats"
MPI_OMPI= MPI_MPICH=
if [ $smoke = 0 ]; then
	MPI_OMPI=$(build_mpi openmpi) || echo "no Open MPI: left out" >&2
	MPI_MPICH=$(build_mpi mpich) || echo "no MPICH: left out" >&2
fi
for rep in $(seq "$REPS"); do
	[ $smoke = 1 ] || echo "== repetition $rep of $REPS" >&2
	pcor pcor-default "$rep"
	pcor pcor-poll "$rep" PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=poll
	pcor pcor-block "$rep" PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=block
	pcor pcor-block-nospin "$rep" PCOR_PROVIDERS=pcor-shm \
		PCOR_DISPATCH=block PCOR_SPIN_NS=0
	mpi ompi-vader "mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl self,vader" \
		"$MPI_OMPI" "$rep"
	mpi mpich "mpiexec.mpich -n 2 -bind-to core" "$MPI_MPICH" "$rep"
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
    # mpi_p2p and pcor labels carry their transport after a slash
    label = label.split('/')[0]
    runs.setdefault((bench, label, size), []).append(val)
if smoke == '1':
    want = {('latency', 'pcor-default'), ('rate', 'pcor-default'),
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
lines += ['', '| target | pcor | reference | ratio |', '|---|---:|---:|---:|']
for size in (1, 2, 4, 8):
    for cfg in ('pcor-default', 'pcor-poll'):
        p, v = med(('latency', cfg, size)), med(('latency', 'ompi-vader', size))
        lines.append('| %d B one way, %s / vader | %s | %s | %s |' % (
            size, cfg, p, v, ratio(p, v)))
p, f = med(('latency', 'pcor-block-nospin', 8)), med(('latency', 'bare-futex', 8))
lines.append('| 8 B block (PCOR_SPIN_NS=0) / bare futex | %s | %s | %s |' % (p, f, ratio(p, f)))
p, f = med(('latency', 'pcor-block', 8)), med(('latency', 'bare-futex', 8))
lines.append('| 8 B block (default spin) / bare futex | %s | %s | %s |' % (p, f, ratio(p, f)))
for cfg in ('pcor-default', 'pcor-poll', 'pcor-block'):
    c = med(('ctxsw', cfg, 8))
    if c is not None:
        lines.append('| 8 B, %s: context switches per round trip (pid 0, all threads) | %.4f | | |' % (cfg, c))
p, v = med(('rate', 'pcor-default', 1)), med(('rate', 'ompi-vader', 1))
lines.append('| 1 B rate, pcor / vader (higher is better) | %s | %s | %s |' % (p, v, ratio(p, v)))
for size in (65536, 262144, 1048576, 4194304):
    p = med(('bw', 'pcor-default', size))
    best = max([x for x in (med(('bw', 'ompi-vader', size)), med(('bw', 'mpich', size))) if x] or [0])
    lines.append('| %d B bandwidth, pcor / better MPI | %s | %s | %s |' % (size, p, best or None, ratio(p, best)))
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
with open(out + '/latency.dat', 'w') as f:
    for cfg in ('pcor-default', 'pcor-poll', 'pcor-block', 'ompi-vader', 'mpich'):
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
names = "pcor-default pcor-poll pcor-block ompi-vader mpich"
plot for [i=0:4] "$OUT/latency.dat" index i using 2:3:4:5 with yerrorlines title word(names, i+1)
GP
fi
echo "summary: $OUT/summary.md; plot: $OUT/small.png" >&2
