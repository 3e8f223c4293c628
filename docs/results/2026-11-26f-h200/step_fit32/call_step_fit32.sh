#!/bin/bash
# Session 18, one H200: the one-GPU step again with the fit search capped at the micro-batch
# (--max-fit 32, as session 14 ran it), to see whether gpu_tests/'s search up to 128 responses
# before the timed steps changed their times.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 400 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 \
    --repeats 2 --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x1 > $OUT/step_x1.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x1.log >> $LOG
