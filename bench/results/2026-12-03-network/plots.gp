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

set output 'network.png'
set title 'network'
set xlabel 'value (unit in the key)'
set logscale x
plot 'network.dat' index 0 with steps lw 2 title 'guest -> host TCP throughput'.' (' . 'Mbit/s' . ')', \
	 'network.dat' index 1 with steps lw 2 title 'guest <-> host TCP round trip'.' (' . 'ms' . ')', \
	 'network.dat' index 2 with steps lw 2 title 'policy update, one CIDR changed: round trip'.' (' . 'ms' . ')', \
	 'network.dat' index 3 with steps lw 2 title 'policy update, whole lists: round trip'.' (' . 'ms' . ')', \
	 'network.dat' index 4 with steps lw 2 title 'network setup per clone'.' (' . 'ms' . ')', \
	 'network.dat' index 5 with steps lw 2 title 'warm pool, network = nat, concurrency 1'.' (' . 'ms' . ')', \
	 'network.dat' index 6 with steps lw 2 title 'warm pool, network = none, concurrency 1'.' (' . 'ms' . ')', \
	 'network.dat' index 7 with steps lw 2 title 'warm pool, network = nat, concurrency 4'.' (' . 'ms' . ')', \
	 'network.dat' index 8 with steps lw 2 title 'warm pool, network = none, concurrency 4'.' (' . 'ms' . ')', \
	 'network.dat' index 9 with steps lw 2 title 'warm pool, network = nat, concurrency 8'.' (' . 'ms' . ')', \
	 'network.dat' index 10 with steps lw 2 title 'warm pool, network = none, concurrency 8'.' (' . 'ms' . ')'
