#!/bin/bash
# Session 15, call 1 on a 4-GPU machine: the extension built on the device (main with the faster
# Hopper forward and the fused RoPE), then issue 12's 2-GPU point on GPUs 0 and 1: the 36-layer
# Qwen3-8B step at P = 8K, N = 32 with --fuse-elementwise, dualkv and FlexAttention (FSDP2, one
# group per rank, whole-group micro-batches, one warm-up, 3 timed steps), as session 14's
# call_x2b.sh ran it on 2 H200s.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
CUDA_VISIBLE_DEVICES=0,1 timeout 300 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 \
  --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2_fused \
  > $OUT/step_x2_fused.log 2>&1
echo "step fused rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2_fused.log >> $LOG
