#!/bin/bash
# Session 18, one H200: the token-score kernels' GPU suite (C++, 123 tests) and compute-sanitizer
# memcheck and racecheck on part of it; dualkv_bench's Hopper backward at the step's (N, P) =
# (32, 8K) next to (28, 4K); the 36-layer step on one GPU, dualkv and FlexAttention.
# Carry: .cutlass, build/cuda-sm90/tests/cuda/dualkv_cuda_tests, build/cuda-sm90/bench/dualkv_bench.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
tests=build/cuda-sm90/tests/cuda/dualkv_cuda_tests
$tests --gtest_filter='*TokenScores*' > $OUT/gtest_token_scores.log 2>&1; echo "gtest rc $? at $SECONDS s" >> $LOG
tail -3 $OUT/gtest_token_scores.log >> $LOG
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 $tests --gtest_filter='*TokenScores*Vocab1023*:*TokenScores*Nan*:*TokenScores*Bad*' \
    > $OUT/sanitizer_$tool.log 2>&1; echo "$tool rc $? at $SECONDS s" >> $LOG
  tail -2 $OUT/sanitizer_$tool.log >> $LOG
done
build/cuda-sm90/bench/dualkv_bench --configs 28x4096,32x8192 --dtype bf16 --kernel-family hopper > $OUT/bench.txt 2>&1
echo "bench rc $? at $SECONDS s" >> $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 300 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 --warmup 1 --repeats 2 \
    --methods dualkv flex_packed --fuse-elementwise --out $OUT/step_x1 > $OUT/step_x1.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x1.log >> $LOG
