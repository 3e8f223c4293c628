#!/bin/bash
# Prepared in session 33, not run (no device time left): is the one-GPU step's first-run slowdown
# (dualkv 0.5% slower in a machine's first step-benchmark process, FlexAttention not;
# ../order/) a machine-level warm-up? On a freshly started H200: the extension build, then one
# step-benchmark run of dualkv alone, discarded (about two minutes of the same GPU load), then the
# standard command twice. If the first kept run reads like order/'s
# runs 2-4 (1.204-1.206x), the slowdown is the machine's, and the step benchmark should warm the
# machine before its first method.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --fuse-elementwise"
timeout 120 python3 bench/run_step_bench.py $common --methods dualkv --out $OUT/discarded > $OUT/discarded.log 2>&1
echo "discarded warm-up run rc $? at $SECONDS s" >> $LOG
for run in 1 2; do
  nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader >> $LOG
  timeout 200 python3 bench/run_step_bench.py $common --methods dualkv flex_packed --out $OUT/run$run > $OUT/run$run.log 2>&1
  echo "run $run rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/run$run.log >> $LOG
done
