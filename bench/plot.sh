#!/usr/bin/env bash
# plot.sh [RESULTS_DIR] -- draw PNGs from the CSVs of the same-process
# benchmarks (pingpong.csv, wakeup.csv, msgrate.csv) with gnuplot:
#   pingpong-rtt.png  round trip vs size, every variant and wait mode, with
#                     the bare ping-pongs as horizontal lines
#   pingpong-bw.png   ping-pong bandwidth vs size next to memcpy
#   wakeup.png        wake-up costs, pcor next to the bare baselines
#   msgrate.png       aggregate message rate vs number of threads
#   ratios.png        every ratio row with its target
# Points are medians over the repetitions; error bars span min..max.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")" && pwd)/results}
command -v gnuplot >/dev/null || {
	echo "plot.sh: gnuplot not found (scripts/install-deps.sh)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# series FILE METRIC VARIANT WAIT > "size median min max" rows
series() {
	awk -F, -v m="$2" -v v="$3" -v w="$4" \
		'NR > 1 && $2 == m && $3 == v && $4 == w { print $5, $9, $10, $11 }' "$1"
}
# value FILE METRIC VARIANT WAIT: the median of one row
value() {
	awk -F, -v m="$2" -v v="$3" -v w="$4" \
		'NR > 1 && $2 == m && $3 == v && $4 == w { print $9; exit }' "$1"
}

common='set terminal pngcairo size 1000,640 font ",10" noenhanced
set grid
set key outside right top'

pp=$dir/pingpong.csv
if [ -s "$pp" ]; then
	plots=() bwplots=()
	for w in spin block; do
		for v in copy dma dma-handover; do
			f=$tmp/rtt-$v-$w.dat
			series "$pp" rtt $v $w >"$f"
			[ -s "$f" ] && plots+=("'$f' using 1:(\$2/1000):(\$3/1000):(\$4/1000) with yerrorlines title '$v, $w'")
			f=$tmp/bw-$v-$w.dat
			series "$pp" bw $v $w >"$f"
			[ -s "$f" ] && [ $v != dma-handover ] &&
				bwplots+=("'$f' using 1:2:3:4 with yerrorlines title '$v, $w'")
		done
	done
	for b in bare-spin-shared:spin bare-spin-line:spin bare-futex:block; do
		x=$(value "$pp" rtt "${b%%:*}" "${b##*:}")
		[ -n "$x" ] && plots+=("$x/1000 with lines dashtype 2 title '${b%%:*} (${x%.*} ns)'")
	done
	f=$tmp/memcpy.dat
	series "$pp" bw memcpy spin >"$f"
	[ -s "$f" ] || series "$pp" bw memcpy block >"$f"
	[ -s "$f" ] && bwplots+=("'$f' using 1:2:3:4 with yerrorlines lw 2 title 'memcpy (1 thread)'")
	if [ ${#plots[@]} -gt 0 ]; then
		gnuplot <<-EOF
		$common
		set output '$dir/pingpong-rtt.png'
		set title 'pcor same-process ping-pong: round trip (two threads, CPUs 0 and 1)'
		set logscale xy 2
		set format x '%.0b%B'
		set xlabel 'message size (bytes)'
		set ylabel 'round trip (us)'
		plot $(IFS=,; echo "${plots[*]}")
		EOF
	fi
	if [ ${#bwplots[@]} -gt 0 ]; then
		gnuplot <<-EOF
		$common
		set output '$dir/pingpong-bw.png'
		set title 'ping-pong bandwidth = size / (RTT/2)  (dma-handover moves no bytes: not shown)'
		set logscale xy 2
		set format x '%.0b%B'
		set xlabel 'message size (bytes)'
		set ylabel 'GB/s (10^9 B/s)'
		set format y '%g'
		set key left top inside
		plot $(IFS=,; echo "${bwplots[*]}")
		EOF
	fi
fi

wk=$dir/wakeup.csv
if [ -s "$wk" ]; then
	awk -F, 'NR > 1 && $2 != "ratio" {
		printf "%d \"%s %s\" %s %s %s\n", n++, $2, $3, $9 / 1000, $10 / 1000, $11 / 1000
	}' "$wk" >"$tmp/wake.dat"
	gnuplot <<-EOF
	$common
	set output '$dir/wakeup.png'
	set title 'waking a blocked receiver: pcor next to bare futex and spin (PCOR_SPIN_NS=0)'
	set style fill solid 0.5
	set boxwidth 0.6
	set logscale y 10
	set ylabel 'us (rtt: round trip; wake: one-way, receiver asleep; call: waker busy)'
	set xtics rotate by -30
	unset key
	plot '$tmp/wake.dat' using 1:3:xtic(2) with boxes, \
	     '' using 1:3:4:5 with yerrorbars lc rgb 'black', \
	     '' using 1:3:(sprintf('%.2f', \$3)) with labels offset 0,1
	EOF
fi

mr=$dir/msgrate.csv
if [ -s "$mr" ]; then
	awk -F, 'NR > 1 && $2 == "rate" { print $6, $9, $10, $11 }' "$mr" >"$tmp/rate.dat"
	half=$(awk -F, 'NR > 1 && $2 == "rate" && $6 == 2 { print $9 / 2; exit }' "$mr")
	extra=""
	[ -n "$half" ] && extra=", $half with lines dashtype 2 title 'target: half the 2-thread rate'"
	gnuplot <<-EOF
	$common
	set output '$dir/msgrate.png'
	set title 'aggregate message rate, threads in pairs (senders on CPU 0, receivers on CPU 1)'
	set logscale x 2
	set xrange [1.5:*]
	set xlabel 'threads'
	set ylabel 'million messages / s'
	set yrange [0:*]
	plot '$tmp/rate.dat' using 1:2:3:4 with yerrorlines lw 2 title 'sendCopy/recvCopy'$extra
	EOF
fi

: >"$tmp/ratio.dat"
for f in "$pp" "$wk" "$mr"; do
	[ -s "$f" ] || continue
	awk -F, 'NR > 1 && $2 == "ratio" {
		t = $13; sub(/: .*/, "", t); sub(/^target /, "", t)
		printf "\"%s %s (%s)\" %s %s %s \"%s\"\n", $1, $3, $4, $9, $10, $11, t
	}' "$f" >>"$tmp/ratio.dat"
done
if [ -s "$tmp/ratio.dat" ]; then
	gnuplot <<-EOF
	$common
	set output '$dir/ratios.png'
	set title 'ratios measured side by side in one run (label: target)'
	set style fill solid 0.5
	set boxwidth 0.6
	set logscale y 2
	set ylabel 'x'
	set xtics rotate by -30
	unset key
	plot '$tmp/ratio.dat' using 0:2:xtic(1) with boxes, \
	     '' using 0:2:3:4 with yerrorbars lc rgb 'black', \
	     '' using 0:2:(sprintf('%.2f %s', \$2, strcol(5))) with labels offset 0,1
	EOF
fi
ls "$dir"/*.png 2>/dev/null || true
