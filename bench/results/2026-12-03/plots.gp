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

set output 'memory.png'
set title 'memory'
set xlabel 'MiB'
unset logscale x
plot 'memory.dat' index 0 with steps lw 2 title '10 idle clones: VMM PSS', \
	 'memory.dat' index 1 with steps lw 2 title '10 idle clones: VMM private pages', \
	 'memory.dat' index 2 with steps lw 2 title '100 idle clones: VMM PSS', \
	 'memory.dat' index 3 with steps lw 2 title '100 idle clones: VMM private pages', \
	 'memory.dat' index 4 with steps lw 2 title '1000 idle clones: VMM PSS', \
	 'memory.dat' index 5 with steps lw 2 title '1000 idle clones: VMM private pages'

set output 'sustained.png'
set title 'sustained'
set xlabel 'ms'
set logscale x
plot 'sustained.dat' index 0 with steps lw 2 title 'handout latency while sustained', \
	 'sustained.dat' index 1 with steps lw 2 title 'restore in the daemon while sustained', \
	 'sustained.dat' index 2 with steps lw 2 title 'restore in the daemon while sustained: host side', \
	 'sustained.dat' index 3 with steps lw 2 title 'restore in the daemon while sustained: guest side'
