#!/usr/bin/env bash
# launch_test.sh CASE PCORRUN NAMING_APP -- multi-process directory tests.
#
# Each case starts its processes through the real launcher (or mpirun),
# checks what they printed and how the launcher ended, and leaves no
# process or network namespace behind, even when it fails.  Exit 77 means
# skipped, with the reason on stdout.
#
#   kill      a process dies by SIGKILL; the others see it (pcorrun exits 137)
#   exitcode  a process exits 5: pcorrun ends the job and exits 5
#   badprog   a program that does not exist: one error line, exit 127
#   badhost   a host that cannot be reached: one error line, non-zero
#   mpirun    the same program under Open MPI's mpirun, through PMIx
#   netns     three "hosts" made of network namespaces, --rsh 'ip netns exec'
#   basic8    8 processes resolve each other and names; all saw the same
#   spawn     4 processes add 4 more; all 8 saw the same membership
#   rogue     a wrong key, garbage and oversized frames against an agent
#             and the launcher; then all saw the same
#   stop      a process stopped with SIGSTOP is declared lost within the
#             peer timeout; resumed, it finds itself fenced out
#   linkdown  the network link of one "host" goes down mid-run: the
#             others declare its process lost within the peer timeout
#   linkdown-xfer  the same with a 256 MiB transfer under way: the
#             receive ends with PEER_LOST within the peer timeout
#   badkey    each process first tries a wrong job key: PCOR_ERR_AUTH, and
#             both sides name the key that was refused; then the job runs
#   unreach   no agent can connect to process 0's, which runs on: the
#             others ask the launcher, hear that it runs, and keep trying
#             (nobody declares it lost) until the job is ended
#   witness   the same under mpirun (no launcher to ask): the others ask
#             each other; nobody hears process 0 (which cannot join), and
#             it is declared lost
set -u
case_=$1 pcorrun=$2 app=$3
tmp=$(mktemp -d)
marker="pcortest-$$-$RANDOM"   # an argument that names our processes
namespaces=()

cleanup() {
	# Anything of ours still running: ended, whatever happened.
	pkill -KILL -f -- "$marker" 2>/dev/null
	for ns in "${namespaces[@]}"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Leaks inside libraries we use, never ours (sanitizer builds).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp"

fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out" 2>/dev/null
	echo "--- stderr"; cat "$tmp/err" 2>/dev/null; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# run_job EXPECTED_STATUS TIMEOUT_S cmd...: run, capture, check the status.
run_job() {
	local want=$1 limit=$2; shift 2
	timeout -k 5 "$limit" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ "$st" -ne 124 ] || fail "timed out after ${limit}s: $*"
	[ "$st" -eq "$want" ] || fail "exit status $st, expected $want: $*"
}

count() { grep -c -- "$1" "$tmp/out" || true; }

# Open MPI's mpirun with PMIx, or skip (scripts/install-deps.sh installs
# it; a test never does); the job's own variables are for pcorrun only.
need_mpirun() {
	command -v mpirun >/dev/null ||
		skip "mpirun (openmpi-bin) is not installed (scripts/install-deps.sh)"
	"$app" has-pmix ||
		skip "pcor was built without PMIx (libpmix-dev missing at configure time)"
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	unset PCOR_JOB_SIZE PCOR_JOB_PID PCOR_JOB_KEY PCOR_AGENT_ADDR
}

. "$(cd "$(dirname "$0")/.." && pwd)/leftovers.sh"
# No process of the job left.
no_leftovers() {
	procs_gone "$marker"
}

# views_agree WHAT N: N processes printed "WHAT: view ...", all the same.
views_agree() {
	local n
	n=$(grep -c -- "] $1: view " "$tmp/out")
	[ "$n" -eq "$2" ] || fail "$n of $2 processes printed their view"
	n=$(grep -- "] $1: view " "$tmp/out" | sed 's/^.*] //' | sort -u | wc -l)
	[ "$n" -eq 1 ] || fail "the processes saw $n different views"
}

# make_hosts: three "hosts" (network namespaces) on a private bridge in a
# fourth, $ctl; sets ctl, net, hosts and hostlist.
make_hosts() {
	command -v ip >/dev/null || skip "ip (iproute2) is not installed"
	tag="pc$$"
	ctl="${tag}ctl"
	ip netns add "$ctl" 2>"$tmp/err" ||
		skip "cannot create network namespaces (no CAP_NET_ADMIN?): $(cat "$tmp/err")"
	namespaces+=("$ctl")
	# A private segment that exists only inside these namespaces.
	net="10.213.$(( $$ % 250 + 1 ))"
	ip -n "$ctl" link set lo up
	ip -n "$ctl" link add br0 type bridge || fail "no bridge support"
	ip -n "$ctl" addr add "$net.1/24" dev br0
	ip -n "$ctl" link set br0 up
	hosts=()
	for i in 1 2 3; do
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
	hostlist=$(IFS=,; echo "${hosts[*]}")
}

# The marker rides along as an extra, ignored argument.
case $case_ in
basic8)
	run_job 0 120 "$pcorrun" -n 8 --tag-output "$app" basic 8 "$marker"
	[ "$(count 'basic: ok')" -eq 8 ] || fail "8 processes should pass"
	views_agree basic 8
	no_leftovers
	;;
spawn)
	run_job 0 120 "$pcorrun" -n 4 --tag-output "$app" spawn 4 4 "$marker"
	[ "$(count 'spawn: ok')" -eq 4 ] || fail "4 spawners should pass"
	[ "$(count 'spawned: ok')" -eq 4 ] || fail "4 spawned should pass"
	views_agree spawn 8
	no_leftovers
	;;
rogue)
	run_job 0 120 "$pcorrun" -n 3 --tag-output "$app" rogue 3 "$marker"
	[ "$(count 'rogue: ok')" -eq 3 ] || fail "3 processes should pass"
	grep -q "\[1\] rogue: agent rejected [1-9][0-9]* bad-key and [3-9][0-9]* malformed" \
		"$tmp/out" || fail "the attacked agent did not count the attacks"
	views_agree basic 3
	no_leftovers
	;;
kill)
	run_job 137 60 "$pcorrun" -n 4 --keep-going --tag-output \
		"$app" kill 4 "$marker"
	[ "$(count 'kill: ok')" -eq 3 ] || fail "3 survivors should pass"
	grep -q "process 3 .*killed by signal 9" "$tmp/err" ||
		fail "pcorrun did not say which process died and why"
	no_leftovers
	;;
exitcode)
	start=$(date +%s)
	run_job 5 60 "$pcorrun" -n 3 "$app" exit 3 2 5 "$marker"
	[ $(( $(date +%s) - start )) -lt 20 ] || fail "the job was not ended"
	grep -q "process 2 .*exited with status 5; ending the job" "$tmp/err" ||
		fail "no clear message"
	no_leftovers
	;;
badprog)
	run_job 127 30 "$pcorrun" -n 2 /nonexistent/pcor-program "$marker"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "expected one error line"
	grep -q "cannot run '/nonexistent/pcor-program'" "$tmp/err" ||
		fail "unclear error"
	;;
badhost)
	timeout -k 5 60 "$pcorrun" -n 2 -H "nohost-$marker" \
		--rsh 'ip netns exec %h' "$app" basic 2 "$marker" \
		>"$tmp/out" 2>"$tmp/err"
	st=$?
	[ "$st" -ne 0 ] && [ "$st" -ne 124 ] || fail "status $st"
	[ "$(grep -c '^pcorrun:' "$tmp/err")" -eq 1 ] ||
		fail "expected one pcorrun error line"
	grep -q "before joining the job" "$tmp/err" || fail "unclear error"
	no_leftovers
	;;
mpirun)
	need_mpirun
	if ! timeout 60 mpirun --oversubscribe -n 1 true >"$tmp/out" 2>&1; then
		skip "mpirun cannot start a PMIx server here: $(head -c 300 "$tmp/out")"
	fi
	run_job 0 120 mpirun --oversubscribe -n 4 "$app" basic 4 "$marker"
	[ "$(count 'basic: ok')" -eq 4 ] || fail "4 processes should pass"
	no_leftovers
	;;
stop)
	run_job 0 90 "$pcorrun" -n 3 --tag-output "$app" stop 3 "$marker"
	[ "$(count 'stop: ok')" -eq 3 ] || fail "3 processes should pass"
	[ "$(count 'stop: fenced out after resuming')" -eq 1 ] ||
		fail "the stopped process did not find itself fenced out"
	grep -h "PEER_LOST .* after SIGSTOP" "$tmp/out"
	# One survivor times the silence; the other does too, or follows
	# the first one's verdict (SILENT) -- and says which.
	grep -q 'silent for [0-9]* ms .*declaring it lost and fencing it out' "$tmp/err" ||
		fail "no survivor said why it declared the process lost"
	[ "$(grep -cE 'silent for [0-9]* ms .*declaring it lost and fencing it out|declared process 2 lost after [0-9]* ms of silence: fencing it out here too' "$tmp/err")" -ge 2 ] ||
		fail "the survivors did not say why they declared it lost"
	grep -q "declared this process lost after [0-9]* ms of silence" "$tmp/err" ||
		fail "the resumed process did not say it was fenced out"
	no_leftovers
	;;
linkdown)
	make_hosts
	# pid 2 runs on the third host; pid 0 takes that host's link down.
	FAULT_CMD="ip -n ${hosts[2]} link set eth0 down" \
		run_job 0 90 ip netns exec "$ctl" "$pcorrun" -n 3 -H "$hostlist" \
		--rsh 'ip netns exec %h' --agent-if "$net.1" --tag-output \
		-x FAULT_CMD "$app" stop 3 "$marker"
	[ "$(count 'stop: ok')" -eq 3 ] || fail "3 processes should pass"
	[ "$(count 'stop: cut off from everyone')" -eq 1 ] ||
		fail "the cut-off process did not see everyone lost"
	grep -h "PEER_LOST .* after the fault" "$tmp/out"
	no_leftovers
	;;
linkdown-xfer)
	make_hosts
	# The same, while pid 2 sends 256 MiB to pid 0 over a link slowed to
	# 100 Mbit/s (about 21 s of data): the fault comes mid-transfer.
	ip -n "${hosts[2]}" link set eth0 up
	tc -n "${hosts[2]}" qdisc add dev eth0 root tbf rate 100mbit \
		burst 64kb latency 100ms || skip "no tbf queueing discipline"
	FAULT_CMD="ip -n ${hosts[2]} link set eth0 down" FAULT_XFER=268435456 \
		run_job 0 90 ip netns exec "$ctl" "$pcorrun" -n 3 -H "$hostlist" \
		--rsh 'ip netns exec %h' --agent-if "$net.1" --tag-output \
		-x FAULT_CMD -x FAULT_XFER "$app" stop 3 "$marker"
	[ "$(count 'stop: ok')" -eq 3 ] || fail "3 processes should pass"
	grep -h "receive ended with PEER_LOST" "$tmp/out" ||
		fail "the receive did not end with PEER_LOST"
	no_leftovers
	;;
unreach)
	# The job cannot end by itself: it is ended after 8 s, five peer
	# timeouts, in which nobody may declare process 0 lost.  Ended by
	# SIGKILL to pcorrun, whose processes die with it at once: a SIGTERM
	# passed on can end process 0 first, and the others, still running
	# (slowly, under a sanitizer), then rightly hear that it is gone.
	PCOR_FAULT_CONNECT_TO=0 UNREACH_STAY=1 PCOR_LOG_LEVEL=info \
		timeout -s KILL 8 "$pcorrun" -n 3 --tag-output -x UNREACH_STAY \
		"$app" unreach 3 "$marker" >"$tmp/out" 2>"$tmp/err"
	re='process 0 runs (says the launcher) but cannot be reached'
	for q in 1 2; do
		[ "$(grep -c "^\[$q\].*$re" "$tmp/err")" -ge 1 ] ||
			fail "process $q was not told that process 0 runs"
	done
	grep -qE 'process 0 (unreachable|is gone)|declared lost' \
		"$tmp/err" "$tmp/out" &&
		fail "a process that runs was declared lost"
	no_leftovers
	;;
witness)
	need_mpirun
	PCOR_FAULT_CONNECT_TO=0 PCOR_LOG_LEVEL=info PCOR_JOIN_TIMEOUT_MS=8000 \
		run_job 0 120 mpirun --oversubscribe -n 3 \
		-x PCOR_FAULT_CONNECT_TO -x PCOR_LOG_LEVEL \
		-x PCOR_JOIN_TIMEOUT_MS "$app" unreach 3 \
		"$marker"
	# Process 0 cannot even join here: it times out and says so.
	[ "$(count 'unreach: ok')" -eq 2 ] || fail "2 processes should pass"
	[ "$(count 'unreach: could not join: ok')" -eq 1 ] ||
		fail "process 0 should have failed to join"
	[ "$(count 'unreach: process 0 declared lost')" -eq 2 ] ||
		fail "the survivors did not see process 0 lost"
	# A survivor whose own connection to the other is not up yet when
	# its suspicion ripens has nobody to ask and decides alone: at least
	# one asks.
	[ "$(grep -c 'asking process [12] whether it still hears process 0' "$tmp/err")" -ge 1 ] ||
		fail "no survivor asked a witness"
	[ "$(grep -c 'process 0 is gone (witness: ' "$tmp/err")" -ge 1 ] ||
		fail "no survivor decided on the witness's answer"
	no_leftovers
	;;
badkey)
	run_job 0 60 "$pcorrun" -n 2 --tag-output "$app" badkey 2 "$marker"
	[ "$(count 'badkey: refused')" -eq 2 ] || fail "2 processes refused"
	[ "$(count 'badkey: ok')" -eq 2 ] || fail "2 processes should pass"
	[ "$(grep -c 'refused our job key (key id [0-9a-f]\{8\}; the launcher.s is [0-9a-f]\{8\})' "$tmp/err")" -eq 2 ] ||
		fail "the processes did not say which key was refused by whom"
	[ "$(grep -c '^pcorrun: refused the job key of 127\.0\.0\.1:[0-9]* (ours has key id [0-9a-f]\{8\})' "$tmp/err")" -eq 2 ] ||
		fail "pcorrun did not say whose key it refused"
	grep -q 'no launcher answered' "$tmp/err" &&
		fail "a refused key was reported as unreachable"
	no_leftovers
	;;
netns)
	make_hosts
	run_job 0 120 ip netns exec "$ctl" "$pcorrun" -n 3 -H "$hostlist" \
		--rsh 'ip netns exec %h' --agent-if "$net.1" --tag-output \
		"$app" basic 3 hosts 3 "$marker"
	[ "$(count 'basic: ok')" -eq 3 ] || fail "3 processes should pass"
	# One more process per host than hosts: two share a namespace.
	run_job 0 120 ip netns exec "$ctl" "$pcorrun" -n 4 -H "$hostlist" \
		--rsh 'ip netns exec %h' --agent-if "$net.1" --tag-output \
		"$app" spawn 4 2 "$marker"
	[ "$(count 'spawn: ok')" -eq 4 ] || fail "spawn across hosts"
	[ "$(count 'spawned: ok')" -eq 2 ] || fail "spawned across hosts"
	no_leftovers
	;;
*)
	echo "unknown case $case_"; exit 2 ;;
esac
echo "$case_: ok"
exit 0
