#!/usr/bin/env bash
# run_counts.sh -- the work each library does per 8-byte round trip
# between two processes of one host, counted rather than timed: pcor over
# pcor-shm (pcor_lat, no PCOR_* knob) next to Open MPI vader (mpi_p2p.c,
# bound to cores; as it is and with MPI_THREAD_MULTIPLE, vader-mt), all
# under callgrind.
#
#   bench/shm/run_counts.sh [--smoke] [BUILD_DIR]
#
# Timing says how long a hop takes; these counters say how much each
# library executes for it: instructions (all of them, and without the
# empty polls of the wait), the send call's and the delivery's share,
# and locked instructions (lock-prefixed, or xchg with memory), the
# ones that wait for the store buffer to drain.  Each library runs twice
# (ITERS and 3 x ITERS round trips) and the difference is divided by
# the extra messages, so start-up and shutdown drop out (cg_counts.py).
# Counts are per process and round trip (one message sent, one
# received), the two processes' main threads taken together.
#
# Prints CSV rows lib,counter,value; writes counts.csv, counts.md and
# counts.png (gnuplot) to OUT.  Environment: ITERS (default 5000),
# SCRATCH, OUT.  Needs valgrind and objdump (binutils); Open MPI's
# mpicc.openmpi for the vader rows (without it pcor alone is counted).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "${1:-build}" && pwd)
SCRATCH=${SCRATCH:-$(dirname "$(mktemp -u)")/pcor-counts-bench}
OUT=${OUT:-$SCRATCH/out}
ITERS=${ITERS:-5000}
[ $smoke = 1 ] && ITERS=1000
for t in valgrind objdump python3; do
	command -v "$t" >/dev/null ||
		{ echo "run_counts: $t is needed (scripts/install-deps.sh)" >&2; exit 1; }
done
rm -rf "$SCRATCH/cg"
mkdir -p "$SCRATCH/cg" "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pcor_knobs_unset
# valgrind cannot reserve pcor's default DMA range (its address space is
# its own); a smaller reserve changes nothing on this path, nor does a
# longer liveness timeout (start-up under valgrind outlasts the default).
# A waiter spins up to 100 ms before it sleeps, not 20 us: a hop that
# takes under a microsecond takes far longer under valgrind, and the
# sleeps it would bring are not the path measured (vader never sleeps).
# Only each process's main thread is counted (--separate-threads, the
# files ending -01): the one that sends and waits.  A helper thread
# (pcor's dispatcher, parked while a waiter drives, its directory agent)
# does no work of the hop, but under valgrind threads run in turns and
# one that spins a while would count its spin, more in one run than in
# the other.
cg=(valgrind -q --tool=callgrind --dump-instr=yes --separate-threads=yes)

# run LIB N CMD...: profile CMD (which starts both processes) into
# SCRATCH/cg/LIB.N/, one file per process.
run() {
	local dir=$SCRATCH/cg/$1.$2
	shift 2
	mkdir -p "$dir"
	timeout 600 "$@" >"$dir/out.txt" 2>"$dir/err.txt" ||
		{ echo "run_counts: failed: $*" >&2; cat "$dir/err.txt" >&2; exit 1; }
	[ "$(ls "$dir"/cg.*-01 2>/dev/null | wc -l)" = 2 ] ||
		{ echo "run_counts: no profiles in $dir" >&2; exit 1; }
}

# vader as it is, and thread-safe (MPI_THREAD_MULTIPLE) as pcor always is.
mpi=
[ $smoke = 0 ] && mpi=$(mpi_p2p_build openmpi "$SCRATCH") ||
	echo "run_counts: pcor alone (smoke run, or no Open MPI)" >&2
mpis=()
[ -n "$mpi" ] && mpis=(vader vader-mt)
for n in "$ITERS" $((3 * ITERS)); do
	run pcor "$n" env PCOR_DMA_RESERVE=1073741824 PCOR_PEER_TIMEOUT_MS=60000 \
		PCOR_SPIN_NS=100000000 "$build/tools/pcorrun" -n 2 "${cg[@]}" \
		--callgrind-out-file="$SCRATCH/cg/pcor.$n/cg.%p" \
		"$build/bench/pcor_lat" -m 8:8 -i "$n" -x 100
	for v in "${mpis[@]}"; do
		mt=()
		[ $v = vader-mt ] && mt=(-T)
		run $v "$n" mpirun.openmpi -n 2 --bind-to core --mca pml ob1 \
			--mca btl self,vader "${cg[@]}" \
			--callgrind-out-file="$SCRATCH/cg/$v.$n/cg.%p" \
			"$mpi" lat "${mt[@]}" -m 8:8 -i "$n" -x 100
	done
done

csv=$OUT/counts.csv
echo "lib,counter,value" >"$csv"
# The calls each library makes once per message sent, once per poll of
# its wait, and once per message handed up (pcor: the waiter's poll of
# its peer's ring that finds a record).
python3 "$here/cg_counts.py" pcor pcor_send_dma drive_poll watched_poll \
	"$SCRATCH"/cg/pcor."$ITERS"/cg.*-01 -- \
	"$SCRATCH"/cg/pcor.$((3 * ITERS))/cg.*-01 >>"$csv"
for v in "${mpis[@]}"; do
	python3 "$here/cg_counts.py" "$v" PMPI_Send opal_progress \
		mca_pml_ob1_recv_frag_callback_match \
		"$SCRATCH"/cg/"$v"."$ITERS"/cg.*-01 -- \
		"$SCRATCH"/cg/"$v".$((3 * ITERS))/cg.*-01 >>"$csv"
done
cat "$csv"

# Every counter must be there, and a round trip must have done work.
python3 - "$csv" "$OUT" "$ITERS" "$smoke" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
v = {(r['lib'], r['counter']): float(r['value']) for r in rows}
libs = list(dict.fromkeys(r['lib'] for r in rows))
# Both benchmarks time the loop twice: the extra 2 x ITERS round trips
# are 4 x ITERS sends per process.
for lib in libs:
    if v.get((lib, 'msgs')) != 4 * int(sys.argv[3]):
        sys.exit('run_counts: %s sent %s messages more, not %d' %
                 (lib, v.get((lib, 'msgs')), 4 * int(sys.argv[3])))
names = ['ir', 'ir_no_spin', 'send_ir', 'deliver_ir', 'poll_ir', 'polls',
         'locked', 'locked_no_spin', 'poll_locked']
for lib in libs:
    for n in names:
        if (lib, n) not in v:
            sys.exit('run_counts: no %s for %s' % (n, lib))
    # A one-off event in the short run only (a retried connection at
    # start-up) can outweigh a smoke run's few extra round trips.
    if sys.argv[4] == '0' and (v[(lib, 'ir_no_spin')] <= 0 or
                               v[(lib, 'send_ir')] <= 0):
        sys.exit('run_counts: %s: the runs differ by more than their '
                 'round trips (a one-off event?): run again' % lib)
md = ['# Work per 8 B round trip, per process (callgrind)', '',
      '| counter | ' + ' | '.join(libs) + ' |',
      '|---|' + '---:|' * len(libs)]
for n in names:
    md.append('| %s | %s |' % (n, ' | '.join('%.1f' % v[(l, n)] for l in libs)))
open(sys.argv[2] + '/counts.md', 'w').write('\n'.join(md) + '\n')
with open(sys.argv[2] + '/counts.dat', 'w') as f:
    f.write('counter %s\n' % ' '.join(libs))
    for n in ['ir_no_spin', 'send_ir', 'deliver_ir', 'poll_ir']:
        f.write('%s %s\n' % (n, ' '.join('%.1f' % v[(l, n)] for l in libs)))
with open(sys.argv[2] + '/locked.dat', 'w') as f:
    f.write('counter %s\n' % ' '.join(libs))
    for n in ['locked_no_spin', 'poll_locked']:
        f.write('%s %s\n' % (n, ' '.join('%.1f' % v[(l, n)] for l in libs)))
print('\n'.join(md))
PY

if command -v gnuplot >/dev/null; then
	nlib=$((1 + ${#mpis[@]}))
	gnuplot <<GP
set terminal pngcairo noenhanced size 900,420
set output "$OUT/counts.png"
set multiplot layout 1,2 title "Per 8 B round trip and process (callgrind)"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set xtics rotate by -20
set yrange [0:*]
set key top right
set title "instructions"
plot for [i=2:$((nlib + 1))] "$OUT/counts.dat" using i:xtic(1) title columnhead(i)
set title "locked instructions"
plot for [i=2:$((nlib + 1))] "$OUT/locked.dat" using i:xtic(1) title columnhead(i)
unset multiplot
GP
fi
