#!/usr/bin/env bash
# Install the Debian 12 packages pcor's build, tests and benchmarks need,
# only those missing.  Idempotent and non-interactive; run as root.
set -euo pipefail

pkgs=(
  # build
  gcc libc6-dev pkg-config meson ninja-build python3
  libfabric-dev libfabric-bin uthash-dev
  # directory service: HMAC and keys, PMIx bootstrap
  libsodium-dev libpmix-dev
  # launcher tests: mpirun (a PMIx server), network namespaces
  openmpi-bin iproute2 procps
  # sanitizers and fuzzing
  clang libclang-rt-14-dev
  # benchmark plots; work counted per message (bench/shm/run_counts.sh)
  gnuplot-nox valgrind binutils
  # MPI comparisons (bench/mpi): Open MPI and MPICH compilers and runtimes
  libopenmpi-dev mpich libmpich-dev
  # MPI programs under a real Slurm (tests/mpi/slurm_run.sh)
  slurmctld slurmd slurm-client munge
  # map viewer: JPEG tiles, PNG output, web server, browser test
  libturbojpeg0-dev libpng-dev libmicrohttpd-dev chromium
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
