#!/bin/bash
# Session 14, call C on 2 H200s: the extension built on the device; the N-copy FlashAttention
# baseline of the 36-layer step at P 8K, N 8 (micro-batch 8) and N 16 (micro-batch 4), FSDP2, one
# timed step after one warm-up; then an 8-layer fused step profile of dualkv on 2 ranks.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 90 torchrun --nproc-per-node 2 exp/profile_step.py --layers 8 --prompt-lengths 8192 --responses 32 --methods dualkv flex_packed \
  --fuse > $OUT/profile_x2.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
for point in "8 8" "16 4"; do
  set -- $point
  timeout 130 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses $1 \
    --warmup 1 --repeats 1 --methods flash_ncopy --micro-batch $2 --out $OUT/flash_n$1 > $OUT/flash_n$1.log 2>&1
  echo "flash N=$1 rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ " $OUT/flash_n$1.log >> $LOG
done
