#!/bin/bash
# Session 19, one H200 (issue 12): one profiled 36-layer step per method on one GPU with the
# rollouts of the 2-GPU run's rank 1 (--seed 1), to compare per category with rank 1's trace of
# the 2-GPU step (docs/results/2026-11-26g-h200x2/trace/). Session 14's exp/profile_step.py.
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 400 python3 exp/profile_step.py --layers 36 --prompt-lengths 8192 --responses 32 --fuse-elementwise \
    --methods dualkv flex_packed --seed 1 > $OUT/profile_seed1.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
grep -A7 "^==" $OUT/profile_seed1.log >> $LOG
