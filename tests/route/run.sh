#!/usr/bin/env bash
# run.sh CASE PCORRUN APP [ARG...] -- forwarding across data networks that
# reach only some hosts, each "host" a network namespace.
#
#   mgmt  one bridge joining every host: directory agents only
#   net1  hosts A, E, B, G (interface d1)
#   net2  hosts B, G, C, D (interface d2)
#
# Data ports are confined per host with PCOR_IFACES (d1, d2 or both) and
# PCOR_PROVIDERS, set by a wrapper that the remote-shell command runs in
# each namespace.  net1 uses tcp;ofi_rxm.  net2 uses udp;ofi_rxd when that
# provider opens a port on d2 here (twogw: see below), otherwise a second
# tcp;ofi_rxm network (the routing is the same: a network is provider plus
# subnet); the first line of output says which.
#
# Cases (route_app's): relay (A, B, C), join (A, B, C; D spawned), gwkill
# (A, B, C, E; B killed), twogw (A, B, C, G; B killed).  "bench": APP is
# route_bench, run on A, B, C, its CSV on stdout; further arguments go to
# it.  Skips (77) without ip or CAP_NET_ADMIN.  Namespaces and processes
# are removed on every exit.
#
# Environment: ROUTE_NET2=udp|tcp forces net2's provider; ROUTE_TIMEOUT
# bounds the job (s, default 240); ROUTE_KEEP=DIR keeps the logs there.
set -u
case_=$1 pcorrun=$2 app=$3; shift 3
max=67108864
[ "$case_" = relay ] && [ $# -gt 0 ] && max=$1
bench_args=("$@")
tmp=$(mktemp -d)
marker="pcorroute-$$-$RANDOM"
namespaces=()
job=""

cleanup() {
	# The job's launcher, then anything left in our namespaces, by pid.
	[ -n "$job" ] && kill -KILL "$job" 2>/dev/null
	for ns in "${namespaces[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL: $case_: $*"
	# ROUTE_KEEP=DIR keeps the full logs for a look afterwards.
	[ -n "${ROUTE_KEEP:-}" ] && cp "$tmp/out" "$tmp/err" "$ROUTE_KEEP/"
	echo "--- stdout"; tail -n 40 "$tmp/out" 2>/dev/null
	echo "--- stderr"; grep -v " info " "$tmp/err" 2>/dev/null | tail -n 40
	exit 1
}
skip() { echo "SKIP: $*"; exit 77; }

command -v ip >/dev/null || skip "ip (iproute2) is not installed"
command -v fi_info >/dev/null || skip "fi_info (libfabric tools) is not installed"
fi_info -p "tcp;ofi_rxm" >/dev/null 2>&1 || skip "no tcp;ofi_rxm provider"

tag="pr$$"
ctl="${tag}ctl"
ip netns add "$ctl" 2>"$tmp/err" ||
	skip "cannot create network namespaces (no CAP_NET_ADMIN?): $(cat "$tmp/err")"
namespaces+=("$ctl")
k=$(( $$ % 250 + 1 ))
mgmt="10.217.$k" net1="10.218.$k" net2="10.219.$k"
ip -n "$ctl" link set lo up
for br in br0 br1 br2; do
	ip -n "$ctl" link add "$br" type bridge || fail "no bridge support"
	ip -n "$ctl" link set "$br" up
done
ip -n "$ctl" addr add "$mgmt.1/24" dev br0

# host NAME INDEX NETS: a namespace on mgmt and on the data networks NETS.
host() {
	local ns="$tag$1" i=$2 nets=$3 ifaces=""
	ip netns add "$ns" || fail "ip netns add $ns"
	namespaces+=("$ns")
	ip -n "$ns" link set lo up
	ip -n "$ctl" link add "m$i" type veth peer name eth0 netns "$ns" ||
		fail "no veth support"
	ip -n "$ctl" link set "m$i" master br0 up
	ip -n "$ns" addr add "$mgmt.$((i + 1))/24" dev eth0
	ip -n "$ns" link set eth0 up
	for n in $nets; do
		local sub; [ "$n" = 1 ] && sub=$net1 || sub=$net2
		ip -n "$ctl" link add "n$n$i" type veth peer name "d$n" netns "$ns"
		ip -n "$ctl" link set "n$n$i" master "br$n" up
		ip -n "$ns" addr add "$sub.$((i + 1))/24" dev "d$n"
		ip -n "$ns" link set "d$n" up
		ifaces="${ifaces:+$ifaces,}d$n"
	done
	echo "$ifaces" >"$tmp/ifaces.$ns"
}
host A 1 "1"
host B 2 "1 2"
host C 3 "2"
host D 4 "2"
host E 5 "1"
host G 6 "1 2"

# Can udp;ofi_rxd open a port on d2?  (Probed in C's namespace.)
# twogw runs net2 over tcp unless told otherwise: after its failover burst,
# udp;ofi_rxd (libfabric 1.17) sometimes stalls the surviving gateway's
# transmit window to C for good (every send returns EAGAIN), as the
# fabric alltoall test sees with many senders; resends cannot get through.
want2=${ROUTE_NET2:-udp}
[ "$case_" = twogw ] && want2=${ROUTE_NET2:-tcp}
net2prov="tcp;ofi_rxm"
if [ "$want2" = udp ] && ip netns exec "${tag}C" fi_info -p "udp;ofi_rxd" 2>/dev/null |
	grep -q "domain: d2"; then
	net2prov="udp;ofi_rxd"
fi
echo "net1: tcp;ofi_rxm, net2: $net2prov" >&2
both="tcp;ofi_rxm"
[ "$net2prov" = "$both" ] || both="$both,$net2prov"

# The wrapper every process starts through: its host's knobs, then the
# command pcorrun gave (which does not override them: not in our env).
cat >"$tmp/hostenv" <<EOF
#!/bin/sh
ns=\$1; shift
ifaces=\$(cat "$tmp/ifaces.\$ns")
case \$ifaces in
d1)    prov="tcp;ofi_rxm" ;;
d2)    prov="$net2prov" ;;
*)     prov="$both" ;;
esac
PCOR_IFACES=\$ifaces PCOR_PROVIDERS=\$prov exec "\$@"
EOF
chmod +x "$tmp/hostenv"
unset PCOR_IFACES PCOR_PROVIDERS PCOR_JOB_SIZE PCOR_JOB_PID PCOR_JOB_KEY \
	PCOR_AGENT_ADDR
export PCOR_LOG_LEVEL=info PCOR_LOG_SUBSYS=dispatch,route

# run_job HOSTS STATUS... -- the app's case over HOSTS; the exit status
# must be one of STATUS.  Bounded by timeout; the launcher ends its job.
run_job() {
	local hosts=$1; shift
	local n; n=$(tr ',' '\n' <<<"$hosts" | wc -l)
	local args=("$case_")
	case $case_ in
	relay) args+=("$max") ;;
	bench) args=("${bench_args[@]}") ;;
	join)  args+=("${tag}D") ;;
	esac
	local extra=()
	{ [ "$case_" = gwkill ] || [ "$case_" = twogw ]; } && extra=(--keep-going)
	ip netns exec "$ctl" timeout -k 5 "${ROUTE_TIMEOUT:-240}" "$pcorrun" -n "$n" -H "$hosts" \
		--rsh "ip netns exec %h $tmp/hostenv %h" --agent-if "$mgmt.1" \
		--tag-output "${extra[@]}" "$app" "${args[@]}" "$marker" \
		>"$tmp/out" 2>"$tmp/err" &
	job=$!
	wait "$job"
	st=$?
	job=""
	[ "$st" -ne 124 ] || fail "timed out"
	for want in "$@"; do
		[ "$st" -eq "$want" ] && return 0
	done
	fail "exit status $st, expected $*"
}

ok() { grep -c -- "^\[$1\] $case_: ok" "$tmp/out"; }
fwd() { # what pid $1's ports forwarded, summed
	grep -- "^\[$1\].*forwarded" "$tmp/err" |
		sed 's/.*forwarded \([0-9]*\).*/\1/' | awk '{s += $1} END {print s + 0}'
}

h() { local out="" x; for x in "$@"; do out="${out:+$out,}$tag$x"; done; echo "$out"; }

case $case_ in
relay)
	run_job "$(h A B C)" 0
	for p in 0 1 2; do [ "$(ok $p)" -eq 1 ] || fail "pid $p did not pass"; done
	[ "$(fwd 1)" -gt 0 ] || fail "B forwarded nothing"
	[ "$(fwd 0)" -eq 0 ] && [ "$(fwd 2)" -eq 0 ] ||
		fail "an end host forwarded"
	echo "B forwarded $(fwd 1) frames"
	;;
join)
	run_job "$(h A B C)" 0
	[ "$(grep -c "^\[3\] joined: ok" "$tmp/out")" -eq 1 ] ||
		fail "D did not pass"
	for p in 0 1 2; do [ "$(ok $p)" -eq 1 ] || fail "pid $p did not pass"; done
	[ "$(fwd 1)" -gt 0 ] || fail "B forwarded nothing"
	;;
gwkill)
	run_job "$(h A B C E)" 137
	for p in 0 2 3; do [ "$(ok $p)" -eq 1 ] || fail "pid $p did not pass"; done
	grep -q "process 1 .*killed by signal 9" "$tmp/err" ||
		fail "pcorrun did not report B's death"
	;;
twogw)
	run_job "$(h A B C G)" 137
	for p in 0 2 3; do [ "$(ok $p)" -eq 1 ] || fail "pid $p did not pass"; done
	[ "$(fwd 3)" -gt 0 ] || fail "G forwarded nothing"
	echo "G forwarded $(fwd 3) frames"
	;;
bench)
	run_job "$(h A B C)" 0
	sed -n 's/^\[0\] //p' "$tmp/out"
	grep -q "^\[0\] pair," "$tmp/out" || fail "no results"
	[ -n "${ROUTE_KEEP:-}" ] && cp "$tmp/out" "$tmp/err" "$ROUTE_KEEP/"
	exit 0
	;;
*)
	echo "unknown case $case_"; exit 2 ;;
esac
[ -n "${ROUTE_KEEP:-}" ] && cp "$tmp/out" "$tmp/err" "$ROUTE_KEEP/"
echo "PASS: $case_"
exit 0
