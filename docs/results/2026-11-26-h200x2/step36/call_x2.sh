#!/bin/bash
# Session 13: the 36-layer step benchmark at P = 8K, N = 32 on 2 GPUs (FSDP2, one group per rank),
# after building the PyTorch extension (sm90) on the device: dualkv and FlexAttention in one
# process pair (whole-group micro-batches, 3 timed steps), then the N-copy FlashAttention baseline
# at the micro-batch that fits one GPU's step (4 responses, session 11), 1 timed step.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
tail -1 /tmp/build.log >> $LOG
timeout 200 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
  --warmup 1 --repeats 3 --methods dualkv flex_packed --out $OUT/step_x2 > $OUT/step_x2.log 2>&1
echo "step dualkv/flex rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ " $OUT/step_x2.log >> $LOG
timeout 270 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 \
  --warmup 1 --repeats 1 --methods flash_ncopy --micro-batch 4 --out $OUT/step_x2_flash > $OUT/step_x2_flash.log 2>&1
echo "step flash rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2_flash.log | tail -5 >> $LOG
