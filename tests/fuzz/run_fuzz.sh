#!/usr/bin/env bash
# run_fuzz.sh FUZZER SEED_CORPUS SECONDS -- run a libFuzzer target for a
# bounded time over the seed corpus (read only) plus a scratch corpus.
# Fails on any crash, leak or broken invariant the fuzzer reports.
set -u
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-artifact_prefix="$work/" -print_final_stats=1 "$work" "$seeds" \
	>"$work/log" 2>&1
st=$?
grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$work/log" | tail -n 2
if [ $st -ne 0 ]; then
	tail -n 40 "$work/log"
	for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
		[ -e "$a" ] && { echo "reproducer: $(basename "$a")"; od -A d -t x1 "$a" | head -n 8; }
	done
	exit 1
fi
