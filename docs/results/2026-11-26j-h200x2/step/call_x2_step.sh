#!/bin/bash
# Session 22, two H200s (issue 12): the 2-GPU step at P = 8K, N = 32 with today's kernels (session
# 21's plan), against FlexAttention compiled for the step's stream length (session 21's command)
# and then for a symbolic length (--flex-shapes dynamic, as a trainer runs it), on one machine.
# The extension is built on the device from this tree.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise"
for shapes in auto dynamic; do
  timeout 240 torchrun --nproc-per-node 2 bench/run_step_bench.py $common --flex-shapes $shapes --out $OUT/step_$shapes \
    > $OUT/step_$shapes.log 2>&1
  echo "step $shapes rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_$shapes.log >> $LOG
done
tar czf $OUT/steps.tgz -C $OUT step_auto step_dynamic && rm -rf $OUT/step_auto $OUT/step_dynamic
