#!/bin/bash
# Session 15, issue 14 item 3 on a 4-GPU machine: the extension built on the device, then the
# 36-layer Qwen3-8B step (random weights, bf16, FSDP2 over 4 GPUs) at P = 8K, N = 32, one group
# per rank (4 prompts per step, not the issue's 64: device time), whole-group micro-batches for
# dualkv and FlexAttention (one warm-up, 2 timed steps), then the N-copy FlashAttention step with
# micro-batches of 4 responses (its 1-GPU fit; one warm-up, one timed step). $1: extra flags for
# every run (e.g. --fuse-elementwise).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
run() {  # name, timeout, extra arguments...
  local name=$1 limit=$2; shift 2
  timeout $limit torchrun --nproc-per-node 4 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
    $EXTRA "$@" --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log | tail -4 >> $LOG
}
EXTRA=$1
run dense_dualkv_flex 200 --methods dualkv flex_packed --warmup 1 --repeats 2
run dense_flash 250 --methods flash_ncopy --micro-batch 4 --warmup 1 --repeats 1
