#!/usr/bin/env bash
# run-core.sh [BUILD_DIR] -- run the same-process benchmark set (pingpong,
# wakeup, msgrate) and plot it.  CSVs, the ratio summary and PNGs go to
# bench/results/ (or $OUT).  REPS sets the repetitions (default 5); each
# figure is the median over them.  Takes about 5 minutes on 2 cores.
#
# The machine should be otherwise idle: the benchmarks pin threads to CPUs
# 0 and 1 and spin.  Ratios are measured side by side in one process, so
# they survive some noise; absolute figures do not.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${OUT:-$root/bench/results}
reps=${REPS:-5}

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$root" -Dbuildtype=release >/dev/null
fi
ninja -C "$build" bench/pingpong bench/wakeup bench/msgrate >/dev/null
mkdir -p "$out"
summary=$out/summary.txt
{
	echo "# same-process benchmarks, $reps repetitions each"
	echo "# $(uname -srm), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
} >"$summary"

run() {
	local name=$1
	shift
	echo "== $name $*" | tee -a "$summary"
	local t0=$SECONDS
	# The ratio lines come on stderr; keep them in the summary too.
	local rc=0
	"$build/bench/$name" --reps "$reps" --csv "$out/$name.csv" --quiet "$@" \
		2>"$out/$name.log" || rc=$?
	tee -a "$summary" <"$out/$name.log"
	[ $rc -eq 0 ] || { echo "$name failed ($rc)" >&2; exit $rc; }
	echo "   ($((SECONDS - t0)) s)" | tee -a "$summary"
}

run pingpong
run wakeup
run msgrate
"$root/bench/plot.sh" "$out"
echo "results in $out"
