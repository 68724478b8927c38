#!/usr/bin/env bash
# naming_bench.sh PCORRUN NAMING_BENCH [--smoke] -- the directory service's
# benchmarks: bootstrap time for 2, 8, 32 and 64 processes on this host
# (pcorrun start to every process past pcor_init; median of REPS runs),
# pid and name lookup costs, and agent memory per entry.  Prints Markdown.
set -euo pipefail
pcorrun=$1 bench=$2
sizes="2 8 32 64" reps=${REPS:-5} lookups=2000 names=100000
if [ "${3:-}" = --smoke ]; then sizes="2" reps=1 lookups=50 names=100; fi

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| processes | bootstrap, median (ms) | best (ms) | whole run (ms) |"
echo "|---:|---:|---:|---:|"
for n in $sizes; do
	boot=() whole=()
	for _ in $(seq "$reps"); do
		t0=$(date +%s%N)
		out=$(timeout 120 "$pcorrun" -n "$n" "$bench" bootstrap)
		t1=$(date +%s%N)
		last=$(echo "$out" | awk '/^init_done_ns/ {print $2}' | sort -n | tail -1)
		cnt=$(echo "$out" | grep -c '^init_done_ns')
		[ "$cnt" -eq "$n" ] || { echo "only $cnt of $n reported" >&2; exit 1; }
		boot+=("$(( (last - t0) / 1000 ))")
		whole+=("$(( (t1 - t0) / 1000 ))")
	done
	bm=$(printf '%s\n' "${boot[@]}" | median)
	bb=$(printf '%s\n' "${boot[@]}" | sort -n | head -1)
	wm=$(printf '%s\n' "${whole[@]}" | median)
	awk -v n="$n" -v a="$bm" -v b="$bb" -v c="$wm" \
		'BEGIN {printf "| %d | %.1f | %.1f | %.1f |\n", n, a/1000, b/1000, c/1000}'
done
echo
out=$(timeout 120 "$pcorrun" -n 8 "$bench" lookup "$lookups")
echo "| lookup (8 processes, one host) | µs |"
echo "|---|---:|"
echo "$out" | awk '
/pid_lookup_uncached_us/ {print "| pid, uncached (round trip to its home agent) | " $2 " |"}
/pid_lookup_cached_us/ {print "| pid, cached | " $2 " |"}
/name_lookup_us/ {print "| name (always asks the home agent) | " $2 " |"}'
echo
out=$(env -u PCOR_JOB_SIZE timeout 120 "$bench" memory "$names")
echo "| agent memory | bytes |"
echo "|---|---:|"
echo "$out" | awk '
/bytes_per_name_total/ {print "| heap per published name (home entry + owner record, measured) | " $2 " |"}
/sizeof_home_name/ {print "| home entry of a name (struct) | " $2 " |"}
/sizeof_owner_name/ {print "| owner record of a name (struct) | " $2 " |"}
/sizeof_home_member/ {print "| home entry of a process (struct, 8 ports max) | " $2 " |"}
/sizeof_view_entry/ {print "| view + cache entry per known process (struct) | " $2 " |"}'
