#!/bin/bash
# Session 22, one GPU (issue 12): the one-GPU step at P = 8K, N = 32 against FlexAttention compiled
# for a symbolic stream length (--flex-shapes dynamic: what torch.compile runs when the stream length
# changes every step, as in a trainer), with today's kernels (session 21's plan). Session 21 ran
# the exact-length comparison with the same kernels (docs/results/2026-11-26i-h200/step/); session
# 19 ran this one before the plan. The extension is built from this tree.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 440 python3 bench/run_step_bench.py $common --flex-shapes dynamic --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step.log >> $LOG
