#!/bin/bash
# Session 15, issue 14 item 2 at 4 GPUs, on the warm machine of call_x4_8b.sh (the extension is
# installed there): Qwen3-30B-A3B (random weights, bf16, FSDP2 over 4 GPUs) at P = 8K, N = 16,
# 4 groups per step. $1 = a: dualkv and FlexAttention without sequence parallelism (one group per
# rank), then dualkv with Ulysses SP 4 (the 4 groups through one SP group); $1 = b: the N-copy
# FlashAttention step with Ulysses SP 4, the paper's setting for its 3.82x. One warm-up, one timed
# step each; an out-of-memory error names the method.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
run() {  # name, timeout, extra arguments...
  local name=$1 limit=$2; shift 2
  timeout $limit torchrun --nproc-per-node 4 bench/run_step_bench.py --model qwen3-30b-a3b --prompt-lengths 8192 \
    --responses 16 --warmup 1 --repeats 1 "$@" --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log | tail -4 >> $LOG
}
if [ "$1" = a ]; then
  run moe_dualkv_flex_sp1 280 --methods dualkv flex_packed
  run moe_dualkv_sp4 250 --methods dualkv --sp 4 --groups 4
else
  run moe_flash_sp4 560 --methods flash_ncopy --sp 4 --groups 4
fi
