#!/bin/bash
# Session 21, one H200 (issue 11). FA4's sm90 backward with the same 64 x 128 tile as ours runs the
# responses x prompt rectangle at 585-605 TFLOP/s (fa4_tile/), so the tile is not what separates
# the two kernels. Two differences left between its step and ours, probed here:
#   h1:  dS stored keys-contiguous (transposing stmatrix) and read by dQ as a K-major A operand
#        (ours: queries-contiguous, MN-major A);
#   h2:  dK waited for at the end of every step (ours: the next S^T / dP^T queue behind it);
#   h12: both, i.e. FA4's step.
# GPU suite and sanitizers of h1 and h12, then alternating rounds of dualkv_bench at the five
# design shapes against main's build (s19).
# Carry: exp-xz/s21a.tar.xz (exp-bin/{s19,h1,h2,h12}/dualkv_bench, exp-bin/{h1,h12}/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s21a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in h1 h12; do
  timeout 200 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; echo "suite $v rc $? at $SECONDS s" >> $LOG
  tail -1 $OUT/suite_$v.txt >> $LOG
  for tool in memcheck racecheck synccheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/$v/dualkv_cuda_tests \
      --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_${v}_$tool.txt 2>&1
    echo "$v $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_${v}_$tool.txt | tail -1)" >> $LOG
  done
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in s19 h1 h2 h12; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
