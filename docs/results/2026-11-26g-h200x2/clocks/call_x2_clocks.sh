#!/bin/bash
# Session 19, two H200s: the 2-GPU step of issue 12 (session 16's prepared call_x2_step.sh command,
# 2 timed steps) with nvidia-smi sampling both GPUs' SM clock and power every 100 ms;
# step_seed_clocks.py prints each rank's window (warm-up + timed steps) per method.
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv &
SMI=$!
SEED_OFFSET=0 timeout 330 torchrun --nproc-per-node 2 exp/s19/step_seed_clocks.py --layers 36 --prompt-lengths 8192 \
  --responses 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x2 \
  > $OUT/step_x2.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
kill $SMI
grep -E "^ +[0-9]+ +[0-9]+ |rror|WINDOW" $OUT/step_x2.log >> $LOG
