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

set output 'e2b.png'
set title 'e2b'
set xlabel 'ms'
unset logscale x
plot 'e2b.dat' index 0 with steps lw 2 title 'thaw API: create -> exec true, concurrency 1', \
	 'e2b.dat' index 1 with steps lw 2 title 'E2B SDK: Sandbox.create() -> commands.run(''true''), concurrency 1', \
	 'e2b.dat' index 2 with steps lw 2 title 'thaw API: create -> exec true, concurrency 10', \
	 'e2b.dat' index 3 with steps lw 2 title 'E2B SDK: Sandbox.create() -> commands.run(''true''), concurrency 10'
