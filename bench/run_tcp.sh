#!/usr/bin/env bash
# run_tcp.sh -- small-message latency over TCP: pcor's two tcp-based
# libfabric providers (net, tcp;ofi_rxm; adaptive and poll dispatch) next
# to Open MPI's btl tcp running bench/shm/mpi_p2p.c, interleaved: every
# repetition runs every configuration once, in turn.  Two placements: both
# processes on loopback, and each on its own emulated host (a network
# namespace on a bridge; needs root).
#
#   bench/run_tcp.sh [BUILD_DIR]
#
# Environment: REPS (default 10), SIZES (default 8:8), ITERS (20000),
# OUT (CSV and summary; default a scratch directory).  Prints the medians,
# min and max over repetitions, one way, in microseconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
REPS=${REPS:-10} SIZES=${SIZES:-8:8} ITERS=${ITERS:-20000}
OUT=${OUT:-$(dirname "$(mktemp -u)")/pcor-tcp-bench}
mkdir -p "$OUT"
raw=$OUT/raw.csv
: >"$raw"
pcorrun=$build/tools/pcorrun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for v in $(env | sed -n 's/^\(PCOR_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

mpi=""
printf '#!/bin/sh\nh=$1; shift\nexec ip netns exec "$h" sh -c "$*"\n' >"$OUT/nsrsh"
chmod +x "$OUT/nsrsh"
if command -v mpicc.openmpi >/dev/null; then
	mpi=$OUT/mpi_p2p.ompi
	mpicc.openmpi -O2 -std=c11 -o "$mpi" "$here/shm/mpi_p2p.c"
fi

# Emulated hosts: two namespaces on a bridge in a third.
. "$here/netns.sh"
trap netns_down EXIT
trap 'exit 1' INT TERM
hostlist=""
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null &&
	netns_up "tcpb$$" "10.216.$(($$ % 250 + 1))" 2; then
	hostlist="${hosts[0]},${hosts[1]}"
else
	netns_down
fi

# one PLACEMENT LABEL [VAR=VALUE...]: pcor_lat, its rows labelled.
one() {
	local where=$1 label=$2
	shift 2
	local cmd=("$pcorrun" -n 2)
	if [ "$where" = hosts ]; then
		cmd=(ip netns exec "$ctl" "$pcorrun" -n 2 -H "$hostlist"
			--rsh "ip netns exec %h" --agent-if "$agent")
	fi
	env "$@" timeout 120 "${cmd[@]}" "$build/bench/pcor_lat" -m "$SIZES" \
		-i "$ITERS" -x 500 -t "$where/$label" 2>/dev/null |
		grep '^latency' >>"$raw" || echo "$where/$label failed" >&2
}

ompi() { # PLACEMENT
	[ -n "$mpi" ] || return 0
	if [ "$1" = hosts ]; then
		# One orted per namespace, started through ip netns exec (its
		# command comes as one shell string, as for ssh).
		ip netns exec "$ctl" timeout 120 mpirun.openmpi -n 2 \
			--host "${hosts[0]}:1,${hosts[1]}:1" \
			--mca plm_rsh_agent "$OUT/nsrsh" --mca routed direct \
			--mca btl self,tcp --mca btl_tcp_if_include eth0 \
			--mca oob_tcp_if_include eth0,br0 --bind-to core \
			"$mpi" lat -m "$SIZES" -i "$ITERS" -x 500 -t "hosts/ompi-tcp" \
			2>/dev/null | grep '^latency' >>"$raw" ||
			echo "hosts/ompi-tcp failed" >&2
	else
		timeout 120 mpirun.openmpi -n 2 --bind-to core --mca pml ob1 \
			--mca btl self,tcp "$mpi" lat -m "$SIZES" -i "$ITERS" \
			-x 500 -t "loopback/ompi-tcp" 2>/dev/null |
			grep '^latency' >>"$raw" ||
			echo "loopback/ompi-tcp failed" >&2
	fi
}

echo "load: $(uptime)"
for rep in $(seq 1 "$REPS"); do
	echo "== repetition $rep of $REPS" >&2
	for where in loopback ${hostlist:+hosts}; do
		ompi "$where"
		for prov in net 'tcp;ofi_rxm'; do
			for mode in adaptive poll; do
				one "$where" "$prov/$mode" PCOR_PROVIDERS="$prov" \
					PCOR_DISPATCH=$mode
			done
		done
	done
done
echo "load: $(uptime)"
python3 - "$raw" <<'EOF' | tee "$OUT/summary.md"
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.strip().split(',')
    if len(f) >= 4:
        d[(f[1], int(f[2]))].append(float(f[3]))
print("| placement/configuration | size | median | min | max | n |")
print("|---|---:|---:|---:|---:|---:|")
for (label, size), v in sorted(d.items()):
    print(f"| {label} | {size} | {statistics.median(v):.2f} | "
          f"{min(v):.2f} | {max(v):.2f} | {len(v)} |")
EOF
