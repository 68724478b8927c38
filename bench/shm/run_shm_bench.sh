#!/usr/bin/env bash
# run_shm_bench.sh -- pcor over its own shared-memory port against pcor
# over libfabric's shm provider, fi_pingpong -p shm, and the same
# latency / bandwidth / message-rate patterns under Open MPI (vader) and
# MPICH (bench/shm/mpi_p2p.c): 2 processes on this host, every
# configuration measured in the same run, REPS times, in turn.
#
#   bench/shm/run_shm_bench.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR (default: build) holds tools/pcorrun and bench/pcor_*.
# Environment:
#   SCRATCH    where the MPI builds and raw results go (default: a
#              directory in the system's temporary directory)
#   REPS       repetitions (default 5); OUT: where the tables and plots go
#              (default: $SCRATCH/out)
# An MPI whose compiler wrapper (mpicc.openmpi, mpicc.mpich) is missing
# is left out.  --smoke runs a tiny pcor-only pass (the bench-smoke test)
# and checks that every program printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
build=$(cd "${1:-build}" && pwd)
SCRATCH=${SCRATCH:-$(dirname "$(mktemp -u)")/pcor-shm-bench}
OUT=${OUT:-$SCRATCH/out}
REPS=${REPS:-5}
mkdir -p "$SCRATCH" "$OUT"
raw=$SCRATCH/raw.csv
pcorrun=$build/tools/pcorrun
for p in pcor_lat pcor_bw pcor_mr pcor_shmmem; do
	[ -x "$build/bench/$p" ] || { echo "missing $build/bench/$p" >&2; exit 1; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ $smoke = 1 ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	export PCOR_PROVIDERS=pcor-shm
	timeout 30 "$pcorrun" -n 2 "$build/bench/pcor_lat" -m 1:64k -i 50 -x 5 >"$tmp/o"
	timeout 30 "$pcorrun" -n 2 "$build/bench/pcor_bw" -m 1:1m -i 5 -x 1 >>"$tmp/o"
	timeout 30 "$pcorrun" -n 2 "$build/bench/pcor_mr" -i 20 -x 2 >>"$tmp/o"
	timeout 30 "$pcorrun" -n 4 "$build/bench/pcor_shmmem" >>"$tmp/o"
	cat "$tmp/o"
	[ "$(grep -c '^latency,' "$tmp/o")" -eq 17 ] &&
		[ "$(grep -c '^bw,' "$tmp/o")" -eq 21 ] &&
		[ "$(grep -c '^rate,' "$tmp/o")" -eq 1 ] &&
		[ "$(grep -c '^shmmem,' "$tmp/o")" -eq 1 ] ||
		{ echo "bench smoke: missing lines" >&2; exit 1; }
	echo "bench smoke: ok"
	exit 0
fi

# ---------------------------------------------------------------- MPI
MPI_OMPI=$(mpi_p2p_build openmpi "$SCRATCH") || echo "no Open MPI: column left out" >&2
MPI_MPICH=$(mpi_p2p_build mpich "$SCRATCH") || echo "no MPICH: column left out" >&2
OMPI="mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl self,vader"
MPICH="mpiexec.mpich -n 2 -bind-to core"

# mpi LABEL LAUNCHER EXE REP: latency, bandwidth, message rate as CSV.
mpi() {
	local label=$1 launcher=$2 exe=$3 rep=$4 b
	[ -n "$exe" ] || return 0
	for b in "lat -m 1:4m" "bw -m 1:4m" "mr"; do
		timeout 300 $launcher "$exe" $b -t "$label" 2>/dev/null |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label: $b failed" >&2
	done
}

# pcor LABEL PROVIDERS REP
pcor() {
	local label=$1 prov=$2 rep=$3 b
	for b in "pcor_lat -m 1:4m" "pcor_bw -m 1:4m" "pcor_mr"; do
		PCOR_PROVIDERS=$prov PCOR_AFFINITY=auto timeout 600 "$pcorrun" \
			-n 2 $build/bench/$b -t "$label" |
			sed "s/\$/,$rep/" >>"$raw" || echo "$label: $b failed" >&2
	done
}

# fi_pingpong over libfabric shm: one-way latency (usec/xfer).
fipp() {
	local rep=$1 s it port=$((30000 + RANDOM % 20000))
	for s in 1 2 4 8 16 64 256 1024 4096 16384 65536 262144 1048576 4194304; do
		if [ $s -le 65536 ]; then it=20000; elif [ $s -le 1048576 ]; then it=2000; else it=500; fi
		port=$((port + 1))
		timeout 120 taskset -c 0 fi_pingpong -p shm -e rdm -I $it -S $s -B $port >/dev/null 2>&1 &
		local spid=$!
		# The server must listen first (the client does not retry): wait
		# for its socket, a bounded number of times.
		for _ in $(seq 200); do
			ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN && break
			sleep 0.01
		done
		timeout 120 taskset -c 1 fi_pingpong -p shm -e rdm -I $it -S $s -P $port 127.0.0.1 2>/dev/null |
			awk -v r="$rep" -v s="$s" '$1 ~ /^[0-9]/ {l=$0} END {split(l, f); if (f[7] != "") print "latency,fi_pingpong-shm," s "," f[7] ",us," r}' >>"$raw" || true
		wait $spid || true
	done
}

: >"$raw"
for rep in $(seq "$REPS"); do
	echo "== repetition $rep of $REPS" >&2
	pcor pcor-shm pcor-shm "$rep"
	pcor pcor-ofi-shm shm "$rep"
	command -v fi_pingpong >/dev/null && fipp "$rep"
	mpi ompi-vader "$OMPI" "$MPI_OMPI" "$rep"
	mpi mpich "$MPICH" "$MPI_MPICH" "$rep"
done
# Shared memory per host (deterministic: one run per size).
for np in 2 8 32; do
	PCOR_PROVIDERS=pcor-shm timeout 300 "$pcorrun" -n $np \
		"$build/bench/pcor_shmmem" -t pcor-shm | sed 's/$/,1/' >>"$raw"
done
python3 "$here/summarize.py" "$raw" "$OUT"
if command -v gnuplot >/dev/null; then
	(cd "$OUT" && gnuplot "$here/plot.gp")
fi
echo "tables: $OUT/shm_bench.md; plot: $OUT/shm_bench.png" >&2
