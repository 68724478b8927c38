# common.sh -- sourced by the pcor-shm benchmark scripts (run_*.sh here).
bench_shm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The default is what is measured: no PCOR_* knob from the caller's
# environment reaches pcor (a run that wants one sets it on its command).
pcor_knobs_unset() {
	local v
	for v in $(env | sed -n 's/^\(PCOR_[A-Z_]*\)=.*/\1/p'); do
		unset "$v"
	done
}

# mpi_p2p_build IMPL DIR: build mpi_p2p.c with IMPL's compiler wrapper
# (mpicc.openmpi, mpicc.mpich) into DIR and print the program's path;
# fails when that MPI is not installed.
mpi_p2p_build() {
	local exe=$2/mpi_p2p.$1
	command -v "mpicc.$1" >/dev/null || return 1
	"mpicc.$1" -O2 -std=c11 -Wall -o "$exe" "$bench_shm_dir/mpi_p2p.c" ||
		return 1
	echo "$exe"
}
