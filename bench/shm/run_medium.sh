#!/usr/bin/env bash
# run_medium.sh -- medium messages (1-64 KiB) between two processes of one
# host: pcor's streaming bandwidth over pcor-shm with the default
# rendezvous threshold, with each PCOR_SHM_EAGER_MAX candidate and with
# each fixed kind of store into the cells (PCOR_SHM_NT_STORES), sending
# from DMA memory (pcor_send_dma) and with pcor_send_copy ("-copy" rows),
# next to Open MPI (vader) and MPICH running bench/shm/mpi_p2p.c, interleaved:
# every repetition runs every configuration once, in turn (pcor's default
# and BASE's in alternating order).  This is the
# measurement the threshold's default comes from.
#
#   bench/shm/run_medium.sh [BUILD_DIR]
#
# Environment: REPS (default 10), SIZES (pcor_bw -m range, default
# 1k:64k), THRESHOLDS (default "4k 8k 16k 32k 64k"),
# STORES (default "off on"; either may be empty), BASE (another build
# directory, say of the revision before: its default runs as "base-default"
# in every repetition), OUT (default a scratch directory).  Writes raw.csv,
# summary.md and a plot per mode; prints per size the median
# MB/s of each configuration, pcor's default over the better MPI (and over
# BASE's, as the median [quartiles] of the ratios within repetitions),
# apart for the repetitions in each mode of the machine (the rings' one-way
# time under or over FAST_NS, default 120 ns: the two CPUs do or do not
# share a cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
build=$(cd "${1:-build}" && pwd)
REPS=${REPS:-10}
BASE=${BASE:+$(cd "$BASE" && pwd)}
FAST_NS=${FAST_NS:-120}
THRESHOLDS=${THRESHOLDS-"4k 8k 16k 32k 64k"}
STORES=${STORES-"off on"}
OUT=${OUT:-$(dirname "$(mktemp -u)")/pcor-medium-bench}
mkdir -p "$OUT"
raw=$OUT/raw.csv
: >"$raw"
pcorrun=$build/tools/pcorrun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pcor_knobs_unset
BW="-m ${SIZES:-1k:64k}"
echo "load: $(uptime)"

MPI_OMPI=$(mpi_p2p_build openmpi "$OUT") || echo "no Open MPI: left out" >&2
MPI_MPICH=$(mpi_p2p_build mpich "$OUT") || echo "no MPICH: left out" >&2

pcor() { # LABEL REP [VAR=VALUE...]: DMA sends, then copy sends (of $bin)
	local label=$1 rep=$2 c b=${bin:-$build}
	shift 2
	for c in "" -c; do
		env "$@" timeout 120 "$b/tools/pcorrun" -n 2 "$b/bench/pcor_bw" \
			$BW $c -t "$label${c:+-copy}" 2>/dev/null |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label failed" >&2
	done
}
mpi() { # LABEL LAUNCHER EXE REP
	[ -n "$3" ] || return 0
	timeout 120 $2 "$3" bw $BW -t "$1" 2>/dev/null |
		sed "s/\$/,$4/" >>"$raw" || echo "$1 failed" >&2
}

for rep in $(seq "$REPS"); do
	echo "== repetition $rep of $REPS" >&2
	# The rings' bare one-way time says where the host placed the two
	# CPUs this time (docs/BENCHMARKS.md: the machine's modes).
	"$build/bench/shm_ring_lat" -m 8:8 -i 100000 2>/dev/null | tail -n 1 |
		sed "s/\$/,$rep/" >>"$raw"
	# The first run after the probe above fared worse at sizes no
	# change touched: BASE goes first in every other repetition.
	if [ -n "$BASE" ] && [ $((rep % 2)) = 0 ]; then
		bin=$BASE pcor base-default "$rep"
		pcor pcor-default "$rep"
	else
		pcor pcor-default "$rep"
		[ -z "$BASE" ] || bin=$BASE pcor base-default "$rep"
	fi
	for t in $THRESHOLDS; do
		pcor "pcor-eager-$t" "$rep" PCOR_SHM_EAGER_MAX="$t"
	done
	for t in $STORES; do
		pcor "pcor-nt-$t" "$rep" PCOR_SHM_NT_STORES="$t"
	done
	mpi ompi-vader "mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl self,vader" \
		"$MPI_OMPI" "$rep"
	mpi mpich "mpiexec.mpich -n 2 -bind-to core" "$MPI_MPICH" "$rep"
done

python3 - "$raw" "$OUT" "$FAST_NS" <<'PY'
import csv, statistics, sys
raw, out, fast_ns = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = list(csv.reader(open(raw)))
# A repetition's mode: where the rings alone ran before it.
mode = {r[5]: 'faster' if float(r[3]) * 1000 < fast_ns else 'slower'
        for r in rows if len(r) >= 6 and r[1] == 'ring-floor'}
runs = {}
by_rep = {}
for r in rows:
    if len(r) < 6 or r[0] != 'bw':
        continue
    m = mode.get(r[5], 'slower')
    runs.setdefault(m, {}).setdefault((r[1].split('/')[0], int(r[2])),
                                      []).append(float(r[3]))
    by_rep[(r[5], r[1], int(r[2]))] = float(r[3])

def paired(m, a, b, s):
    # a over b within each repetition of mode m: median [quartiles]
    q = sorted(by_rep[(k, a, s)] / by_rep[(k, b, s)] for k in mode
               if mode[k] == m and (k, a, s) in by_rep and (k, b, s) in by_rep)
    if not q:
        return ''
    n = len(q)
    return '%.2f [%.2f-%.2f]' % (q[n // 2], q[n // 4], q[3 * n // 4])

report = []
for m in sorted(runs):
    rm = runs[m]
    labels = sorted({k[0] for k in rm})
    base = int('base-default' in labels)
    sizes = sorted({k[1] for k in rm})
    med = lambda k: statistics.median(rm[k]) if k in rm else None
    reps = sorted((k for k, v in mode.items() if v == m), key=int)
    report += ['%s mode (rings alone %s %g ns), repetitions %s' %
               (m, '<' if m == 'faster' else '>=', fast_ns, ' '.join(reps)),
               '',
               '| size | ' + ' | '.join(labels) +
               ' | default / better MPI |' +
               (' default / base, paired |' if base else ''),
               '|---:|' + '---:|' * (len(labels) + 1 + base)]
    for s in sizes:
        best = max([x for x in (med(('ompi-vader', s)), med(('mpich', s)))
                    if x] or [0])
        d = med(('pcor-default', s))
        report.append('| %d | ' % s + ' | '.join(
            '%.0f' % med((l, s)) if med((l, s)) else '' for l in labels) +
            ' | %s |' % ('%.2f' % (d / best) if d and best else 'n/a') +
            (' %s |' % paired(m, 'pcor-default', 'base-default', s)
             if base else ''))
    report.append('')
    with open('%s/medium-%s.dat' % (out, m), 'w') as f:
        for l in labels:
            f.write('"%s"\n' % l)
            for s in sizes:
                k = (l, s)
                if k in rm:
                    f.write('%d %.1f %.1f %.1f\n' % (s, med(k), min(rm[k]),
                                                     max(rm[k])))
            f.write('\n\n')
floors = ['%s: %s us' % (r[5], r[3]) for r in rows
          if len(r) >= 6 and r[1] == 'ring-floor']
report.append('rings alone, one way, by repetition: ' + ', '.join(floors))
open(out + '/summary.md', 'w').write('\n'.join(report) + '\n')
print('\n'.join(report))
PY
for dat in "$OUT"/medium-*.dat; do
	[ -e "$dat" ] && command -v gnuplot >/dev/null || continue
	m=$(basename "$dat" .dat)
	gnuplot <<GP
set terminal pngcairo size 800,480
set output "$OUT/$m.png"
set title "streaming bandwidth, 2 processes on one host, ${m#medium-} mode (median, min-max)"
set xlabel "message size (bytes)"; set ylabel "MB/s"; set logscale x 2
set key top left
stats "$dat" using 0 nooutput
plot for [i=0:STATS_blocks-1] "$dat" index i using 1:2:3:4 \
	with yerrorlines title columnheader(1)
GP
done
echo "summary: $OUT/summary.md; plots: $OUT/medium-*.png" >&2
