#!/usr/bin/env bash
# run_tcp.sh -- small-message latency over TCP: pcor's two tcp-based
# libfabric providers (net, tcp;ofi_rxm; adaptive and poll dispatch) next
# to Open MPI's btl tcp running bench/shm/mpi_p2p.c and, on loopback, to
# libfabric's own fi_pingpong over the same providers (the floor of a
# libfabric-based port), interleaved: every repetition runs every
# configuration once, in turn.  Two placements: both processes on
# loopback, and each on its own emulated host (a network namespace on a
# bridge; needs root).
#
#   bench/run_tcp.sh [BUILD_DIR]
#
# Environment: REPS (default 10), SIZES (default 8:8), ITERS (20000),
# PLACES (default "loopback hosts"), PROVS (default "net tcp;ofi_rxm",
# space-separated), MODES (default "adaptive poll"), BASE_LIB (a
# directory holding another build's libpcor.so.0: each pcor configuration
# also runs with it, labelled "before:", for a before/after comparison
# under the same conditions), OUT (CSV and summary; default a scratch
# directory).  Prints the medians, min and max over repetitions, one way,
# in microseconds: fi_pingpong's figure is its mean; the others give
# their mean and the median and 99th percentile round trip (p50, p99),
# halved.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
REPS=${REPS:-10} SIZES=${SIZES:-8:8} ITERS=${ITERS:-20000}
PLACES=${PLACES:-loopback hosts} MODES=${MODES:-adaptive poll}
IFS=' ' read -r -a provs <<<"${PROVS:-net tcp;ofi_rxm}"
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
if [[ " $PLACES " == *" hosts "* ]] && [ "$(id -u)" = 0 ] &&
	command -v ip >/dev/null &&
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
		grep '^latency\|^lat-p50\|^lat-p99' >>"$raw" ||
		echo "$where/$label failed" >&2
}

# fipp PROVIDER: libfabric's fi_pingpong on loopback, each size of SIZES'
# two ends (its one-way usec per transfer, a mean).
fipp() {
	command -v fi_pingpong >/dev/null || return 0
	local prov=$1 size port=$((47000 + RANDOM % 2000)) line srv try
	for size in ${SIZES%%:*} ${SIZES##*:}; do
		# Bounded: a server left behind would hold the caller's lock.
		FI_TCP_IFACE=lo FI_NET_IFACE=lo timeout 60 fi_pingpong \
			-p "$prov" -e rdm -I "$ITERS" -S "$size" -B "$port" \
			>/dev/null 2>&1 &
		srv=$!
		line=
		for try in 1 2 3 4 5; do # the server may not listen yet
			sleep 0.2
			line=$(FI_TCP_IFACE=lo FI_NET_IFACE=lo timeout 30 \
				fi_pingpong -p "$prov" -e rdm -I "$ITERS" \
				-S "$size" -P "$port" localhost 2>/dev/null |
				awk 'NR == 2 {print $7}') || line=
			[ -n "$line" ] && break
		done
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
		if [ -n "$line" ]; then
			echo "latency,loopback/fi_pingpong-$prov,$size,$line,us" >>"$raw"
		else
			echo "loopback/fi_pingpong-$prov failed" >&2
		fi
		[ "${SIZES%%:*}" = "${SIZES##*:}" ] && break
	done
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
			2>/dev/null | grep '^latency\|^lat-p50\|^lat-p99' >>"$raw" ||
			echo "hosts/ompi-tcp failed" >&2
	else
		timeout 120 mpirun.openmpi -n 2 --bind-to core --mca pml ob1 \
			--mca btl self,tcp "$mpi" lat -m "$SIZES" -i "$ITERS" \
			-x 500 -t "loopback/ompi-tcp" 2>/dev/null |
			grep '^latency\|^lat-p50\|^lat-p99' >>"$raw" ||
			echo "loopback/ompi-tcp failed" >&2
	fi
}

echo "load: $(uptime)"
for rep in $(seq 1 "$REPS"); do
	echo "== repetition $rep of $REPS" >&2
	for where in $PLACES; do
		[ "$where" = hosts ] && [ -z "$hostlist" ] && continue
		if [ "$where" = loopback ]; then
			for prov in "${provs[@]}"; do
				fipp "${prov%%;*}"
			done
		fi
		ompi "$where"
		for prov in "${provs[@]}"; do
			for mode in $MODES; do
				one "$where" "$prov/$mode" PCOR_PROVIDERS="$prov" \
					PCOR_DISPATCH=$mode
				[ -z "${BASE_LIB:-}" ] ||
					one "$where" "before:$prov/$mode" \
						PCOR_PROVIDERS="$prov" \
						PCOR_DISPATCH=$mode \
						LD_LIBRARY_PATH="$BASE_LIB"
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
        stat = "mean" if f[0] == "latency" else f[0][4:]
        d[(f[1], int(f[2]), stat)].append(float(f[3]))
print("| placement/configuration | size | figure | median | min | max | n |")
print("|---|---:|---|---:|---:|---:|---:|")
for (label, size, stat), v in sorted(d.items()):
    print(f"| {label} | {size} | {stat} | {statistics.median(v):.2f} | "
          f"{min(v):.2f} | {max(v):.2f} | {len(v)} |")
EOF
