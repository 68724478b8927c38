#!/usr/bin/env bash
# run-hosts.sh BUILD_DIR -- the MPI micro-benchmarks (mpi_bench.c) with 4
# ranks on 2 emulated hosts (two network namespaces on a bridge, 2 ranks
# each), for pcor's MPI shim (pcorrun) next to Open MPI (mpirun, tcp
# between the hosts, vader inside) and MPICH (mpiexec), interleaved per
# test over REPS rounds (3).  A launch that fails says so on stderr.
# The MPIs see one machine whatever the namespace (one hostname, one
# /dev/shm): MPICH moves data through shared memory here, so its figures
# are no cross-host reference (docs/BENCHMARKS.md).  Needs root (ip netns).  Prints CSV
# (impl,test,size,value,unit) and a table of medians.
set -u
build=$(cd "${1:-build}" && pwd)
REPS=${REPS:-3} ITERS=${ITERS:-1000}
src=$(cd "$(dirname "$0")" && pwd)/mpi_bench.c
tmp=$(mktemp -d)
. "$(dirname "$0")/../netns.sh"
trap 'netns_down; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(PCOR_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

net="10.217.$(($$ % 250 + 1))"
netns_up "mpih$$" "$net" 2 || { echo "needs root (ip netns)"; exit 77; }
# Launchers run a command on a "host" as a shell string, as ssh does.
printf '#!/bin/sh\nh=$1; shift\nexec ip netns exec "$h" sh -c "$*"\n' \
	>"$tmp/nsrsh"
chmod +x "$tmp/nsrsh"

"$build/tools/pcorcc" -O2 -o "$tmp/mb.pcor" "$src" -lm -pthread
impls=(pcor)
if command -v mpicc.openmpi >/dev/null; then
	mpicc.openmpi -O2 -o "$tmp/mb.ompi" "$src" -lm -pthread && impls+=(ompi)
fi
if command -v mpicc.mpich >/dev/null; then
	mpicc.mpich -O2 -o "$tmp/mb.mpich" "$src" -lm -pthread && impls+=(mpich)
fi

run() { # IMPL TEST: rows of mpi_bench's CSV, prefixed with IMPL
	# latency: 2 ranks, one per host; the collectives: 2 per host
	local np=4 per=2 cmd
	[ "$2" = latency ] && np=2 per=1
	local a=${hosts[0]} b=${hosts[1]}
	case $1 in
	pcor)
		local h="$a,$b"
		[ $per = 2 ] && h="$a,$a,$b,$b"
		cmd=("$build/tools/pcorrun" -n $np -H "$h"
			--rsh 'ip netns exec %h' --agent-if "$net.1") ;;
	ompi)
		cmd=(mpirun.openmpi -n $np --host "$a:$per,$b:$per"
			--mca plm_rsh_agent "$tmp/nsrsh" --mca routed direct
			--mca btl self,vader,tcp --mca btl_tcp_if_include eth0
			--mca oob_tcp_if_include eth0,br0) ;;
	mpich)
		# hydra listens in the control namespace, on the bridge.
		cmd=(mpiexec.mpich -n $np -hosts "$a:$per,$b:$per"
			-launcher rsh -launcher-exec "$tmp/nsrsh" -iface br0
			-genv MPIR_CVAR_NOLOCAL 1) ;;
	esac
	ip netns exec "$ctl" timeout -k 5 300 "${cmd[@]}" "$tmp/mb.$1" "$2" \
		--max-size 65536 --iters "$ITERS" --warmup 50 \
		>"$tmp/out" 2>"$tmp/err"
	grep -E "^$2,[0-9]+,[0-9.]+," "$tmp/out" | sed "s/^/$1,/" ||
		{ echo "$1 $2 failed:" >&2; tail -n 5 "$tmp/err" >&2; }
}

csv=$tmp/all.csv
for rep in $(seq 1 "$REPS"); do
	for t in latency allreduce bcast barrier; do
		for impl in "${impls[@]}"; do run "$impl" "$t" | tee -a "$csv"; done
	done
done
python3 - "$csv" <<'EOF'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.strip().split(',')
    if len(f) >= 4:
        d[(f[1], int(f[2]), f[0])].append(float(f[3]))
impls = sorted({k[2] for k in d}, key=['pcor', 'ompi', 'mpich'].index)
print('| test | size | ' + ' | '.join(impls) + ' |')
print('|---|---:|' + '---:|' * len(impls))
for t, s in sorted({(k[0], k[1]) for k in d}):
    vals = [d.get((t, s, i)) for i in impls]
    print(f'| {t} | {s} | ' + ' | '.join(
        f'{statistics.median(v):.2f}' if v else '-' for v in vals) + ' |')
EOF
