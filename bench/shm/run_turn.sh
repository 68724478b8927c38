#!/usr/bin/env bash
# run_turn.sh -- what a hop's turn costs on this machine: the bare rings of
# pcor-shm (shm_ring_lat) with a turn of 0 to 100 ns of work between
# taking a record and answering it, next to pcor (pcor_lat, no PCOR_*
# knob) and Open MPI vader and MPICH (mpi_p2p.c), 8 bytes one way,
# interleaved: every round runs every configuration once.
#
#   bench/shm/run_turn.sh [--smoke] [BUILD_DIR]
#
# A library's turn (matching, completing, returning to the application,
# the answer's send path) adds to the bare rings' transit.  On some
# placements of the two CPUs it adds its own length; on others the
# transit itself grows by a whole line transfer once the turn passes a
# few tens of nanoseconds.  Rounds are sorted into the machine's modes
# by their bare floor (read twice, at the start and end of the round; a
# round whose two readings fall in different modes is dropped), and per
# mode the script prints the median one-way time of each turn and of
# each library, the turn at which the step comes (the first that costs
# its own length plus 0.3x the floor or more) and, where the turn adds
# only its own length, the turn each library's time stands for.
#
# Libraries are read both ways their benchmarks print: the mean over the
# timed loop (osu_latency's figure; no clock read inside the loop) and
# the median round trip (lat-p50: a clock read before and after each,
# inside the timing side's turn).  The rings are also run with one
# instruction in place of the turn (shm_ring_lat -f): a locked add, an
# lfence and a clock read, to tell which kinds of work bring the step.
# Writes raw.csv, summary.md and turn.png (gnuplot) to OUT.
#
# Environment: REPS (rounds, default 20), TURNS (ns, default
# 0,10,20,30,40,50,60,80,100), SCRATCH, OUT.  --smoke: 1 tiny round.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "${1:-build}" && pwd)
SCRATCH=${SCRATCH:-$(dirname "$(mktemp -u)")/pcor-turn-bench}
OUT=${OUT:-$SCRATCH/out}
REPS=${REPS:-20}
TURNS=${TURNS:-0,10,20,30,40,50,60,80,100}
ITERS=100000
if [ $smoke = 1 ]; then REPS=1 ITERS=2000 TURNS=0,40; fi
mkdir -p "$SCRATCH" "$OUT"
raw=$OUT/raw.csv
pcor_knobs_unset
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mpis=()
for impl in openmpi mpich; do
	mpi_p2p_build "$impl" "$SCRATCH" >/dev/null 2>>"$SCRATCH/build.log" &&
		mpis+=("$impl")
done

echo "load: $(uptime)"
echo "round,config,turn_ns,oneway_us" >"$raw"
# ring ROUND TAG: the floor alone (TAG: floor-a or floor-b).
ring_floor() {
	"$build/bench/shm_ring_lat" -m 8:8 -i "$ITERS" |
		awk -F, -v r="$1" -v t="$2" '$2 == "ring-floor" {print r "," t ",-1," $4}'
}
# lib_rows ROUND NAME: a latency benchmark's mean (NAME) and median
# (NAME-p50) rows from its CSV on stdin.
lib_rows() {
	awk -F, -v r="$1" -v c="$2" '
		$1 == "latency" {print r "," c ",-1," $4}
		$1 == "lat-p50" {print r "," c "-p50,-1," $4}'
}
for r in $(seq 1 "$REPS"); do
	ring_floor "$r" floor-a >>"$raw"
	"$build/bench/shm_ring_lat" -m 8:8 -i "$ITERS" -w "$TURNS" -f |
		awk -F, -v r="$r" '$2 ~ /^ring-turn-/ {
			t = $2; sub("ring-turn-", "", t); print r ",ring," t "," $4 }
			$2 ~ /^ring-(locked|lfence|clock)$/ {
			c = $2; sub("ring-", "rings+", c); print r "," c ",-1," $4 }' >>"$raw"
	"$build/tools/pcorrun" -n 2 "$build/bench/pcor_lat" -m 8:8 \
		-i "$ITERS" -x 1000 | lib_rows "$r" pcor >>"$raw"
	for impl in "${mpis[@]}"; do
		run=(mpirun.mpich -n 2)
		[ "$impl" = openmpi ] && run=(mpirun.openmpi -n 2 --bind-to core
			--mca pml ob1 --mca btl self,vader)
		timeout 120 "${run[@]}" "$SCRATCH/mpi_p2p.$impl" lat -m 8:8 \
			-i "$ITERS" -x 1000 2>/dev/null |
			lib_rows "$r" "$impl" >>"$raw" ||
			echo "$impl: round $r failed" >&2
	done
	ring_floor "$r" floor-b >>"$raw"
done

python3 - "$raw" "$OUT" <<'PY'
import csv, statistics, sys
raw, out = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(raw)))
# Every round must have run the rings (bare and with each turn) and pcor.
for need in ('floor-a', 'floor-b', 'ring', 'pcor'):
    if not any(x['config'] == need for x in rows):
        sys.exit('run_turn: no %s reading in %s' % (need, raw))
rounds = {}
for x in rows:
    rounds.setdefault(int(x['round']), []).append(x)
floors = [float(x['oneway_us']) for x in rows if x['config'].startswith('floor')]
lo, hi = min(floors), max(floors)
# Two modes when the floors spread by 1.8x or more: split at the
# geometric middle.  Else one.
split = (lo * hi) ** 0.5 if hi >= 1.8 * lo else None
def mode_of(v):
    return 'one' if split is None else ('faster' if v < split else 'slower')
modes = {}
dropped = 0
for r, xs in sorted(rounds.items()):
    f = [mode_of(float(x['oneway_us'])) for x in xs if x['config'].startswith('floor')]
    if len(f) != 2 or f[0] != f[1]:
        dropped += 1
        continue
    modes.setdefault(f[0], []).append(xs)
md = ['# One hop\'s turn against the bare rings (8 B one way, us, medians)', '',
      'rounds: %d, dropped (mode changed within): %d; floors %.3f-%.3f us' %
      (len(rounds), dropped, lo, hi), '']
dat = open(out + '/turn.dat', 'w')
lines = open(out + '/level.dat', 'w')
names, lnames = [], []
for m, rs in sorted(modes.items()):
    ring = {}
    libs = {}
    for xs in rs:
        for x in xs:
            v = float(x['oneway_us'])
            if x['config'] == 'ring':
                ring.setdefault(int(x['turn_ns']), []).append(v)
            elif x['config'] == 'floor-a':
                ring.setdefault(-1, []).append(v)
            elif not x['config'].startswith('floor'):
                libs.setdefault(x['config'], []).append(v)
    med = {t: statistics.median(v) for t, v in ring.items()}
    floor = med.get(0, med.get(-1))
    md += ['## %s mode (%d rounds)' % (m, len(rs)), '',
           '| turn (ns) | bare rings | min-max |', '|---:|---:|---:|']
    for t in sorted(k for k in med if k >= 0):
        md.append('| %d | %.3f | %.3f-%.3f |' % (t, med[t], min(ring[t]), max(ring[t])))
        dat.write('%d %.3f %.3f %.3f\n' % (t, med[t], min(ring[t]), max(ring[t])))
    dat.write('\n\n')
    names.append('rings,' + m)
    # The step: the first turn that costs more than its own length by
    # 0.3x the floor or more (a turn that only adds itself is no step).
    step = next((t for t in sorted(k for k in med if k > 0)
                 if med[t] - floor - t / 1000 >= 0.3 * floor), None)
    md += ['', 'step: %s' % ('none up to %d ns' % max(med) if step is None else
                            'at a turn of %d ns (%.3f us against %.3f with none)' %
                            (step, med[step], floor)), '',
           '| library | one way | min-max | turn it stands for (additive part) |',
           '|---|---:|---:|---:|']
    # Where the turn adds its own length (before any step), a library's
    # time minus the floor is its turn.
    for c, v in sorted(libs.items()):
        mv = statistics.median(v)
        add = mv - floor
        note = '%.0f ns' % (add * 1000) if step is None else \
            'past the step (%.0f ns over the floor)' % (add * 1000)
        md.append('| %s | %.3f | %.3f-%.3f | %s |' % (c, mv, min(v), max(v), note))
    for sfx, what in (('', 'means'), ('-p50', 'medians')):
        p, o = libs.get('pcor' + sfx), libs.get('openmpi' + sfx)
        if p and o:
            md += ['', 'pcor / vader (%s): %.2fx' %
                   (what, statistics.median(p) / statistics.median(o))]
    md.append('')
    for c, v in sorted(libs.items()):
        if c.endswith('-p50'):
            continue  # the plot shows the means
        # A level line across the turns: where the library sits.
        mv = statistics.median(v)
        lines.write('0 %.3f\n%d %.3f\n\n\n' % (mv, max(med), mv))
        lnames.append('%s,%s' % (c, m))
dat.close()
lines.close()
open(out + '/turn.names', 'w').write(' '.join(names))
open(out + '/level.names', 'w').write(' '.join(lnames))
open(out + '/summary.md', 'w').write('\n'.join(md) + '\n')
print('\n'.join(md))
PY
[ $smoke = 1 ] && exit 0
if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal pngcairo size 960,480
set output "$OUT/turn.png"
set title "bare rings, 8 B one way, with a turn of work per hop (median, min-max)"
set xlabel "turn (ns of work between taking a record and answering)"
set ylabel "one way (us)"; set key outside right
names = system("cat '$OUT/turn.names'")
levels = system("cat '$OUT/level.names'")
plot for [i=0:words(names)-1] "$OUT/turn.dat" index i using 1:2:3:4 with yerrorlines title word(names, i+1), \
     for [i=0:words(levels)-1] "$OUT/level.dat" index i using 1:2 with lines dashtype 2 title word(levels, i+1)
GP
fi
echo "summary: $OUT/summary.md; plot: $OUT/turn.png" >&2
