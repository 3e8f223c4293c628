#!/bin/bash
# Session 19, one H200: the one-GPU step on the rollouts of the 2-GPU run's rank 1 (SEED_OFFSET=1)
# and of rank 0 (SEED_OFFSET=0, the usual one-GPU step), with nvidia-smi sampling SM clock and
# power every 100 ms; step_seed_clocks.py prints each method's wall window (warm-up + timed steps).
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv &
SMI=$!
for offset in 1 0; do
  SEED_OFFSET=$offset timeout 280 python3 exp/s19/step_seed_clocks.py --layers 36 --prompt-lengths 8192 --responses 32 \
      --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_seed$offset \
      > $OUT/step_seed$offset.log 2>&1
  echo "seed offset $offset rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror|WINDOW" $OUT/step_seed$offset.log >> $LOG
done
kill $SMI
