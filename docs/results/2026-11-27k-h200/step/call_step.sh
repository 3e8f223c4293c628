#!/bin/bash
# Session 32, one GPU (issue 12): a seventh run of session 21's one-GPU step at P = 8K, N = 32
# (FlexAttention compiled for the step's length, --max-fit 32) on main's kernels (session 29's),
# the extension built here from this tree, as sessions 30 and 31 ran it.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 480 python3 bench/run_step_bench.py $common --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror|ratio|pair" $OUT/step.log >> $LOG
