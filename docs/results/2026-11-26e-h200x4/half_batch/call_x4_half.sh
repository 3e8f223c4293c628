#!/bin/bash
# Session 17, issue 14 item 3 on 4 H200s: Qwen3-8B (36 layers, random weights, bf16, FSDP2 over 4
# GPUs), P = 8K, N = 32, R in [131, 2048], half the paper's batch: 16 groups per rank (64 prompts),
# whole-group micro-batches, --fuse-elementwise, one warm-up and one timed step. $1: the method
# (dualkv or flex_packed). The extension is built on the device unless an earlier call on the same
# warm machine installed it.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
if python3 -c "import dualkv, sys; sys.exit(0 if dualkv.cuda_compiled else 1)" 2>/dev/null; then
  echo "extension already installed" >> $LOG
else
  python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/build.log 2>&1
  echo "build rc $? at $SECONDS s" >> $LOG
fi
timeout 540 torchrun --nproc-per-node 4 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
  --groups 16 --fuse-elementwise --methods $1 --warmup 1 --repeats 1 --out $OUT/half_$1 > $OUT/half_$1.log 2>&1
echo "$1 rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/half_$1.log | tail -4 >> $LOG
