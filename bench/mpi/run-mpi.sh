#!/bin/bash
# run-mpi.sh -- the MPI micro-benchmarks (mpi_bench.c) on one host for
# pcor's MPI shim next to Open MPI (vader shared memory) and MPICH, when
# installed.  Prints CSV (impl,test,size,value,unit) to stdout and, with
# gnuplot, plots one PNG per test into OUTDIR.
#
#   run-mpi.sh BUILD_DIR [OUTDIR]     the full run (2 ranks p2p, 4 coll)
#   run-mpi.sh --smoke BUILD_DIR      tiny pcor-only runs: each test runs
#                                     and prints sane CSV (bench-smoke)
# Figures on a shared 2-core machine are noisy; compare shapes, not digits.
set -u
smoke=0
if [ "${1-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "$1" && pwd)
out=${2:-mpi-bench-out}
src=$(cd "$(dirname "$0")" && pwd)/mpi_bench.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NP_COLL=${NP_COLL:-4}
tests="latency latency_mt bw bibw bcast reduce allreduce allgather alltoall barrier"

if [ $smoke = 1 ]; then
	args=(--max-size 4096 --iters 20 --warmup 2)
else
	args=(--max-size $((1 << 20)) --iters ${ITERS:-1000} --warmup 100)
fi

# run_impl NAME LAUNCH... : every test with that launcher, as CSV rows.
run_impl() {
	local name=$1; shift
	for t in $tests; do
		local np=$NP_COLL
		case $t in latency|latency_mt|bw|bibw) np=2 ;; esac
		if [ $smoke = 1 ]; then np=2; fi
		timeout -k 5 300 "$@" -n "$np" "$tmp/$name" "$t" "${args[@]}" \
			>"$tmp/out" 2>"$tmp/err" ||
			{ echo "$name $t failed:" >&2; cat "$tmp/err" >&2; return 1; }
		grep -E "^$t,[0-9]+,[0-9.]+," "$tmp/out" | sed "s/^/$name,/"
	done
}

echo "impl,test,size,value,unit" >"$tmp/all.csv"
"$build/tools/pcorcc" -O2 -o "$tmp/pcor" "$src" -pthread || exit 1
run_impl pcor "$build/tools/pcorrun" >>"$tmp/all.csv" || exit 1
if [ $smoke = 1 ]; then
	n=$(grep -c '^pcor,' "$tmp/all.csv")
	cat "$tmp/all.csv"
	[ "$n" -ge 40 ] || { echo "FAIL: only $n rows" >&2; exit 1; }
	exit 0
fi
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null
then
	mpicc.openmpi -O2 -o "$tmp/openmpi" "$src" -pthread &&
		OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		run_impl openmpi mpirun.openmpi --oversubscribe \
			--mca btl self,vader >>"$tmp/all.csv"
fi
if command -v mpicc.mpich >/dev/null && command -v mpiexec.mpich >/dev/null
then
	mpicc.mpich -O2 -o "$tmp/mpich" "$src" -pthread &&
		run_impl mpich mpiexec.mpich >>"$tmp/all.csv"
fi
cat "$tmp/all.csv"
mkdir -p "$out"
cp "$tmp/all.csv" "$out/mpi.csv"
if command -v gnuplot >/dev/null; then
	for t in $tests; do
		[ "$t" = barrier ] && continue
		cmd="set terminal png size 800,500; set output '$out/$t.png';"
		cmd+="set datafile separator ','; set logscale x 2;"
		cmd+="set title 'MPI $t (one host)'; set xlabel 'bytes';"
		plots=""
		for impl in pcor openmpi mpich; do
			grep -q "^$impl,$t," "$tmp/all.csv" || continue
			grep "^$impl,$t," "$tmp/all.csv" >"$tmp/$impl-$t.csv"
			plots+="${plots:+, }'$tmp/$impl-$t.csv' using 3:4 with linespoints title '$impl'"
		done
		gnuplot -e "$cmd plot $plots" 2>/dev/null
	done
	echo "plots in $out" >&2
fi
