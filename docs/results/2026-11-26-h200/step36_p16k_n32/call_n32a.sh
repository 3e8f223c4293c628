#!/bin/bash
# Session 13, call C: the 36-layer step benchmark at P = 16K, N = 32 for dualkv and FlexAttention
# (one process), after building the PyTorch extension (sm90) on the device.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j14 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
tail -2 /tmp/build.log >> $LOG
timeout 440 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 16384 --responses 32 --max-fit 32 \
  --warmup 1 --repeats 1 --methods dualkv flex_packed --out $OUT/step_p16k_n32 > $OUT/step_p16k_n32.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
tail -12 $OUT/step_p16k_n32.log >> $LOG
