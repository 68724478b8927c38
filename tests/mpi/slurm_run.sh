#!/bin/bash
# slurm_run.sh -- the MPI test program launched by a real Slurm:
# `srun --mpi=pmix -n N`, on a one-node cluster this script brings up in a
# scratch directory (its own munged, slurmctld and slurmd, configured
# through SLURM_CONF and -f) and stops afterwards.
#
#   slurm_run.sh APP NPROCS
#
# Exit 77 (skipped) when Slurm, munge or Slurm's PMIx plugin is missing
# (scripts/install-deps.sh installs them) or the daemons cannot start.
set -u
app=$1 np=${2:-2}
tmp=$(mktemp -d)
pids=()
cleanup() {
	# Steps still running (a failed launch): cancelled through our own
	# controller, then our daemons, by the process ids we started.
	if [ -n "${SLURM_CONF-}" ] && [ ${#pids[@]} -ge 2 ]; then
		squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
		for _ in $(seq 50); do
			[ -z "$(squeue -h 2>/dev/null)" ] && break
			sleep 0.1
		done
	fi
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break
			sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log "$tmp/out" "$tmp/err"; do
	[ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done; exit 1; }

for t in munged slurmctld slurmd srun sinfo; do
	command -v "$t" >/dev/null || skip "$t is not installed"
done
[ "$(id -u)" -eq 0 ] || skip "the daemons need root"
plugdir=$(dirname "$(find /usr/lib* -name mpi_pmix.so -path '*slurm*' \
	2>/dev/null | head -1)")
[ -n "$plugdir" ] && [ "$plugdir" != . ] || skip "no Slurm PMIx plugin"

# A free TCP port on loopback for each daemon.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: a fresh key, its own socket.
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$tmp/munge.key"
mkdir -m 700 "$tmp/munge"
munged --force --foreground --key-file="$tmp/munge.key" \
	--socket="$tmp/munge/sock" --pid-file="$tmp/munge/pid" \
	--seed-file="$tmp/munge/seed" --log-file="$tmp/munged.log" &
pids+=($!)

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/tmpfs"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=pcortest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(port)
SlurmdPort=$(port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
TmpFS=$tmp/tmpfs
FirstJobId=$((RANDOM + 1000))
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/linear
SwitchType=switch/none
MpiDefault=none
PluginDir=$plugdir
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -f "$SLURM_CONF" >"$tmp/ctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/d.out" 2>&1 &
pids+=($!)

# Wait (bounded) until the node is up: ask the controller, not a clock.
up=0
for _ in $(seq 150); do
	if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed)'; then
		up=1; break
	fi
	for p in "${pids[@]}"; do
		kill -0 "$p" 2>/dev/null ||
			skip "a Slurm daemon could not start here: $(tail -3 "$tmp"/*.log "$tmp"/*.out 2>/dev/null | tr '\n' ' ' | head -c 400)"
	done
	sleep 0.2
done
[ $up = 1 ] || skip "the Slurm node did not come up: $(sinfo 2>&1 | head -3)"

unset PCOR_JOB_SIZE PCOR_JOB_PID PCOR_JOB_KEY PCOR_AGENT_ADDR
# libpmix keeps a few bytes for good; sanitizer builds would object.
supp="$(cd "$(dirname "$0")/../naming" && pwd)/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$supp"
# --overcommit: more ranks than cores is fine for a test.
timeout -k 5 120 srun --mpi=pmix --overcommit -n "$np" "$app" all >"$tmp/out" 2>"$tmp/err" ||
	fail "srun --mpi=pmix -n $np failed"
grep -q "mpi_test all: $np ranks ok" "$tmp/out" || fail "wrong output"
echo "ok: slurm"
