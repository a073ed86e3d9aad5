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
set logscale x
plot 'handout.dat' index 0 with steps lw 2 title 'warm pool, concurrency 1', \
	 'handout.dat' index 1 with steps lw 2 title 'warm pool, concurrency 10', \
	 'handout.dat' index 2 with steps lw 2 title 'warm pool, concurrency 50'

set output 'restore.png'
set title 'restore'
set xlabel 'ms'
set logscale x
plot 'restore.dat' index 0 with steps lw 2 title 'on demand (pool empty), concurrency 1', \
	 'restore.dat' index 1 with steps lw 2 title 'restore in the daemon, concurrency 1', \
	 'restore.dat' index 2 with steps lw 2 title 'restore in the daemon, concurrency 1: host side', \
	 'restore.dat' index 3 with steps lw 2 title 'restore in the daemon, concurrency 1: guest side', \
	 'restore.dat' index 4 with steps lw 2 title 'on demand (pool empty), concurrency 10', \
	 'restore.dat' index 5 with steps lw 2 title 'restore in the daemon, concurrency 10', \
	 'restore.dat' index 6 with steps lw 2 title 'restore in the daemon, concurrency 10: host side', \
	 'restore.dat' index 7 with steps lw 2 title 'restore in the daemon, concurrency 10: guest side', \
	 'restore.dat' index 8 with steps lw 2 title 'on demand (pool empty), concurrency 50', \
	 'restore.dat' index 9 with steps lw 2 title 'restore in the daemon, concurrency 50', \
	 'restore.dat' index 10 with steps lw 2 title 'restore in the daemon, concurrency 50: host side', \
	 'restore.dat' index 11 with steps lw 2 title 'restore in the daemon, concurrency 50: guest side'

set output 'floor.png'
set title 'floor'
set xlabel 'ms'
unset logscale x
plot 'floor.dat' index 0 with steps lw 2 title 'VMM floor: KVM VM + vCPUs + memory + state, no run'
