# thaw-bench plots: one CDF per figure, one PNG per group.
# Run from this directory: gnuplot plots.gp
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
	set terminal pngcairo size 1000,600 noenhanced
} else {
	set terminal png size 1000,600 noenhanced
}
set ylabel 'fraction of samples <= x'
set yrange [0:1.05]
set ytics 0,0.1,1
set grid
set key below
set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 3
set arrow from graph 0, first 0.95 to graph 1, first 0.95 nohead dt 3
set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 3

set output 'handout.png'
set title 'handout'
set xlabel 'ms'
unset logscale x
plot 'handout.dat' index 0 with steps lw 2 title 'warm pool, concurrency 1', \
	 'handout.dat' index 1 with steps lw 2 title 'warm pool, concurrency 4', \
	 'handout.dat' index 2 with steps lw 2 title 'warm pool, concurrency 8'

set output 'restore.png'
set title 'restore'
set xlabel 'ms'
set logscale x
plot 'restore.dat' index 0 with steps lw 2 title 'on demand (pool empty), concurrency 1', \
	 'restore.dat' index 1 with steps lw 2 title 'restore in the daemon, concurrency 1', \
	 'restore.dat' index 2 with steps lw 2 title 'restore in the daemon, concurrency 1: host side', \
	 'restore.dat' index 3 with steps lw 2 title 'restore in the daemon, concurrency 1: guest side', \
	 'restore.dat' index 4 with steps lw 2 title 'on demand (pool empty), concurrency 4', \
	 'restore.dat' index 5 with steps lw 2 title 'restore in the daemon, concurrency 4', \
	 'restore.dat' index 6 with steps lw 2 title 'restore in the daemon, concurrency 4: host side', \
	 'restore.dat' index 7 with steps lw 2 title 'restore in the daemon, concurrency 4: guest side', \
	 'restore.dat' index 8 with steps lw 2 title 'on demand (pool empty), concurrency 8', \
	 'restore.dat' index 9 with steps lw 2 title 'restore in the daemon, concurrency 8', \
	 'restore.dat' index 10 with steps lw 2 title 'restore in the daemon, concurrency 8: host side', \
	 'restore.dat' index 11 with steps lw 2 title 'restore in the daemon, concurrency 8: guest side'

set output 'boot.png'
set title 'boot'
set xlabel 'ms'
unset logscale x
plot 'boot.dat' index 0 with steps lw 2 title 'cold boot to agent ready'

set output 'floor.png'
set title 'floor'
set xlabel 'ms'
unset logscale x
plot 'floor.dat' index 0 with steps lw 2 title 'VMM floor: KVM VM + vCPUs + memory + state, no run'

set output 'first_exec.png'
set title 'first_exec'
set xlabel 'ms'
unset logscale x
plot 'first_exec.dat' index 0 with steps lw 2 title 'lazy, page cache dropped', \
	 'first_exec.dat' index 1 with steps lw 2 title 'lazy, page cache warm', \
	 'first_exec.dat' index 2 with steps lw 2 title 'prefetch, page cache dropped', \
	 'first_exec.dat' index 3 with steps lw 2 title 'prefetch, page cache warm'

set output 'memory.png'
set title 'memory'
set xlabel 'MiB'
unset logscale x
plot 'memory.dat' index 0 with steps lw 2 title '10 idle clones: VMM PSS', \
	 'memory.dat' index 1 with steps lw 2 title '10 idle clones: VMM private pages'

set output 'sustained.png'
set title 'sustained'
set xlabel 'ms'
set logscale x
plot 'sustained.dat' index 0 with steps lw 2 title 'handout latency while sustained', \
	 'sustained.dat' index 1 with steps lw 2 title 'restore in the daemon while sustained', \
	 'sustained.dat' index 2 with steps lw 2 title 'restore in the daemon while sustained: host side', \
	 'sustained.dat' index 3 with steps lw 2 title 'restore in the daemon while sustained: guest side'

set output 'peers.png'
set title 'peers'
set xlabel 'ms'
set logscale x
plot 'peers.dat' index 0 with steps lw 2 title 'thaw: handout + `true` + release', \
	 'peers.dat' index 1 with steps lw 2 title 'runsc: `true` in a fresh sandbox', \
	 'peers.dat' index 2 with steps lw 2 title 'bwrap: `true` in a fresh sandbox'
