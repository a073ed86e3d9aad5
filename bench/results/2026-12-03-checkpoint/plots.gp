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

set output 'checkpoint.png'
set title 'checkpoint'
set xlabel 'value (unit in the key)'
set logscale x
plot 'checkpoint.dat' index 0 with steps lw 2 title 'checkpoint after 1 MiB written: pause'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 1 with steps lw 2 title 'checkpoint after 1 MiB written: total'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 2 with steps lw 2 title 'checkpoint after 1 MiB written: round trip'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 3 with steps lw 2 title 'checkpoint after 1 MiB written: dirty_bytes written'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 4 with steps lw 2 title 'checkpoint after 8 MiB written: pause'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 5 with steps lw 2 title 'checkpoint after 8 MiB written: total'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 6 with steps lw 2 title 'checkpoint after 8 MiB written: round trip'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 7 with steps lw 2 title 'checkpoint after 8 MiB written: dirty_bytes written'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 8 with steps lw 2 title 'fork of 1: all ready'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 9 with steps lw 2 title 'fork of 1: VMM PSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 10 with steps lw 2 title 'fork of 1: VMM RSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 11 with steps lw 2 title 'fork of 4: all ready'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 12 with steps lw 2 title 'fork of 4: VMM PSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 13 with steps lw 2 title 'fork of 4: VMM RSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 14 with steps lw 2 title 'fork of 8: all ready'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 15 with steps lw 2 title 'fork of 8: VMM PSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 16 with steps lw 2 title 'fork of 8: VMM RSS per fork'.' (' . 'MiB' . ')', \
	 'checkpoint.dat' index 17 with steps lw 2 title 'rollback to a checkpoint'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 18 with steps lw 2 title 'restore from the template''s snapshot: create -> ping'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 19 with steps lw 2 title 'restore from the template''s snapshot'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 20 with steps lw 2 title 'restore from the template''s snapshot: host side'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 21 with steps lw 2 title 'restore from the template''s snapshot: guest side'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 22 with steps lw 2 title 'restore from a depth-1 checkpoint: create -> ping'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 23 with steps lw 2 title 'restore from a depth-1 checkpoint'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 24 with steps lw 2 title 'restore from a depth-1 checkpoint: host side'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 25 with steps lw 2 title 'restore from a depth-1 checkpoint: guest side'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 26 with steps lw 2 title 'restore from a depth-4 checkpoint: create -> ping'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 27 with steps lw 2 title 'restore from a depth-4 checkpoint'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 28 with steps lw 2 title 'restore from a depth-4 checkpoint: host side'.' (' . 'ms' . ')', \
	 'checkpoint.dat' index 29 with steps lw 2 title 'restore from a depth-4 checkpoint: guest side'.' (' . 'ms' . ')'
