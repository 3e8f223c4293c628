#!/bin/bash
# Session 22, one H200 (issue 11): per-instruction warp sampling (ncu SourceCounters, SASS) of the
# deterministic backward's KV kernel (main: the four-GEMM core, no dQ part) at (28, 16K) bf16,
# session 20's command with --deterministic, to set beside session 18's sampling of FA4's rectangle
# kernel (docs/results/2026-11-26f-h200/sass/fa4_sass.csv.gz) and session 20's of the atomic kernel.
# Carry: exp-xz/s22b.tar.xz (exp-bin/m22/dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s22b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 150 ncu $S --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 -o $OUT/dualkv \
  exp-bin/m22/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --deterministic --repeats 10 \
  --warmups 0 > /tmp/dualkv_run.txt 2>&1; echo "dualkv ncu rc $? at $SECONDS s" >> $LOG
ncu --import $OUT/dualkv.ncu-rep --page source --print-source sass --csv > $OUT/dualkv_det_sass.csv 2> /tmp/sass.err
echo "source page rc $? lines $(wc -l < $OUT/dualkv_det_sass.csv)" >> $LOG
ncu --import $OUT/dualkv.ncu-rep --page details > $OUT/dualkv_det_details.txt 2>&1
gzip -9 $OUT/dualkv_det_sass.csv
rm -f $OUT/*.ncu-rep
python3 docs/results/2026-11-26f-h200/sass/analyse_sass.py $OUT/dualkv_det_sass.csv.gz --top 40 > $OUT/analysis.txt 2>&1
echo "done at $SECONDS s" >> $LOG
