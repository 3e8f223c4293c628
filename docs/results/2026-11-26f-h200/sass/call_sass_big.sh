#!/bin/bash
# Session 18, one H200: per-instruction warp sampling (ncu SourceCounters, SASS) of the two
# backwards at (28, 16K) bf16, for an instruction-by-instruction reading of FA4's sm90 step
# against ours (docs/perf_backward_notes.md, session 14's first lever): FA4's first three backward
# main kernels of bench/baselines.py's fa4_composition (A1 prompt causal, A2 responses x prompt,
# B responses causal), and one launch of dualkv's KV kernel (main's dualkv_bench). This second
# call skips the launches of the benchmarks' small correctness checks, which call_sass.sh profiled
# (small/).
# Carry: .whl (FA4 4.0.0b36 and its CuTe DSL) and exp-xz/main18.tar.xz (exp-bin/main18/dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
tar xJf exp-xz/main18.tar.xz
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache
ncu --version >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 200 ncu $S --kernel-name regex:'FlashAttentionBackwardSm90' --launch-skip 3 --launch-count 3 -o $OUT/fa4 \
  python3 bench/baselines.py --baselines fa4_composition --configs 28x16384 --dtype bf16 --min-repeats 1 --max-repeats 1 \
  > $OUT/fa4_run.txt 2>&1; echo "fa4 ncu rc $? at $SECONDS s" >> $LOG
timeout 120 ncu $S --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 -o $OUT/dualkv \
  exp-bin/main18/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
  > $OUT/dualkv_run.txt 2>&1; echo "dualkv ncu rc $? at $SECONDS s" >> $LOG
for r in fa4 dualkv; do
  ncu --import $OUT/$r.ncu-rep --page source --print-source sass --csv > $OUT/${r}_sass.csv 2> $OUT/${r}_sass.err
  echo "$r source page rc $? lines $(wc -l < $OUT/${r}_sass.csv)" >> $LOG
  ncu --import $OUT/$r.ncu-rep --page details > $OUT/${r}_details.txt 2>&1
done
gzip -9 $OUT/*_sass.csv
rm -f $OUT/*.ncu-rep
echo "done at $SECONDS s" >> $LOG
