#!/usr/bin/env bash
# route_bench.sh PCORRUN ROUTE_BENCH [--smoke] [OUTDIR] -- A->C through
# gateway B against the direct links A-B (net1) and B-C (net2), on
# network namespaces made by tests/route/run.sh (needs CAP_NET_ADMIN;
# skipped without).  Writes OUTDIR/route.csv and, with gnuplot,
# OUTDIR/route.png; prints a Markdown table with the ratios to the
# targets:
#   latency    A-C <= 1.1 x (A-B + B-C): one extra direct hop, plus 10%
#   bandwidth  A-C >= 0.8 x min(A-B, B-C)
# ROUTE_NET2 picks net2's provider: tcp (default here) or udp.
set -euo pipefail
pcorrun=$1 bench=$2; shift 2
smoke=()
if [ "${1:-}" = --smoke ]; then smoke=(--smoke); shift; fi
out=${1:-$(mktemp -d)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
set +e
ROUTE_NET2=${ROUTE_NET2:-tcp} "$here/../../tests/route/run.sh" bench \
	"$pcorrun" "$bench" "${smoke[@]}" ${ROUTE_BENCH_ARGS:-} \
	>"$out/route.csv"
st=$?
set -e
[ $st -eq 0 ] || { cat "$out/route.csv"; exit $st; }

awk -F, '
NR > 1 { lat[$1, $3] = $4; bw[$1, $3] = $5; if (!($3 in seen)) { seen[$3] = 1; sz[n++] = $3 } }
END {
	print "| size (B) | A-B µs | B-C µs | A-C µs | lat ratio (≤ 1.10) | A-B MB/s | B-C MB/s | A-C MB/s | bw ratio (≥ 0.80) |"
	print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for (i = 0; i < n; i++) {
		s = sz[i]
		l2 = lat["A-B", s] + lat["B-C", s]
		b2 = bw["A-B", s] < bw["B-C", s] ? bw["A-B", s] : bw["B-C", s]
		rl = l2 > 0 ? lat["A-C", s] / l2 : 0
		rb = b2 > 0 ? bw["A-C", s] / b2 : 0
		printf("| %d | %.1f | %.1f | %.1f | %.2f | %.3g | %.3g | %.3g | %.2f |\n", s, lat["A-B", s], lat["B-C", s], lat["A-C", s], rl, bw["A-B", s], bw["B-C", s], bw["A-C", s], rb)
	}
}' "$out/route.csv"

if command -v gnuplot >/dev/null; then
	for p in A-B B-C A-C; do
		grep "^$p," "$out/route.csv" | tr , ' ' >"$out/$p.dat"
	done
	gnuplot <<GP || echo "(gnuplot failed; no plot)"
set terminal pngcairo size 1000,420 noenhanced
set output "$out/route.png"
set datafile separator " "
set logscale x 2
set logscale y
set xlabel "message size (bytes)"
set key top left
set multiplot layout 1,2
set title "latency (half round trip, median)"
set ylabel "µs"
plot for [p in "A-B B-C A-C"] "$out/".p.".dat" using 3:4 with linespoints title p
set title "bandwidth (windows of 8, median)"
set ylabel "MB/s"
set key bottom right
plot for [p in "A-B B-C A-C"] "$out/".p.".dat" using 3:5 with linespoints title p
unset multiplot
GP
	echo
	echo "CSV: $out/route.csv; plot: $out/route.png"
fi
