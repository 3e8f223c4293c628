#!/bin/bash
# Session 33, two H200s (issue 12): session 30's call again (session 22's 2-GPU step at P = 8K,
# N = 32 against FlexAttention compiled for the step's stream length) on main at 6c3f9fc: head_dim
# 128 kernels as session 29's (SASS unchanged), session 32's Python. The extension built here.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise"
timeout 300 torchrun --nproc-per-node 2 bench/run_step_bench.py $common --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step.log >> $LOG
