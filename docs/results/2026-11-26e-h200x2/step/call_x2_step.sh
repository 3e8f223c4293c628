#!/bin/bash
# Prepared in session 16 for a later session (issue 12, not run): the 2-GPU point again with the
# session's faster Hopper forward (and, if it lands, exp/fwd-vote's): the extension built on the
# device, then the 36-layer Qwen3-8B step at P = 8K, N = 32 with --fuse-elementwise, dualkv and
# FlexAttention (FSDP2 over 2 GPUs, one group per rank, whole-group micro-batches, one warm-up,
# 3 timed steps), as session 15's call_x4_step2.sh ran it. Run on nvidia-h200-x2 with
# carry [".cutlass", "exp"] after copying this script to exp/; about 5 minutes of device time.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 330 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 \
  --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2_fused \
  > $OUT/step_x2_fused.log 2>&1
echo "step fused rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2_fused.log >> $LOG
