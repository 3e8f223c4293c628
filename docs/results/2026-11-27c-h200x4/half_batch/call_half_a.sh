#!/bin/bash
# Session 26, issue 14 item 3 on 4 GPUs: Qwen3-8B (36 layers, random weights, bf16, FSDP2 over 4
# GPUs), P = 8K, N = 32, R in [131, 2048], half the paper's batch: 16 groups per rank (64
# prompts), --fuse-elementwise, one timed step per method; both methods draw the same rollouts
# (seeded by rank), as in session 17's half-batch call.
#   flash_ncopy (the N-copy stream through PyTorch's FlashAttention varlen, padding-free):
#     micro-batches of 4 responses (its fit on one GPU, session 11), a warm-up on the step's first
#     2 micro-batches. Its step takes about 14 minutes, longer than one device command, so this
#     call starts it in its own process session (setsid); call_half_b.sh, issued while the machine
#     is still warm, waits for it, collects it, then runs dualkv.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log_a.txt
export PYTHONUNBUFFERED=1
mkdir -p /tmp/i14
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j60 > /tmp/i14/build.log 2>&1
echo "build rc $? at $SECONDS s" >> $LOG
COMMON="--layers 36 --prompt-lengths 8192 --responses 32 --groups 16 --fuse-elementwise --warmup 1 --repeats 1"
echo "$COMMON" > /tmp/i14/common
setsid nohup bash -c "torchrun --nproc-per-node 4 bench/run_step_bench.py $COMMON --methods flash_ncopy \
  --micro-batch 4 --warmup-micro-batches 2 --out /tmp/i14/half_flash_ncopy > /tmp/i14/half_flash_ncopy.log 2>&1; \
  echo \$? > /tmp/i14/flash_rc" > /dev/null 2>&1 < /dev/null &
echo "flash_ncopy started at $SECONDS s ($(date +%T))" >> $LOG
while [ $SECONDS -lt 575 ] && [ ! -f /tmp/i14/flash_rc ]; do sleep 5; done
echo "call a ends at $SECONDS s ($(date +%T)); flash_rc: $(cat /tmp/i14/flash_rc 2>/dev/null)" >> $LOG
tail -c 2000 /tmp/i14/half_flash_ncopy.log > $OUT/flash_progress_a.txt
