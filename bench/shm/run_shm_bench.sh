#!/usr/bin/env bash
# run_shm_bench.sh -- pcor over its own shared-memory port against pcor
# over libfabric's shm provider, fi_pingpong -p shm, and the OSU
# micro-benchmarks under Open MPI (vader) and MPICH: 2 processes on this
# host, every configuration measured in the same run, REPS times, in turn.
#
#   bench/shm/run_shm_bench.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR (default: build) holds tools/pcorrun and bench/pcor_*.
# Environment:
#   OSU_SRC    an unpacked OSU micro-benchmarks 7.x source tree: built here
#              (outside the repository) with mpicc.openmpi and mpicc.mpich
#   OSU_OMPI, OSU_MPICH   or the directories of already built OSU
#              binaries (.../libexec/osu-micro-benchmarks/mpi/pt2pt)
#   SCRATCH    where builds and raw results go (default: a directory in
#              the system's temporary directory)
#   REPS       repetitions (default 5); OUT: where the tables and plots go
#              (default: $SCRATCH/out)
# Without OSU the MPI columns are left out.  --smoke runs a tiny pcor-only
# pass (the bench-smoke test) and checks that every program printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
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
	timeout 120 "$pcorrun" -n 2 "$build/bench/pcor_lat" -m 1:64k -i 50 -x 5 >"$tmp/o"
	timeout 120 "$pcorrun" -n 2 "$build/bench/pcor_bw" -m 1:1m -i 5 -x 1 >>"$tmp/o"
	timeout 120 "$pcorrun" -n 2 "$build/bench/pcor_mr" -i 20 -x 2 >>"$tmp/o"
	timeout 120 "$pcorrun" -n 4 "$build/bench/pcor_shmmem" >>"$tmp/o"
	cat "$tmp/o"
	[ "$(grep -c '^latency,' "$tmp/o")" -eq 17 ] &&
		[ "$(grep -c '^bw,' "$tmp/o")" -eq 21 ] &&
		[ "$(grep -c '^rate,' "$tmp/o")" -eq 1 ] &&
		[ "$(grep -c '^shmmem,' "$tmp/o")" -eq 1 ] ||
		{ echo "bench smoke: missing lines" >&2; exit 1; }
	echo "bench smoke: ok"
	exit 0
fi

# ---------------------------------------------------------------- OSU
build_osu() { # IMPL -> prints the pt2pt directory
	local impl=$1 b=$SCRATCH/osu-$1
	local bin=$b/inst/libexec/osu-micro-benchmarks/mpi/pt2pt
	if [ ! -x "$bin/osu_latency" ]; then
		command -v "mpicc.$impl" >/dev/null || return 1
		rm -rf "$b" && mkdir -p "$b"
		(cd "$b" && "$OSU_SRC/configure" CC="mpicc.$impl" \
			CXX="mpicxx.$impl" --prefix="$b/inst" >configure.log 2>&1 &&
			make -j"$(nproc)" >make.log 2>&1 &&
			make install >install.log 2>&1) || return 1
	fi
	echo "$bin"
}
OSU_OMPI=${OSU_OMPI:-}
OSU_MPICH=${OSU_MPICH:-}
if [ -n "${OSU_SRC:-}" ]; then
	OSU_SRC=$(cd "$OSU_SRC" && pwd)
	[ -n "$OSU_OMPI" ] || OSU_OMPI=$(build_osu openmpi) ||
		echo "Open MPI build of OSU failed: $SCRATCH/osu-openmpi" >&2
	[ -n "$OSU_MPICH" ] || OSU_MPICH=$(build_osu mpich) ||
		echo "MPICH build of OSU failed: $SCRATCH/osu-mpich" >&2
fi
OMPI="mpirun.openmpi -n 2 --bind-to core --mca pml ob1 --mca btl self,vader"
MPICH="mpiexec.mpich -n 2 -bind-to core"

# osu LABEL LAUNCHER DIR REP: latency, bandwidth, message rate as CSV.
osu() {
	local label=$1 launcher=$2 dir=$3 rep=$4
	[ -n "$dir" ] || return 0
	timeout 300 $launcher "$dir/osu_latency" -m 1:4194304 2>/dev/null |
		awk -v l="$label" -v r="$rep" '$1 ~ /^[0-9]+$/ {print "latency," l "," $1 "," $2 ",us," r}' >>"$raw" || true
	timeout 300 $launcher "$dir/osu_bw" -m 1:4194304 2>/dev/null |
		awk -v l="$label" -v r="$rep" '$1 ~ /^[0-9]+$/ {print "bw," l "," $1 "," $2 ",MB/s," r}' >>"$raw" || true
	timeout 300 $launcher "$dir/osu_mbw_mr" -m 1:1 2>/dev/null |
		awk -v l="$label" -v r="$rep" '$1 ~ /^[0-9]+$/ {print "rate," l "," $1 "," $3 ",msg/s," r}' >>"$raw" || true
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
		sleep 0.3 # the server must listen first; fi_pingpong has no handshake retry
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
	osu ompi-vader "$OMPI" "$OSU_OMPI" "$rep"
	osu mpich "$MPICH" "$OSU_MPICH" "$rep"
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
echo "tables: $OUT/shm_bench.md; plots: $OUT/shm_latency.svg $OUT/shm_bandwidth.svg" >&2
