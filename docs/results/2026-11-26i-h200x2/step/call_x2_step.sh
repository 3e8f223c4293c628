#!/bin/bash
# Session 21, two GPUs (issue 12): the 2-GPU step at P = 8K, N = 32 (one group per GPU, FSDP2,
# FlexAttention compiled for the step's stream length, as session 19's clocks/ run) with the
# backward plan that keeps a response's key tiles together (the extension built from this tree).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 400 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
  --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2 > $OUT/step_x2.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2.log >> $LOG
