#!/usr/bin/env bash
# shm_test.sh CASE PCORRUN SHM_APP -- multi-process tests of the pcor-shm
# port, launched through the real launcher.  Each case checks what every
# process printed and how the launcher ended, then that nothing of the job
# is left: no process, and no shared-memory object in /dev/shm named after
# it or its processes.  Exit 77 means skipped, with the reason on stdout.
#
#   sizes-poll, sizes-block, sizes-adaptive   0 B .. 256 MiB, both ways
#               (sizes-block with PCOR_SHM_EAGER_MAX=4k: medium messages
#               by single copy too)
#   nocma       the same with single copy disabled (PCOR_SHM_CMA=off)
#   alltoall    4 processes x 250 threads, all to all
#   flood       100000 messages to a receiver that waits first
#   flood-smallpool  the same with 16 MCBs: the fast window (256) alone
#               overflows the pool, and a word from another thread still
#               passes the stalled stream in the same ring
#   kill        a peer dies by SIGKILL mid-transfer
#   spawn       a process added with pcor_spawn talks over pcor-shm
#   rogue       a peer scribbles on its ring; the victim carries on
#   stopread    a receiver stopped before a large message's offer is
#               declared lost; its sender reuses the buffer and resumes
#               it: the receive fails, never takes the rewritten bytes
#   stopcells   the same for a medium message in the sender's cells,
#               which the sender then cycles through messages to a third
#               process: the receive ends intact or fails
#   lastwords   a sender stops its receiver, sends and dies by SIGKILL;
#               resumed after the death, the receiver gets every message
#   slots       one-slot and line records mixed in one stream, each burst
#               opened by a message without data taken by a waiter
# SHM_MAX (default 256m) caps the sizes cases; SHM_THREADS (250) the
# threads per process of alltoall.
set -u
case_=$1 pcorrun=$2 app=$3
tmp=$(mktemp -d)
marker="pcorshmtest-$$-$RANDOM"
max=${SHM_MAX:-268435456}
# 4 x 250 threads: about 12 s on two cores (90 s before the streams
# refused by a full ring spread their tries: docs/BENCHMARKS.md, "Many
# threads").
threads=${SHM_THREADS:-250}

cleanup() {
	pkill -KILL -f -- "$marker" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*"; echo "--- stdout"; tail -n 40 "$tmp/out" 2>/dev/null
	echo "--- stderr"; tail -n 40 "$tmp/err" 2>/dev/null; exit 1; }

ls -1 /dev/shm >"$tmp/shm.before" 2>/dev/null

# run_job EXPECTED_STATUS TIMEOUT_S cmd...: run, capture, check the status.
run_job() {
	local want=$1 limit=$2; shift 2
	timeout -k 5 "$limit" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ "$st" -ne 124 ] && [ "$st" -ne 137 -o "$want" -eq 137 ] ||
		fail "timed out or killed after ${limit}s (status $st): $*"
	[ "$st" -eq "$want" ] || fail "exit status $st, expected $want: $*"
}

expect_ok() { # CASE COUNT
	local n
	n=$(grep -c -- "$1: ok" "$tmp/out")
	[ "$n" -eq "$2" ] || fail "$n of $2 processes passed $1"
}

. "$(cd "$(dirname "$0")/.." && pwd)/leftovers.sh"
# No process of the job left, nor its objects in /dev/shm.
no_leftovers() {
	procs_gone "$marker"
	# New objects in /dev/shm that belong to the job's processes.
	local pids new
	pids=$(sed -n 's/.*ospid \([0-9]*\).*/\1/p' "$tmp/out" | sort -u)
	[ -n "$pids" ] || fail "no process reported its pid"
	new=$(ls -1 /dev/shm 2>/dev/null | sort | comm -13 <(sort "$tmp/shm.before") -)
	for name in $new; do
		case $name in *pcor*) fail "left in /dev/shm: $name" ;; esac
		for p in $pids; do
			if echo "$name" | grep -Eq "(^|[^0-9])$p([^0-9]|\$)"; then
				fail "left in /dev/shm by process $p: $name"
			fi
		done
	done
}

export PCOR_LOG_LEVEL=${PCOR_LOG_LEVEL:-warn}
# Sanitizer builds run several times slower (SHM_TIMEOUT_MULT, from meson).
mult=${SHM_TIMEOUT_MULT:-1}
# The data-path cases use pcor-shm alone: no idle tcp ports whose
# dispatchers would spin too in poll mode; the others run the defaults.
case $case_ in
sizes-poll|sizes-block|sizes-adaptive)
	eager=64k
	[ "$case_" = sizes-block ] && eager=4k
	PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=${case_#sizes-} \
		PCOR_SHM_EAGER_MAX=$eager run_job 0 $((600 * mult)) "$pcorrun" -n 2 --tag-output \
		"$app" sizes "$max" "$marker"
	expect_ok sizes 2 ;;
nocma)
	PCOR_PROVIDERS=pcor-shm PCOR_SHM_CMA=off run_job 0 $((600 * mult)) \
		"$pcorrun" -n 2 --tag-output "$app" sizes "$max" nocma "$marker"
	expect_ok sizes 2 ;;
alltoall)
	# Every thread posts all its sends before its receives: each process
	# holds some 80 MiB of rendezvous copies until they are taken, past
	# the default send budget (64 MiB).  800 threads on a small
	# machine can keep a process's agent from answering for the default
	# peer timeout (1.5 s), and a process declared lost is not what this
	# case is about (kill is): a longer timeout.
	PCOR_PROVIDERS=pcor-shm PCOR_SEND_BYTES=1g PCOR_PEER_TIMEOUT_MS=20000 \
		run_job 0 $((900 * mult)) \
		"$pcorrun" -n 4 --tag-output "$app" alltoall "$threads" "$marker"
	expect_ok alltoall 4 ;;
flood)
	PCOR_MCB_POOL=1024 run_job 0 $((600 * mult)) "$pcorrun" -n 2 \
		--tag-output "$app" flood 100000 "$marker"
	expect_ok flood 2 ;;
flood-smallpool)
	PCOR_MCB_POOL=16 run_job 0 $((300 * mult)) "$pcorrun" -n 2 \
		--tag-output "$app" flood 5000 "$marker"
	expect_ok flood 2 ;;
kill)
	run_job 137 $((300 * mult)) "$pcorrun" -n 3 --keep-going --tag-output \
		"$app" kill "$marker"
	expect_ok kill 2
	grep -q "process 1 .*killed by signal 9" "$tmp/err" ||
		fail "pid 1 did not die by SIGKILL" ;;
spawn)
	run_job 0 $((300 * mult)) "$pcorrun" -n 2 --tag-output "$app" spawn \
		"$marker"
	expect_ok spawn 2
	expect_ok spawned 1 ;;
rogue)
	run_job 0 $((300 * mult)) "$pcorrun" -n 3 --tag-output "$app" rogue \
		"$marker"
	expect_ok rogue 3 ;;
stopread)
	PCOR_PROVIDERS=pcor-shm PCOR_PEER_TIMEOUT_MS=$((500 * mult)) \
		run_job 0 $((120 * mult)) "$pcorrun" -n 2 --tag-output "$app" \
		stopread "$marker"
	expect_ok stopread 2
	grep -q "stopread: receive ended with PEER_LOST" "$tmp/out" ||
		fail "the receive did not end with PEER_LOST" ;;
stopcells)
	PCOR_PROVIDERS=pcor-shm PCOR_PEER_TIMEOUT_MS=$((500 * mult)) \
		run_job 0 $((120 * mult)) "$pcorrun" -n 3 --tag-output "$app" \
		stopcells "$marker"
	expect_ok stopcells 3
	grep -Eq "stopcells: (receive ended with PEER_LOST|completed, 0 bytes)" \
		"$tmp/out" || fail "process 0 did not end its receive" ;;
slots)
	for mode in poll adaptive; do
		PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=$mode \
			run_job 0 $((120 * mult)) "$pcorrun" -n 2 --tag-output \
			"$app" slots "$marker"
		expect_ok slots 2
	done ;;
idle)
	for mode in poll block adaptive; do
		PCOR_PROVIDERS=pcor-shm PCOR_DISPATCH=$mode \
			run_job 0 $((120 * mult)) "$pcorrun" -n 2 --tag-output \
			"$app" idle "$marker"
		expect_ok idle 2
	done ;;
lastwords)
	# Process 0 is stopped while 1 sends and dies: a long peer timeout,
	# so that 0 is not taken for lost in the meantime on a slow machine.
	PCOR_PROVIDERS=pcor-shm PCOR_PEER_TIMEOUT_MS=30000 \
		run_job 137 $((120 * mult)) "$pcorrun" -n 3 --keep-going \
		--tag-output "$app" lastwords "$marker"
	expect_ok lastwords 2
	grep -q "process 1 .*killed by signal 9" "$tmp/err" ||
		fail "pid 1 did not die by SIGKILL" ;;
*)
	echo "unknown case $case_"; exit 2 ;;
esac
no_leftovers
echo "$case_: ok"
exit 0
