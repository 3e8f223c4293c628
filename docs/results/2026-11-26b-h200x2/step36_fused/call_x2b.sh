#!/bin/bash
# Session 14, call B on 2 H200s: the extension built on the device, then the 36-layer step
# benchmark at P 8K, N 32 with --fuse-elementwise for dualkv and FlexAttention (FSDP2, one group
# per rank, whole-group micro-batches, warmup 1, 3 timed steps).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 300 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
  --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2_fused > $OUT/step_x2_fused.log 2>&1
echo "step fused rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ " $OUT/step_x2_fused.log >> $LOG
