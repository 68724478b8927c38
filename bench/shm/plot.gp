# plot.gp -- the shared-memory comparison (run in the directory holding
# lat.dat and bw.dat, as run_shm_bench.sh does).
set terminal svg size 900,560 dynamic font "sans,12"
set logscale x 2
set format x "%.0s%cB"
set key top left
set grid
set style data linespoints
set datafile missing "NaN"
titles = "pcor-shm pcor/libfabric-shm fi_pingpong-shm OpenMPI-vader MPICH"

set output "shm_latency.svg"
set title "One-way latency, 2 processes on one host (median)"
set xlabel "message size"
set ylabel "latency (µs)"
set logscale y 10
plot for [i=2:6] "lat.dat" using 1:i title word(titles, i-1)

set output "shm_bandwidth.svg"
set title "Streaming bandwidth, window of 64, 2 processes (median)"
set ylabel "bandwidth (MB/s)"
unset logscale y
set key top left
plot for [i in "2 3 5 6"] "bw.dat" using 1:(column(i+0)) title word(titles, i-1)
