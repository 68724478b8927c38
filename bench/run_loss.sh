#!/usr/bin/env bash
# run_loss.sh -- what loss costs: 8 threads of one process send N small
# messages each to another (tests/fabric_app order) over tcp;ofi_rxm,
# lossless and with every 100th and every 20th frame dropped on arrival
# (PCOR_DROP_EVERY), interleaved: every repetition runs every rate once.
#
#   bench/run_loss.sh [BUILD_DIR]
#
# Environment: REPS (default 10), N (messages per thread, default 12500),
# OUT (default a scratch directory).  Writes raw.csv (rep, drop_every,
# seconds, frames, messages) and loss.png there; prints per rate the
# median and range of the time and of the frames sent, and both as ratios
# to the lossless run (the targets: frames <= 1.1x, time <= 2x at 1 %).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
REPS=${REPS:-10} N=${N:-12500}
OUT=${OUT:-$(dirname "$(mktemp -u)")/pcor-loss-bench}
mkdir -p "$OUT"
raw=$OUT/raw.csv
for v in $(env | sed -n 's/^\(PCOR_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
echo "load: $(uptime)"
echo "rep,drop_every,seconds,frames,messages" >"$raw"
for rep in $(seq "$REPS"); do
	for drop in 0 100 20; do
		t0=$(date +%s.%N)
		out=$(PCOR_STATS=1 PCOR_DROP_EVERY=$drop \
			PCOR_PROVIDERS='tcp;ofi_rxm' timeout 300 \
			"$build/tools/pcorrun" -n 2 "$build/tests/fabric_app" \
			order "$N" 2>&1) || { echo "drop $drop failed" >&2; continue; }
		t1=$(date +%s.%N)
		frames=$(sed -n 's/^pcor-stats,pid=1,.*,tx=\([0-9]*\),.*/\1/p' <<<"$out")
		echo "$rep,$drop,$(echo "$t1 - $t0" | bc),$frames,$((N * 8))" >>"$raw"
	done
done
python3 - "$raw" "$OUT" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(int(r['drop_every']), []).append(r)
base_t = statistics.median(float(r['seconds']) for r in by[0])
base_f = statistics.median(int(r['frames']) for r in by[0])
print('drop_every,loss,time_med_s,time_min_s,time_max_s,frames_med,'
      'time_ratio,frames_ratio')
with open(sys.argv[2] + '/summary.csv', 'w') as f:
    for d in sorted(by):
        t = [float(r['seconds']) for r in by[d]]
        fr = [int(r['frames']) for r in by[d]]
        line = '%d,%s,%.2f,%.2f,%.2f,%d,%.2f,%.3f' % (
            d, '0' if not d else '%.0f%%' % (100.0 / d),
            statistics.median(t), min(t), max(t), statistics.median(fr),
            statistics.median(t) / base_t, statistics.median(fr) / base_f)
        print(line)
        f.write(line + '\n')
EOF
if command -v gnuplot >/dev/null; then
	gnuplot <<EOF
set terminal pngcairo size 700,400
set output "$OUT/loss.png"
set datafile separator ","
set title "100k messages over tcp;ofi_rxm: cost of loss (median, range)"
set xlabel "frames dropped"
set ylabel "ratio to lossless"
set style data histogram
set style fill solid 0.6
set yrange [0:*]
set key top left
plot "$OUT/summary.csv" using 7:xtic(2) title "time", \
     "" using 8 title "frames"
EOF
	echo "plot: $OUT/loss.png"
fi
