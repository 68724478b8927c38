#!/usr/bin/env bash
# fig5.sh [--smoke] BUILD_DIR [OUT_DIR] -- the pCoR paper's Figure 5 on
# this machine: the seven regions of the 9600x9600 map (2 to 300 tiles,
# 1:1 to 1:16) into 600x600, with imgTLoader on one host and imgCLoader
# with 1 to 4 daemon processes, plus the ratios of docs/BENCHMARKS.md:
#   decode   full map, imgCLoader with 2 daemons (a thread per tile) /
#            imgTLoader with 2 threads (decoding the same tiles at the same scale on the
#            same 2 cores, no messaging): target <= 1.3
#   threads  full map, imgCLoader with 300 loader threads / with 60:
#            target <= 1.0
#   web      slowest of the page's views (/view over HTTP, 7 regions and
#            14 pans/zooms): target < 250 ms
# Writes OUT_DIR/fig5.csv, ratios.csv, web.csv and fig5.png (gnuplot).  Every time
# is the best of REPS renders (5; --smoke: 1, on a 3x4 map).
# NETNS=1 adds imgCLoader rows with the viewer and each daemon on its own
# emulated host (a network namespace on one bridge; tiles travel over
# tcp): needs CAP_NET_ADMIN, skipped without.  The hosts still share this
# machine's cores.
set -euo pipefail
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "${1:?usage: fig5.sh [--smoke] BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$(cd "$(dirname "$0")" && pwd)/results}
mkdir -p "$out"
mv=$build/apps/mapviewer/mapviewer
pcorrun=$build/tools/pcorrun
if [ $smoke = 1 ]; then
	map=$out/map-smoke grid=3x4 reps=1 maxd=2
else
	map=${MAP:-$out/map} grid=15x20 reps=${REPS:-5} maxd=4
fi
"$mv" gen --map "$map" --grid "$grid" >/dev/null
# Every run is bounded: a hang fails the benchmark instead of stalling it.
t() { timeout -k 5 300 "$@"; }

. "$(dirname "$0")/../netns.sh"
trap netns_down EXIT
trap 'exit 1' INT TERM
# hosts_up N: N emulated hosts; sets hostlist, ctl and agent.
hosts_up() {
	netns_up "mvb$$" "10.215.$(($$ % 250 + 1))" "$1" || return 1
	hostlist=$(IFS=,; echo "${hosts[*]}")
}

csv=$out/fig5.csv
echo "config,daemons,loader,tiles,region,scale,threads,ms,failed" > "$csv"
add() { # add CONFIG DAEMONS FILE: prefix each row of FILE
	sed "s/^/$1,$2,/" "$3" >> "$csv"
	rm -f "$3"
}
raw=$out/.raw.csv
rm -f "$raw"
t "$mv" render --map "$map" --paper --repeat "$reps" --csv "$raw" >/dev/null
add tloader 0 "$raw"
t "$mv" render --map "$map" --paper --repeat "$reps" --threads 2 \
	--csv "$raw" >/dev/null
add tloader-2threads 0 "$raw"
for d in $(seq 1 $maxd); do
	t "$pcorrun" -n $((d + 1)) "$mv" render --map "$map" --loader c \
		--paper --repeat "$reps" --csv "$raw" >/dev/null
	add cloader $d "$raw"
done
if [ "${NETNS:-0}" = 1 ] && command -v ip >/dev/null && hosts_up $((maxd + 1)); then
	for d in $(seq 1 $maxd); do
		hl=$(cut -d, -f1-$((d + 1)) <<< "$hostlist")
		t ip netns exec "$ctl" "$pcorrun" -n $((d + 1)) -H "$hl" \
			--rsh "ip netns exec %h" --agent-if "$agent" "$mv" render \
			--map "$map" --loader c --paper --repeat "$reps" \
			--csv "$raw" >/dev/null
		add cloader-netns $d "$raw"
	done
	netns_down
elif [ "${NETNS:-0}" = 1 ]; then
	echo "fig5: no network namespaces here; NETNS rows skipped" >&2
fi

# The ratios: the full map only, the configurations interleaved over
# ROUNDS rounds (best of each), so a burst of load elsewhere on the machine
# hits them alike.
W=$(awk '/^grid/ { print $2 * 640 }' "$map/map.txt")
H=$(awk '/^grid/ { print $3 * 480 }' "$map/map.txt")
rounds=${ROUNDS:-3}
[ $smoke = 1 ] && rounds=1
rcsv=$out/.ratio.csv
echo "config,daemons,loader,tiles,region,scale,threads,ms,failed" > "$rcsv"
for _ in $(seq 1 "$rounds"); do
	t "$mv" render --map "$map" --region "0,0,$W,$H" --repeat "$reps" \
		--threads 2 -o "$out/.full.png" --csv "$raw" >/dev/null
	sed "s/^/decode,0,/" "$raw" >> "$rcsv"; rm -f "$raw"
	for n in 0 60 300; do
		t "$pcorrun" -n 3 "$mv" render --map "$map" --loader c \
			--region "0,0,$W,$H" --repeat "$reps" --threads $n \
			-o "$out/.full.png" --csv "$raw" >/dev/null
		sed "s/^/cloader-$n,2,/" "$raw" >> "$rcsv"; rm -f "$raw"
	done
done
rm -f "$out/.full.png"
ms() { # ms CONFIG: the best full-map time over the rounds
	awk -F, -v c="$1" 'NR > 1 && $1 == c && (m == "" || $8 < m) { m = $8 }
		END { print m }' "$csv"
}
tail -n +2 "$rcsv" >> "$csv"
rm -f "$rcsv"

# The web page's views: a server on 2 daemons, curl for each view.
port_file=$out/.serve.out
# timeout itself in the background (not a shell function), so $! is its
# pid: it passes the TERM below on to pcorrun, which ends the processes.
timeout -k 5 240 "$pcorrun" -n 3 "$mv" serve --map "$map" --loader c \
	--port 0 --seconds 240 > "$port_file" 2>&1 &
spid=$!
port=
for _ in $(seq 1 300); do
	port=$(sed -n 's,.*http://127.0.0.1:\([0-9]*\)/.*,\1,p' "$port_file")
	[ -n "$port" ] && break
	sleep 0.1
done
worst=0
if [ -n "$port" ]; then
	echo "region,ms" > "$out/web.csv"
	views=()
	for s in 1 2 4 5 8 10 16; do
		w=$((600 * s)); [ $w -gt $W ] && w=$W
		h=$((600 * s)); [ $h -gt $H ] && h=$H
		views+=("0,0,$w,$h" "$(( (W - w) / 2 )),$(( (H - h) / 2 )),$w,$h")
	done
	for v in "${views[@]}"; do
		IFS=, read -r x y w h <<< "$v"
		ms=$(curl -s -o /dev/null -w '%{time_total}' \
			"http://127.0.0.1:$port/view?x=$x&y=$y&w=$w&h=$h&ww=600&wh=600")
		ms=$(awk -v s="$ms" 'BEGIN { printf "%.1f", s * 1000 }')
		echo "$v,$ms" >> "$out/web.csv"
		worst=$(awk -v a="$worst" -v b="$ms" 'BEGIN { print (b > a ? b : a) }')
	done
fi
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
rm -f "$port_file"

r() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
{
	echo "metric,value,target"
	echo "decode_ratio,$(r "$(ms cloader-0)" "$(ms decode)"),<=1.3"
	echo "threads300_over_60,$(r "$(ms cloader-300)" "$(ms cloader-60)"),<=1.0"
	echo "web_worst_ms,$worst,<250"
} > "$out/ratios.csv"
cat "$csv"
cat "$out/ratios.csv"

command -v gnuplot >/dev/null || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
series() { awk -F, -v c="$1" -v d="$2" '$1 == c && $2 == d { print $4, $8 }' "$csv" > "$tmp/$3"; }
series tloader 0 t
series tloader-2threads 0 t2
plot="plot '$tmp/t' w lp t 'imgTLoader (thread per tile)', '$tmp/t2' w lp t 'imgTLoader, 2 threads (decode limit)'"
for d in $(seq 1 $maxd); do
	series cloader $d c$d
	plot="$plot, '$tmp/c$d' w lp t 'imgCLoader, $d daemon(s)'"
	series cloader-netns $d n$d
	[ -s "$tmp/n$d" ] &&
		plot="$plot, '$tmp/n$d' w lp dt 2 t 'imgCLoader, $d daemon host(s) (netns, tcp)'"
done
gnuplot <<EOT
set terminal pngcairo size 900,600 noenhanced
set output '$out/fig5.png'
set title 'Map viewer: 7 regions into 600x600 (Figure 5 of the pCoR paper, this machine)'
set xlabel 'tiles in the region (scale 1:1 ... 1:16)'
set ylabel 'render time, ms (best of $reps)'
set logscale x
set key top left
set grid
$plot
EOT
echo "plot: $out/fig5.png"
