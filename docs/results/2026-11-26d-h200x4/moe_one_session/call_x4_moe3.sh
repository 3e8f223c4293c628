#!/bin/bash
# Session 16, issue 14 item 2 at 4 GPUs in one device session (session 15 ran the SP 1 and SP 4
# rows in two): the extension built on the device (kernels of main, a87e57c), then Qwen3-30B-A3B
# (random weights, bf16, FSDP2 over 4 GPUs) at P = 8K, N = 16, 4 groups per step: dualkv and
# FlexAttention without sequence parallelism (one group per rank), the N-copy FlashAttention step
# with Ulysses SP 4 (the paper's setting for its 3.82x), and dualkv with SP 4. One warm-up, one
# timed step each.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
timeout 170 python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
run() {  # name, timeout, extra arguments...
  local name=$1 limit=$2; shift 2
  timeout $limit torchrun --nproc-per-node 4 bench/run_step_bench.py --model qwen3-30b-a3b --prompt-lengths 8192 \
    --responses 16 --warmup 1 --repeats 1 "$@" --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log | tail -4 >> $LOG
}
run moe_dualkv_flex_sp1 140 --methods dualkv flex_packed
run moe_flash_sp4 180 --methods flash_ncopy --sp 4 --groups 4
run moe_dualkv_sp4 90 --methods dualkv --sp 4 --groups 4
