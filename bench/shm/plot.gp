# plot.gp -- the shared-memory comparison, one PNG with two panels (run in
# the directory holding lat.dat and bw.dat, as run_shm_bench.sh does).
set terminal pngcairo noenhanced size 1400,560 font "sans,11"
set output "shm_bench.png"
set logscale x 2
set format x "%.0b%B"
set key top left
set grid
set style data linespoints
set datafile missing "NaN"
titles = "pcor-shm pcor/libfabric-shm fi_pingpong-shm OpenMPI-vader MPICH"
set multiplot layout 1,2

set title "One-way latency, 2 processes on one host (median)"
set xlabel "message size (bytes)"
set ylabel "latency (µs)"
set logscale y 10
plot for [i=2:6] "lat.dat" using 1:i title word(titles, i-1)

set title "Streaming bandwidth, window of 64, 2 processes (median)"
set ylabel "bandwidth (MB/s)"
unset logscale y
plot for [i in "2 3 5 6"] "bw.dat" using 1:(column(i+0)) title word(titles, i-1)
unset multiplot
