# Plot an autotune CSV log (PS_AUTOTUNE_LOG_FILE, or the autotune-trace.csv
# that tests/integration/test_autotune.sh writes to AT_OUT; docs/tuner.md):
# score per sample on top, config per sample below (partition in KiB,
# credit in partitions, log scales).  Chosen rows are drawn as stars.
#   gnuplot -e "csv='trace.csv'; png='trace.png'; change=12; title='...'" \
#           bench/autotune-trace.gp
# Without csv and png: autotune-trace.csv and autotune-trace.png in the
# current directory.
if (!exists("csv")) csv = 'autotune-trace.csv'
if (!exists("png")) png = 'autotune-trace.png'
if (!exists("change")) change = -1
if (!exists("title")) title = 'psched autotune'
set terminal pngcairo size 900,700 font ",10"
set output png
set datafile separator ","
set key inside right top box opaque
set multiplot layout 2,1 title title
set lmargin 12
set rmargin 4
set xrange [0:*]
set ylabel "steps/s (slowest worker)"
set grid
if (change > 0) set arrow 1 from change + 0.5, graph 0 to change + 0.5, graph 1 nohead dt 2 lc rgb "red"
if (change > 0) set label 1 "link re-shaped" at change + 0.7, graph 0.92 tc rgb "red"
ph(p) = strcol(9) eq p ? $6 : NaN
plot csv skip 1 using 1:(ph("warmup")) with points pt 6 lc rgb "gray" title "warmup", \
     '' skip 1 using 1:(ph("explore")) with linespoints pt 7 lc rgb "blue" title "explore", \
     '' skip 1 using 1:(ph("locked")) with points pt 5 lc rgb "dark-green" title "locked", \
     '' skip 1 using 1:(ph("retune")) with linespoints pt 9 lc rgb "orange" title "retune", \
     '' skip 1 using 1:(ph("chosen")) with points pt 3 ps 2 lc rgb "black" title "chosen"
set xlabel "sample"
set ylabel "config"
set logscale y 2
unset label 1
set yrange [0.5:16384]
set key inside right center box opaque
plot csv skip 1 using 1:($4 / 1024) with steps lw 2 lc rgb "blue" title "partition (KiB)", \
     '' skip 1 using 1:($5 / $4) with steps lw 2 lc rgb "orange" title "credit (partitions)"
unset multiplot
