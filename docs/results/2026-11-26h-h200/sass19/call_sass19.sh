#!/bin/bash
# Session 20, one H200: per-instruction warp sampling (ncu SourceCounters, SASS) of main's Hopper
# KV kernel with the staged dQ (session 19, 5d019d2) at (28, 16K) bf16, the same command as session
# 18's call_sass_big.sh, to see where the consumers now wait.
# Carry: exp-xz/s19bench.tar.xz (exp-bin/s19/dualkv_bench, main's backward).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s19bench.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 150 ncu $S --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 -o $OUT/dualkv \
  exp-bin/s19/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
  > $OUT/dualkv_run.txt 2>&1; echo "dualkv ncu rc $? at $SECONDS s" >> $LOG
ncu --import $OUT/dualkv.ncu-rep --page source --print-source sass --csv > $OUT/dualkv_sass.csv 2> $OUT/dualkv_sass.err
echo "source page rc $? lines $(wc -l < $OUT/dualkv_sass.csv)" >> $LOG
ncu --import $OUT/dualkv.ncu-rep --page details > $OUT/dualkv_details.txt 2>&1
gzip -9 $OUT/dualkv_sass.csv
rm -f $OUT/*.ncu-rep
python3 docs/results/2026-11-26f-h200/sass/analyse_sass.py $OUT/dualkv_sass.csv.gz --top 40 > $OUT/analysis.txt 2>&1
echo "done at $SECONDS s" >> $LOG
