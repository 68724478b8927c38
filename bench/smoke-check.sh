#!/bin/sh
# smoke-check.sh BENCHMARK [FLAGS...] -- run a benchmark briefly and check
# that it printed sane CSV: the harness's header, at least one row, every
# row with its 13 columns, counts that are whole numbers, figures positive
# and finite with min <= median <= max.  Nothing about the figures' size is
# checked: this only keeps the benchmarks from rotting.
set -eu
out=$("$@")
printf '%s\n' "$out" | awk -F, '
function num(s) { return s ~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
function bad(why) { printf "row %d: %s: %s\n", NR, why, $0; err = 1 }
NR == 1 {
	if ($0 != "bench,metric,variant,wait,size,threads,iters,reps,median,min,max,unit,note")
		bad("not the harness header")
	next
}
{
	rows++
	if (NF != 13) { bad("expected 13 columns"); next }
	for (i = 5; i <= 8; i++)
		if ($i !~ /^[0-9]+$/) bad("column " i " is not a count")
	for (i = 9; i <= 11; i++)
		if (!num($i) || $i + 0 <= 0) bad("column " i " is not positive and finite")
	if ($10 + 0 > $9 + 0 || $9 + 0 > $11 + 0) bad("min <= median <= max fails")
	if ($1 == "" || $2 == "" || $3 == "" || $12 == "") bad("empty name")
}
END {
	if (rows < 1) { print "no rows"; err = 1 }
	if (!err) printf "%d rows ok\n", rows
	exit err
}'
