#!/bin/bash
# Prepared in session 14 (not run), after call_x4a.sh on the same warm 4-GPU machine (the extension
# is installed there): Qwen3-30B-A3B at P = 8K, N = 16, the N-copy FlashAttention baseline with
# Ulysses SP 4 (the paper's setting for its 3.82x claim) and FlexAttention on the packed stream
# without SP (as many groups as call A; an out-of-memory error names the method: rerun it with
# --micro-batch 4); one warm-up and one timed step each.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
run() {  # name, extra arguments...
  local name=$1; shift
  timeout 280 torchrun --nproc-per-node 4 bench/run_step_bench.py --model qwen3-30b-a3b --prompt-lengths 8192 \
    --responses 16 --warmup 1 --repeats 1 "$@" --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log | tail -4 >> $LOG
}
run moe_flash_sp4 --methods flash_ncopy --sp 4 --groups 4
run moe_flex_sp1 --methods flex_packed
