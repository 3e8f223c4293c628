#!/bin/bash
# Session 27, issue 14 item 3 for item 2's runs: Qwen3-30B-A3B (random weights, bf16, FSDP2 over 4
# GPUs) at half the paper's batch, P = 8K, N = 16, 64 prompt groups per step: dualkv without
# sequence parallelism (16 groups per rank), the N-copy FlashAttention step with Ulysses SP 4 (the
# paper's setting for its 3.82x) and dualkv with SP 4 (all 64 groups through the one SP group).
# Whole-group micro-batches; --warmup-micro-batches 1 warms up on the step's first micro-batch
# instead of a whole second step; one timed step each. Session 26's prepared call
# (../../2026-11-27c-h200x4/prepared_moe_half/) also ran FlexAttention without SP; item 2 names no
# FlexAttention run, so it is left out to keep device time for the Hopper kernels.
# Session 16 at 4 groups per step: 6.99 s (dualkv), 35.71 s (N-copy FlashAttention, SP 4), 10.08 s
# (dualkv, SP 4), so at 64 groups expect about 112, 571 and 161 s.
# Two calls on one warm 4-GPU machine, the second issued as soon as the first returns:
#   bash call_moe_half.sh a   # extension build; dualkv without SP; then the FlashAttention step
#                             # started in its own process session (setsid): longer than one
#                             # command, so call a waits until 585 s and call b collects it
#   bash call_moe_half.sh b   # waits for the FlashAttention step, then dualkv with SP 4
# Carry .cutlass (CUTLASS headers) in call a.
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1
mkdir -p /tmp/moe
LOG=$OUT/log_$1.txt
COMMON="--model qwen3-30b-a3b --prompt-lengths 8192 --responses 16 --warmup 1 --repeats 1"
summary() {  # name: the result line and any error of its log
  grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/moe/$1.log | tail -4 >> $LOG
  cp /tmp/moe/$1.log $OUT/ && cp /tmp/moe/$1/step_bench.json $OUT/$1.json 2>/dev/null
}
run() {  # name, timeout, extra arguments...
  local name=$1 limit=$2; shift 2
  timeout $limit torchrun --nproc-per-node 4 bench/run_step_bench.py $COMMON "$@" --out /tmp/moe/$name \
    > /tmp/moe/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  summary $name
}
wait_flash() {
  while [ $SECONDS -lt 585 ] && [ ! -f /tmp/moe/flash_rc ]; do sleep 5; done
  echo "$1 at $SECONDS s ($(date +%T)); flash_rc: $(cat /tmp/moe/flash_rc 2>/dev/null)" >> $LOG
}
case $1 in
  a)
    nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
    timeout 170 python3 -m pip install . --no-build-isolation --no-deps \
      -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      -C build.tool-args=-j60 > /tmp/moe/build.log 2>&1
    echo "build rc $? at $SECONDS s" >> $LOG
    run moe_half_dualkv_sp1 260 --methods dualkv --groups 16 --warmup-micro-batches 1
    setsid nohup bash -c "torchrun --nproc-per-node 4 bench/run_step_bench.py $COMMON --methods flash_ncopy --sp 4 \
      --groups 64 --warmup-micro-batches 1 --out /tmp/moe/moe_half_flash_sp4 > /tmp/moe/moe_half_flash_sp4.log 2>&1; \
      echo \$? > /tmp/moe/flash_rc" > /dev/null 2>&1 < /dev/null &
    echo "flash_ncopy SP 4 started at $SECONDS s ($(date +%T))" >> $LOG
    wait_flash "call a ends"
    tail -c 2000 /tmp/moe/moe_half_flash_sp4.log > $OUT/flash_progress_a.txt
    ;;
  b)
    wait_flash "flash wait ends"
    summary moe_half_flash_sp4
    [ -f /tmp/moe/flash_rc ] && run moe_half_dualkv_sp4 $((590 - SECONDS)) --methods dualkv --sp 4 --groups 64 \
      --warmup-micro-batches 1
    ;;
esac
