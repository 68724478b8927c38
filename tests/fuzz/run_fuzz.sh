#!/usr/bin/env bash
# run_fuzz.sh FUZZER SEED_CORPUS SECONDS ARTIFACT_DIR -- run a libFuzzer
# target for a bounded time over the seed corpus (read only) plus a
# scratch corpus.  Fails on any crash, leak or broken invariant the
# fuzzer reports; the input that caused it stays in ARTIFACT_DIR and is
# printed in full (hex), so it can be replayed: FUZZER INPUT_FILE.
set -u
fuzzer=$1 seeds=$2 secs=$3 artifacts=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-artifact_prefix="$artifacts/" -print_final_stats=1 "$work" "$seeds" \
	>"$work/log" 2>&1
st=$?
grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$work/log" | tail -n 2
if [ $st -ne 0 ]; then
	tail -n 40 "$work/log"
	for a in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* \
		"$artifacts"/oom-*; do
		[ -e "$a" ] || continue
		echo "reproducer kept: $a ($(stat -c %s "$a") bytes)"
		od -A d -t x1 -v "$a"
	done
	exit 1
fi
