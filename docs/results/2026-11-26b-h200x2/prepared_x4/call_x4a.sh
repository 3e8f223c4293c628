#!/bin/bash
# Prepared in session 14 for issue 14 on a 4-GPU machine (nvidia-h200-x4 or nvidia-h100-x4), not
# run: the extension built on the device, then Qwen3-30B-A3B (random weights, bf16, FSDP2 over 4
# GPUs) at P = 8K, N = 16: dualkv without sequence parallelism (4 groups, one per rank), then
# dualkv with Ulysses SP 4 on as many groups (--groups 4: --groups counts per data-parallel
# rank). One warm-up and one timed step each. Call B (call_x4b.sh) runs the FlashAttention
# baseline with SP 4 on the warm machine.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
run() {  # name, extra arguments...
  local name=$1; shift
  timeout 220 torchrun --nproc-per-node 4 bench/run_step_bench.py --model qwen3-30b-a3b --prompt-lengths 8192 \
    --responses 16 --warmup 1 --repeats 1 "$@" --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log | tail -4 >> $LOG
}
run moe_dualkv_sp1 --methods dualkv
run moe_dualkv_sp4 --methods dualkv --sp 4 --groups 4
