#!/usr/bin/env bash
# run.sh PCORRUN APP PROVIDER MODE NPROCS CASE [ARG] -- one inter-process
# test: NPROCS processes of APP started by pcorrun over the fabric
# PROVIDER with dispatcher MODE.  Passes when every process printed
# "CASE: ok" (for the cases where pid 1 is killed -- kill, lostrecv-*:
# the survivor did, and pcorrun reported the death), fails on anything
# else; leaves no process behind.
set -u
pcorrun=$1 app=$2 prov=$3 mode=$4 np=$5 case_=$6; shift 6
tmp=$(mktemp -d)
marker="pcorfabric-$$-$RANDOM"
trap 'pkill -KILL -f -- "$marker" 2>/dev/null; rm -rf "$tmp"' EXIT

# A provider this machine lacks is a skip, not a failure (pcor-shm is
# pcor's own port kind, always there; it may lead a list of two).
lf=${prov#pcor-shm}
lf=${lf#,}
if [ -n "$lf" ] && ! fi_info -p "$lf" >/dev/null 2>&1; then
	echo "SKIP: libfabric provider $lf is not available here"
	exit 77
fi
export PCOR_PROVIDERS=$prov PCOR_DISPATCH=$mode PCOR_LOG_LEVEL=info
dies=false
case $case_ in kill | lostrecv-*) dies=true ;; esac
extra=()
$dies && extra=(--keep-going)
timeout -k 5 "${TEST_TIMEOUT:-250}" "$pcorrun" -n "$np" --tag-output \
	"${extra[@]}" "$app" "$case_" "$@" "$marker" >"$tmp/out" 2>"$tmp/err"
st=$?
oks=$(grep -c -- "] $case_: ok" "$tmp/out")
want=$np
$dies && want=1
if [ "$oks" -ne "$want" ] || { ! $dies && [ $st -ne 0 ]; }; then
	echo "FAIL: $case_ over $prov ($mode): status $st, $oks of $want ok"
	echo "--- stdout"; tail -n 30 "$tmp/out"
	echo "--- stderr"; grep -v " info " "$tmp/err" | tail -n 30
	exit 1
fi
# Each libfabric port is the provider asked for, not a utility libfabric
# layered over it to meet pcor's hints (it once turned net into
# net;ofi_rxm).
if [ -n "$lf" ]; then
	opened=$(sed -n 's/.*info dispatch: port [0-9]*: \([^ ]*\) domain .*/\1/p' \
		"$tmp/err" | sort -u)
	[ "$opened" = "$lf" ] || {
		echo "FAIL: asked for $lf, opened: ${opened:-nothing}"
		exit 1
	}
fi
# What the ports counted, and how fast a death was seen, for the log.
grep -h "info dispatch: port" "$tmp/err" | grep -v "domain" | head -n 8
grep -h "PEER_LOST .* ms after\|block was\|unread at the kill" "$tmp/out"
if $dies; then
	# Nothing of the killed process stays in /dev/shm (libfabric's shm
	# provider names its region after the pid; pcorrun removes it).
	os=$(sed -n "s/^.*$case_: os pid \([0-9]*\)\$/\1/p" "$tmp/out")
	[ -n "$os" ] || { echo "FAIL: the victim did not say its pid"; exit 1; }
	left=$(ls /dev/shm | grep -E "^$os:" || true)
	[ -z "$left" ] || { echo "FAIL: left in /dev/shm: $left"; exit 1; }
fi
if [ "${PCOR_DROP_EVERY:-0}" != 0 ]; then
	# The fabric was made to lose frames, and pcor sent again.
	grep -q "test drops [1-9]" "$tmp/err" ||
		{ echo "FAIL: no frame was dropped"; exit 1; }
	# The ports' count, not a log line: selective repeat mends most
	# losses before any timeout would say so.
	grep -qE "resends [1-9]|asking again|FIN again" "$tmp/err" ||
		{ echo "FAIL: nothing was sent again"; exit 1; }
	if [ "$case_" = spawn ]; then
		grep -q "no answer to spawn request" "$tmp/err" ||
			{ echo "FAIL: no spawn request was repeated"; exit 1; }
	fi
fi
case $case_ in
starved)	# kept alive by the kernel's word, not by chance
	grep -q "\[0\].*process 1 silent for .*starved, not lost" "$tmp/err" ||
		{ echo "FAIL: pid 0 did not wait for a starved peer"; exit 1; }
	! grep -q "declaring it lost\|fencing it out" "$tmp/err" ||
		{ echo "FAIL: a process was fenced out"; exit 1; } ;;
hung)	# fenced for its silence because its CPU time hardly grew over
	# one window of a timeout: two timeouts of silence on an idle
	# machine; up to eight allowed (CI under load once took four and a
	# little), half the bound a starved process waits for (16)
	ms=$(sed -n 's/^\[0\].*process 1 at .* silent for \([0-9]*\) ms .*declaring it lost.*/\1/p' \
		"$tmp/err" | head -n 1)
	[ -n "$ms" ] || { echo "FAIL: pid 0 did not fence pid 1"; exit 1; }
	[ "$ms" -ge $((2 * PCOR_PEER_TIMEOUT_MS)) ] ||
		{ echo "FAIL: fenced before its CPU time was judged ($ms ms)"; exit 1; }
	[ "$ms" -lt $((8 * PCOR_PEER_TIMEOUT_MS)) ] ||
		{ echo "FAIL: fenced only after $ms ms"; exit 1; } ;;
flood)	# the receiver must have held the sender back: refused (and the
	# sender resent), or on a lossless port left fast messages waiting
	grep -qE "\[0\].*(nacks sent [1-9]|parked [1-9])" "$tmp/err" ||
		{ echo "FAIL: flood caused no refusal (pool not exhausted?)"; exit 1; } ;;
kill | lostrecv-*)
	grep -q "process 1 .* killed by signal 9" "$tmp/err" ||
		{ echo "FAIL: pcorrun did not report the death"; exit 1; } ;;
stall)	# the data path's bound said why, and no process was taken for dead
	grep -q "nothing acknowledged for [0-9]* ms over the data path" \
		"$tmp/err" || { echo "FAIL: the bound did not speak"; exit 1; }
	grep -qE "declaring it lost|peer [0-9]+ lost" "$tmp/err" &&
		{ echo "FAIL: a live peer was declared lost"; exit 1; } ;;
budget)	# what budget_app measured, for the log
	grep -hE "\] (round|sender|receiver)" "$tmp/out" ;;
idle | idle-high) # what idle_app measured, for the log
	grep -h "\] $case_: .*dispatcher" "$tmp/out" ;;
esac
if [ "$prov" != "$lf" ]; then
	# pcor-shm was asked for: every process opened its segment, and
	# none survives the job: no process maps or holds it, and nothing
	# of the job is in /dev/shm.
	segs=$(sed -n 's/.*pcor-shm segment \(pcor-shm-[0-9a-f]*-[0-9]*\),.*/\1/p' \
		"$tmp/err" | sort -u)
	nseg=$(echo "$segs" | grep -c .)
	[ "$nseg" -ge "$np" ] ||
		{ echo "FAIL: $nseg pcor-shm segments for $np processes"; exit 1; }
	if [ "${PCOR_SHM_CMA:-auto}" = off ]; then
		grep -q "pcor-shm segment.*single copy on" "$tmp/err" &&
			{ echo "FAIL: single copy used with PCOR_SHM_CMA=off"; exit 1; }
	fi
	# The copies into cells were of the kind asked for (and some were).
	nt=${PCOR_SHM_NT_STORES:-auto}
	if [ "$nt" != auto ]; then
		copies=$(sed -n 's/.*pcor-shm: \([0-9]*\) copies of .*, \([0-9]*\) of them with non-temporal stores/\1 \2/p' "$tmp/err")
		[ -n "$copies" ] ||
			{ echo "FAIL: no copy into cells counted"; exit 1; }
		echo "$copies" | while read -r all ntc; do
			want=0; [ "$nt" = on ] && want=$all
			[ "$ntc" -eq "$want" ] ||
				{ echo "FAIL: $ntc of $all copies non-temporal with PCOR_SHM_NT_STORES=$nt"; exit 1; }
		done || exit 1
		echo "pcor-shm copies into cells (copies, non-temporal):" $copies
	fi
	for s in $segs; do
		if ls -l /proc/[0-9]*/fd/ 2>/dev/null | grep -q "memfd:$s "; then
			echo "FAIL: memfd $s still held open"; exit 1
		fi
		if grep -qs "memfd:$s " /proc/[0-9]*/maps; then
			echo "FAIL: memfd $s still mapped"; exit 1
		fi
		key=${s#pcor-shm-}; key=${key%-*}
		if ls /dev/shm 2>/dev/null | grep -q "$key"; then
			echo "FAIL: /dev/shm holds an object of the job"; exit 1
		fi
	done
	echo "pcor-shm: $nseg segments, all gone"
fi
echo "PASS: $case_ over $prov ($mode)"
