#!/usr/bin/env bash
# run-fabric.sh [--smoke] [BUILD_DIR] -- messaging between two processes
# on this host, next to fi_pingpong for the same provider, in one run:
# the paper's Fig. 3 (one-way latency and throughput by size, poll and
# block dispatch, copy and DMA) to 16 MiB, and the message rate with
# 1..1000 sender/receiver thread pairs; the raw provider's streaming
# bandwidth (fi_stream) and Open MPI's tcp transport (bench/shm/mpi_p2p.c)
# as references.  CSVs, ratios (summary.txt) and
# plots go to bench/results/fabric (or $OUT).  REPS: repetitions (3).
# --smoke: one tiny run that checks the CSV, for the test suite.
set -euo pipefail
smoke=0
[ "${1:-}" = --smoke ] && { smoke=1; shift; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${OUT:-$root/bench/results/fabric}
reps=${REPS:-3}
pp=$build/bench/fabric_pp
run=$build/tools/pcorrun

if [ $smoke = 1 ]; then
	csv=$(mktemp)
	trap 'rm -f "$csv"' EXIT
	PCOR_PROVIDERS=shm PCOR_DISPATCH=poll timeout 100 "$run" -n 2 "$pp" \
		--test lat --sizes 8,64k --iters 200 --warmup 20 --reps 1 >"$csv"
	# Header plus one row per size, each with a positive median.
	rows=$(awk -F, 'NR > 1 && $2 == "latency" && $9 > 0' "$csv" | wc -l)
	[ "$rows" -eq 2 ] || { echo "bad CSV:"; cat "$csv"; exit 1; }
	echo "bench-fabric smoke: ok"
	exit 0
fi

mkdir -p "$out"
sum=$out/summary.txt
echo "# between two processes, $reps repetitions, medians" >"$sum"
echo "# $(uname -srm), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)" >>"$sum"
sizes=1,8,64,512,4k,16k,64k,256k,1m,4m,16m

# fi_pingpong SIZE PROVIDER -> one-way usec per transfer (its own figure)
fipp() {
	local size=$1 prov=$2 port=$((47000 + RANDOM % 2000)) line=
	fi_pingpong -p "$prov" -e rdm -I "$3" -S "$size" -B "$port" \
		>/dev/null 2>&1 &
	local srv=$!
	# The server may not listen yet: a few bounded tries.
	for try in 1 2 3 4 5 6 7 8 9 10; do
		line=$(timeout 60 fi_pingpong -p "$prov" -e rdm -I "$3" \
			-S "$size" -P "$port" localhost 2>/dev/null | awk 'NR == 2')
		[ -n "$line" ] && break
		sleep 0.2
	done
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	echo "$line"
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# fistream PROVIDER -> the raw provider's 1 MiB streaming MB/s (one run)
fistream() {
	local port=$((49000 + RANDOM % 2000))
	"$build/bench/fi_stream" -p "$1" -B "$port" -n 400 >/dev/null 2>&1 &
	local srv=$!
	timeout 60 "$build/bench/fi_stream" -p "$1" -P "$port" 127.0.0.1 \
		-n 400 2>/dev/null | awk -F, '{print $4}'
	wait "$srv" 2>/dev/null || true
}

# The libfabric tcp-based providers stay on loopback, as pcor's ports do
# for a one-host job.
export FI_TCP_IFACE=lo FI_NET_IFACE=lo

for prov in shm 'tcp;ofi_rxm' net; do
	fprov=${prov%%;*}
	tag=${prov//;/_}
	csv=$out/fabric-$tag.csv
	: >"$csv"
	for wait in poll block; do
		for var in copy dma; do
			PCOR_PROVIDERS=$prov PCOR_DISPATCH=$wait \
				"$run" -n 2 "$pp" --test lat --variant $var \
				--sizes $sizes --iters 2000 --reps "$reps" |
				awk -v h="$(wc -l <"$csv")" 'NR > 1 || h == 0' \
					>>"$csv"
			PCOR_PROVIDERS=$prov PCOR_DISPATCH=$wait \
				"$run" -n 2 "$pp" --test bw --variant $var \
				--sizes $sizes --iters 400 --reps "$reps" |
				awk 'NR > 1' >>"$csv"
		done
	done
	# fi_pingpong, the same provider, in the same run: 8 B and 1 MiB.
	f8=$(for r in $(seq "$reps"); do fipp 8 "$fprov" 10000; done |
		awk '{print $7}' | median)
	f1m=$(for r in $(seq "$reps"); do fipp 1048576 "$fprov" 200; done |
		awk '{print $6}' | median)
	s1m=$(for r in $(seq "$reps"); do fistream "$prov"; done | median)
	p8=$(awk -F, '$2=="latency" && $3=="copy" && $4=="poll" && $5==8 {print $9}' "$csv")
	b8=$(awk -F, '$2=="latency" && $3=="copy" && $4=="block" && $5==8 {print $9}' "$csv")
	bw=$(awk -F, '$2=="bandwidth" && $3=="copy" && $4=="poll" && $5==1048576 {print $9}' "$csv")
	{
		echo "== $prov"
		echo "fi_pingpong 8 B one way: $f8 us; pcor poll copy: $p8 us;" \
			"ratio $(awk -v a="$p8" -v b="$f8" 'BEGIN{printf "%.2f", a/b}') (target <= 1.15)"
		echo "pcor block / poll at 8 B: $(awk -v a="$b8" -v b="$p8" 'BEGIN{printf "%.2f", a/b}')"
		echo "1 MiB: pcor streaming $bw MB/s; raw provider streaming" \
			"(fi_stream) $s1m MB/s; ratio" \
			"$(awk -v a="$bw" -v b="$s1m" 'BEGIN{printf "%.2f", a/b}') (target >= 0.9);" \
			"fi_pingpong ping-pong $f1m MB/s"
	} | tee -a "$sum"
done

# Across hosts pcor must not lose to Open MPI's tcp transport: 8 B one
# way over loopback, its median next to pcor's best tcp-based provider.
if command -v mpicc.openmpi >/dev/null; then
	mpx=$out/mpi_p2p.openmpi
	mpicc.openmpi -O2 -std=c11 -o "$mpx" "$root/bench/shm/mpi_p2p.c"
	o8=$(for r in $(seq "$reps"); do
		timeout 120 mpirun.openmpi --allow-run-as-root -n 2 \
			--mca pml ob1 --mca btl self,tcp \
			--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
			"$mpx" lat -m 8:8 -i 20000 -x 2000 2>/dev/null |
			awk -F, '$1=="latency" {print $4}'
	done | median)
	best=
	for tag in tcp_ofi_rxm net; do
		v=$(awk -F, '$2=="latency" && $3=="copy" && $4=="poll" && $5==8 {print $9}' \
			"$out/fabric-$tag.csv")
		if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN{exit !(a < b)}'; then
			best=$v; btag=$tag
		fi
	done
	echo "Open MPI btl tcp 8 B one way: $o8 us; pcor poll copy over $btag:" \
		"$best us; ratio $(awk -v a="$best" -v b="$o8" 'BEGIN{printf "%.2f", a/b}') (target <= 1.0)" |
		tee -a "$sum"
fi

# Message rate with many threads (shm, adaptive dispatch).
rcsv=$out/rate.csv
PCOR_PROVIDERS=shm PCOR_DISPATCH=adaptive "$run" -n 2 "$pp" --test rate \
	--threads 1,16,256,1000 --msgs 2000 --reps "$reps" >"$rcsv"
r1=$(awk -F, '$2=="rate" && $6==1 {print $9}' "$rcsv")
r1000=$(awk -F, '$2=="rate" && $6==1000 {print $9}' "$rcsv")
echo "message rate 1 pair $r1 Mmsg/s, 1000 pairs $r1000 Mmsg/s, ratio" \
	"$(awk -v a="$r1000" -v b="$r1" 'BEGIN{printf "%.2f", a/b}') (target >= 0.5)" |
	tee -a "$sum"

if command -v gnuplot >/dev/null; then
	for tag in shm tcp_ofi_rxm net; do
		csv=$out/fabric-$tag.csv
		for m in latency bandwidth; do
			for w in poll block; do for v in copy dma; do
				awk -F, -v m=$m -v w=$w -v v=$v \
					'$2==m && $4==w && $3==v {print $5, $9}' \
					"$csv" >"$out/$tag-$m-$w-$v.dat"
			done; done
		done
		gnuplot <<EOF
set terminal pngcairo size 1100,450
set output "$out/fig3-$tag.png"
set multiplot layout 1,2 title "pcor between two processes ($tag)"
set logscale xy
set xlabel "message size (bytes)"
set ylabel "one-way latency (us)"
set key left top
plot for [f in "poll-copy poll-dma block-copy block-dma"] \
	"$out/$tag-latency-".f.".dat" using 1:2 with linespoints title f
set ylabel "throughput (MB/s)"
set logscale y
plot for [f in "poll-copy poll-dma block-copy block-dma"] \
	"$out/$tag-bandwidth-".f.".dat" using 1:2 with linespoints title f
unset multiplot
EOF
	done
fi
echo "results in $out"
