#!/bin/bash
# Session 14: extension built on the device; CUDA log-prob and model tests; the 36-layer step
# benchmark at P 8K, N 32 on one GPU for dualkv and FlexAttention, eager then with
# --fuse-elementwise (fit search to 32, warmup 1, 2 timed steps).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
python3 -m pytest -q tests/python/test_logprobs.py tests/python/test_fused.py tests/python/test_models_cuda.py > $OUT/pytest.log 2>&1
echo "pytest rc $? at $SECONDS s" >> $LOG; tail -1 $OUT/pytest.log >> $LOG
for variant in eager fused; do
  flag=""; [ $variant = fused ] && flag="--fuse-elementwise"
  timeout 240 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 \
    --warmup 1 --repeats 2 --methods dualkv flex_packed $flag --out $OUT/step_$variant > $OUT/step_$variant.log 2>&1
  echo "step $variant rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ " $OUT/step_$variant.log >> $LOG
done
