#!/bin/bash
# Prepared in session 26, not run (no device time left): issue 14 item 3 for item 2's runs, on 4
# GPUs at half the paper's batch of 128 prompts. Qwen3-30B-A3B (random weights, bf16, FSDP2 over 4
# GPUs), P = 8K, N = 16 (sessions 15-16's configuration), 64 prompt groups per step: without
# sequence parallelism 16 groups per rank, with Ulysses SP 4 all 64 through the one SP group;
# whole-group micro-batches, --warmup-micro-batches (a warm-up on the step's first micro-batches,
# not a whole second step), one timed step each. Session 16 ran the same four methods at 4 groups
# per step: 6.99 s (dualkv), 8.40 s (FlexAttention), 35.71 s (N-copy FlashAttention, SP 4) and
# 10.08 s (dualkv, SP 4), so at 64 groups expect about 112, 134, 571 and 161 s.
# Three calls on one warm 4-GPU machine, each issued as soon as the previous one returns:
#   bash call_moe_half.sh a   # extension build; dualkv and FlexAttention without SP (~450 s)
#   bash call_moe_half.sh b   # dualkv with SP 4; then the N-copy FlashAttention step with SP 4
#                             # started in its own process session (setsid): ~630 s, longer than
#                             # one command; waits until 585 s
#   bash call_moe_half.sh c   # waits for that step and collects it
# Carry .cutlass (CUTLASS headers) in call a.
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1
mkdir -p /tmp/moe
LOG=$OUT/log_$1.txt
COMMON="--model qwen3-30b-a3b --prompt-lengths 8192 --responses 16 --warmup 1 --repeats 1"
run() {  # name, timeout, extra arguments...
  local name=$1 limit=$2; shift 2
  timeout $limit torchrun --nproc-per-node 4 bench/run_step_bench.py $COMMON "$@" --out /tmp/moe/$name \
    > /tmp/moe/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/moe/$name.log | tail -4 >> $LOG
  cp /tmp/moe/$name.log $OUT/ && cp /tmp/moe/$name/step_bench.json $OUT/$name.json 2>/dev/null
}
case $1 in
  a)
    nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
    timeout 170 python3 -m pip install . --no-build-isolation --no-deps \
      -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      -C build.tool-args=-j60 > /tmp/moe/build.log 2>&1
    echo "build rc $? at $SECONDS s" >> $LOG
    run moe_half_dualkv_sp1 240 --methods dualkv --groups 16 --warmup-micro-batches 1
    run moe_half_flex_sp1 270 --methods flex_packed --groups 16 --warmup-micro-batches 1
    ;;
  b)
    run moe_half_dualkv_sp4 280 --methods dualkv --sp 4 --groups 64 --warmup-micro-batches 1
    setsid nohup bash -c "torchrun --nproc-per-node 4 bench/run_step_bench.py $COMMON --methods flash_ncopy --sp 4 \
      --groups 64 --warmup-micro-batches 1 --out /tmp/moe/moe_half_flash_sp4 > /tmp/moe/moe_half_flash_sp4.log 2>&1; \
      echo \$? > /tmp/moe/flash_rc" > /dev/null 2>&1 < /dev/null &
    echo "flash_ncopy SP 4 started at $SECONDS s ($(date +%T))" >> $LOG
    while [ $SECONDS -lt 585 ] && [ ! -f /tmp/moe/flash_rc ]; do sleep 5; done
    echo "call b ends at $SECONDS s; flash_rc: $(cat /tmp/moe/flash_rc 2>/dev/null)" >> $LOG
    ;;
  c)
    while [ $SECONDS -lt 585 ] && [ ! -f /tmp/moe/flash_rc ]; do sleep 5; done
    echo "call c at $SECONDS s ($(date +%T)); flash_rc: $(cat /tmp/moe/flash_rc 2>/dev/null)" >> $LOG
    grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/moe/moe_half_flash_sp4.log | tail -4 >> $LOG
    cp /tmp/moe/moe_half_flash_sp4.log $OUT/ && cp /tmp/moe/moe_half_flash_sp4/step_bench.json $OUT/moe_half_flash_sp4.json
    ;;
esac
