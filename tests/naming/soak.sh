#!/usr/bin/env bash
# soak.sh PCORRUN NAMING_APP [SECONDS] -- no false failure under injected
# connect failures: 8-process jobs (`naming_app basic 8`: everyone
# resolves everyone and their names, then leaves in order) one after
# another for SECONDS (300), each with 2 % of the directory agents'
# connect attempts failing on purpose.  Every job must pass, and no
# process may be declared lost or fail: a failed connect is only a
# suspicion, retried and confirmed before anyone is told.
set -u
pcorrun=$1 app=$2 secs=${3:-300}
tmp=$(mktemp -d)
marker="pcorsoak-$$-$RANDOM"
trap 'pkill -KILL -f -- "$marker" 2>/dev/null; rm -rf "$tmp"' EXIT
export PCOR_FAULT_CONNECT_PCT=2 PCOR_LOG_LEVEL=info
end=$((SECONDS + secs)) jobs=0 retried=0
while [ $SECONDS -lt $end ]; do
	jobs=$((jobs + 1))
	timeout -k 5 120 "$pcorrun" -n 8 --tag-output "$app" basic 8 \
		"$marker" >"$tmp/out" 2>"$tmp/err"
	st=$?
	if [ $st -ne 0 ]; then
		echo "FAIL: job $jobs ended with status $st"
		tail -n 20 "$tmp/out" "$tmp/err"
		exit 1
	fi
	n=$(grep -c 'basic: ok' "$tmp/out")
	[ "$n" -eq 8 ] || { echo "FAIL: job $jobs: $n of 8 passed"; exit 1; }
	if grep -E 'failed \(control connection lost\)|declaring it lost|is gone' \
		"$tmp/err"; then
		echo "FAIL: job $jobs: a live process was taken for lost"
		exit 1
	fi
	retried=$((retried + $(grep -c 'suspecting it, retrying' "$tmp/err")))
done
echo "soak: $jobs jobs in $secs s, $retried failed connects retried, no false failure"
[ "$retried" -gt 0 ] || { echo "FAIL: no connect failed: nothing was tested"; exit 1; }
