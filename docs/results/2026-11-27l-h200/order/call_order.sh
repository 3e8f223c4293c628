#!/bin/bash
# Session 33, one H200 (issue 12): does the methods' order move the one-GPU step's ratio? Session
# 21's one-GPU command (FlexAttention compiled for the step's length, --max-fit 32) twice on one
# machine: dualkv first (as every run so far), then FlexAttention first (--methods is now run in
# the order given). The extension built here from this tree.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --fuse-elementwise"
for order in "dualkv flex_packed" "flex_packed dualkv"; do
  name=${order// /_}
  nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader >> $LOG
  timeout 235 python3 bench/run_step_bench.py $common --methods $order --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$order rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log >> $LOG
done
