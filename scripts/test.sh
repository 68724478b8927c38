#!/usr/bin/env bash
# Run every pcor test: install what is missing, build, then run
#   - the release build: all suites (the 5-minute soak only here, run
#     beside the fuzzing: both take a fixed time);
#   - an AddressSanitizer build and a ThreadSanitizer build: the unit,
#     integration and stress suites;
#   - the libFuzzer targets (clang), each for a bounded time.
# Every skipped test is named, with its reason.  Ends with one line
# "N passed, N failed, N skipped"; exits non-zero if anything failed, or,
# with CI=true (.ci/run), if anything was skipped: CI has everything the
# tests need, so a skip there hides a test.  Extra arguments go to every
# `meson test` call (for example --suite unit).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

./scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }

pass=0 fail=0 skip=0 broken=0

# build_and_test NAME "SUITES" [meson setup options...]
build_and_test() {
  local name=$1 suites=$2; shift 2
  local dir="build-$name"
  echo "=== $name: configure and build"
  if [ -d "$dir" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null || { broken=$((broken+1)); return; }
  else
    CC=${BUILD_CC:-cc} meson setup "$dir" "$@" >/dev/null || { broken=$((broken+1)); return; }
  fi
  if ! ninja -C "$dir" -j "$(nproc)" >"$dir/build.log" 2>&1; then
    tail -n 40 "$dir/build.log"
    echo "=== $name: build FAILED"
    broken=$((broken+1)); return
  fi
  local args=()
  for s in $suites; do args+=(--suite "$s"); done
  args+=(${TEST_ARGS:-})
  echo "=== $name: meson test ${args[*]} ${EXTRA[*]:-}"
  rm -f "$dir/meson-logs/testlog.json"
  meson test -C "$dir" --print-errorlogs "${args[@]}" "${EXTRA[@]}" \
    --timeout-multiplier "${MULT:-1}" | grep -vE '^(ninja|\s*$)'
  count "$name" "$dir/meson-logs/testlog.json"
}

# count NAME LOG: add the results in meson's LOG (JSON lines) to the totals
count() {
  local counts
  counts=$(python3 - "$2" <<'PY'
import json, sys
p = f = s = 0
try:
    for line in open(sys.argv[1]):
        t = json.loads(line)
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL"): p += 1
        elif r == "SKIP":
            s += 1
            why = [l for l in (t.get("stdout") or "").splitlines()
                   if l.startswith("SKIP")]
            print("SKIPPED %s: %s" % (t.get("name"),
                  why[0] if why else "(no reason given)"), file=sys.stderr)
        else: f += 1
except FileNotFoundError:
    f = 1
print(p, f, s)
PY
)
  read -r p f s <<<"$counts"
  echo "=== $1: $p passed, $f failed, $s skipped"
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
}

EXTRA=("$@")
# ThreadSanitizer counts a thread as inside a signal handler until the
# handler returns.  Now and then, in processes that loaded libfabric's
# providers (and libnuma with them), the main thread stays marked so and
# every later malloc/free is reported as a "signal-unsafe call", hundreds
# of times, from pcor_finalize.  Those reports are off; races still fail.
export TSAN_OPTIONS="report_signal_unsafe=0${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
# Leaks inside libpmix and libfabric (its net provider keeps a little of
# each connection past fi_close) are not ours: LeakSanitizer skips
# allocations made there, and still reports every one of pcor's.
export LSAN_OPTIONS="suppressions=$root/tests/naming/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# The 5-minute soak runs for a fixed time, as the fuzzers do: it runs
# beside the fuzzing build and its targets instead of before them (unless
# arguments chose the suites).
soak_apart=false
[ ${#EXTRA[@]} -eq 0 ] && soak_apart=true
$soak_apart && TEST_ARGS="--no-suite soak"
MULT=1 build_and_test release "" -Dbuildtype=release -Dwerror=true
TEST_ARGS=
san_suites="unit integration stress mpi"
# Sanitizer and fuzzing builds without link-time optimization: it adds
# build time and nothing they look for (and clang's needs its own linker).
MULT=4 build_and_test asan "$san_suites" -Dbuildtype=debugoptimized \
  -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false -Dwerror=true \
  -Db_lto=false
# Biased locks are compiled in here: their races are ThreadSanitizer's.
MULT=6 build_and_test tsan "$san_suites" -Dbuildtype=debugoptimized \
  -Db_sanitize=thread -Db_lundef=false -Dbench=false -Dwerror=true \
  -Db_lto=false -Dlock_bias=true

if $soak_apart && [ -f build-release/build.ninja ]; then
  echo "=== release-soak: meson test --suite soak (beside the fuzzing)"
  rm -f build-release/meson-logs/soak.json
  meson test -C build-release --suite soak --logbase soak --print-errorlogs \
    >build-release/soak.out 2>&1 &
  soak_pid=$!
fi
BUILD_CC=clang MULT=1 build_and_test fuzz "fuzz" -Dbuildtype=debugoptimized \
  -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false \
  -Dbench=false -Dwerror=true -Db_lto=false

if [ -n "${soak_pid:-}" ]; then
  wait "$soak_pid"
  grep -vE '^(ninja|\s*$)' build-release/soak.out
  count release-soak build-release/meson-logs/soak.json
fi

fail=$((fail+broken))
echo "$pass passed, $fail failed, $skip skipped"
if [ "${CI:-}" = true ] && [ "$skip" -gt 0 ]; then
  echo "CI: $skip skipped tests (named above) count as failures"
  exit 1
fi
[ "$fail" -eq 0 ]
