#!/bin/bash
# mpi_run.sh -- MPI shim cases that need more than one run of a program.
#
#   fatal   a bad rank under MPI_ERRORS_ARE_FATAL: the job ends, non-zero,
#           and stderr names the call, the rank and the error class
#   pcorcc  pcorcc --showme prints the flags; a program that includes
#           <mpi.h> builds with pcorcc and runs under pcorrun -n 2
#   mpirun  the test program under Open MPI's mpirun (PMIx bootstrap)
#   netns   2 ranks on each of 2 "hosts" made of network namespaces: the
#           collectives that work by host (app: mpi_more)
# Exit 77 means skipped, with the reason on stdout.
set -u
case_=$1 pcorrun=$2 app=$3 pcorcc=$4 pmix=${5:-nopmix}
tmp=$(mktemp -d)
namespaces=()
cleanup() {
	for ns in "${namespaces[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out" 2>/dev/null
	echo "--- stderr"; cat "$tmp/err" 2>/dev/null; exit 1; }

case $case_ in
fatal)
	timeout -k 5 60 "$pcorrun" -n 3 "$app" fatal >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc -ne 0 ] || fail "the job exited 0"
	[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "the job hung (timeout)"
	grep -q "fatal error in MPI_Send on rank 1: MPI_ERR_RANK" "$tmp/err" ||
		fail "no message naming the call, the rank and the class"
	;;
pcorcc)
	flags=$(sh "$pcorcc" --showme -o x x.c) || fail "--showme failed"
	case $flags in *-lpcor_mpi*-lpcor*) ;; *) fail "--showme: $flags" ;; esac
	case $(sh "$pcorcc" -show -c x.c) in *-lpcor*) fail "links with -c" ;; esac
	cat >"$tmp/hello.c" <<'EOC'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int rank, size, sum;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d of %d sum %d\n", rank, size, sum);
	MPI_Finalize();
	return 0;
}
EOC
	sh "$pcorcc" -Wall -Werror -o "$tmp/hello" "$tmp/hello.c" \
		>"$tmp/out" 2>"$tmp/err" || fail "pcorcc could not build"
	timeout -k 5 60 "$pcorrun" -n 2 "$tmp/hello" >"$tmp/out" 2>"$tmp/err" ||
		fail "hello under pcorrun -n 2 failed"
	grep -q "rank 0 of 2 sum 1" "$tmp/out" &&
		grep -q "rank 1 of 2 sum 1" "$tmp/out" || fail "wrong output"
	;;
mpirun)
	mpirun=$(command -v mpirun.openmpi || command -v mpirun) ||
		{ echo "SKIP: Open MPI's mpirun is not installed"; exit 77; }
	[ "$pmix" = pmix ] ||
		{ echo "SKIP: pcor was built without PMIx"; exit 77; }
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# libpmix keeps a few bytes for good; sanitizer builds would object.
	supp="$(cd "$(dirname "$0")/../naming" && pwd)/lsan.supp"
	export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$supp"
	unset PCOR_JOB_SIZE PCOR_JOB_PID PCOR_JOB_KEY PCOR_AGENT_ADDR
	timeout -k 5 60 "$mpirun" --oversubscribe -n 1 true >"$tmp/out" 2>&1 ||
		{ echo "SKIP: mpirun cannot start here: $(head -c 300 "$tmp/out")"
		  exit 77; }
	timeout -k 5 120 "$mpirun" --oversubscribe -n 3 "$app" all \
		>"$tmp/out" 2>"$tmp/err" || fail "mpi_test under mpirun failed"
	grep -q "mpi_test all: 3 ranks ok" "$tmp/out" || fail "wrong output"
	;;
netns)
	command -v ip >/dev/null || { echo "SKIP: no ip (iproute2)"; exit 77; }
	tag="pm$$"
	ctl="${tag}c"
	ip netns add "$ctl" 2>"$tmp/err" ||
		{ echo "SKIP: no network namespaces: $(cat "$tmp/err")"; exit 77; }
	namespaces+=("$ctl")
	# A private segment that exists only inside these namespaces.
	net="10.214.$(( $$ % 250 + 1 ))"
	ip -n "$ctl" link set lo up
	ip -n "$ctl" link add br0 type bridge || fail "no bridge support"
	ip -n "$ctl" addr add "$net.1/24" dev br0
	ip -n "$ctl" link set br0 up
	hosts=()
	for i in 1 2; do
		ns="${tag}h$i"
		ip netns add "$ns" || fail "ip netns add $ns"
		namespaces+=("$ns")
		hosts+=("$ns")
		ip -n "$ns" link set lo up
		ip -n "$ctl" link add "v$i" type veth peer name eth0 netns "$ns" ||
			fail "no veth support"
		ip -n "$ctl" link set "v$i" master br0 up
		ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
		ip -n "$ns" link set eth0 up
	done
	timeout -k 5 120 ip netns exec "$ctl" "$pcorrun" -n 4 \
		-H "${hosts[0]},${hosts[1]}" --rsh 'ip netns exec %h' \
		--agent-if "$net.1" "$app" hosts 2 >"$tmp/out" 2>"$tmp/err" ||
		fail "mpi_more hosts on 2 namespaces x 2 ranks failed"
	grep -q "mpi_more hosts: 4 ranks ok" "$tmp/out" || fail "wrong output"
	;;
*) echo "unknown case $case_"; exit 2 ;;
esac
echo "ok: $case_"
