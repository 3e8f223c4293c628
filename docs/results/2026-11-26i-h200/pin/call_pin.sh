#!/bin/bash
# Session 21, one H200 (issue 11). pin: ptxas places the wait for dP^T (WARPGROUP.DEPBAR.LE gsb0,
# 0x0) after only 13 of the step's 32 exponentials (main's SASS), so 19 of them and their FFMAs
# run after dP^T has landed, on the critical path to the dV issue, with the tensor pipe idle.
# pin folds the 32 probabilities into one word (XOR of their bits) and stores it to a shared-memory
# sink before the wait; ptxas keeps stores on their side of the DEPBAR, so every exponential is
# issued while dP^T runs.
# GPU suite and sanitizers of pin, then alternating rounds of dualkv_bench at the five design
# shapes against main's build (s19).
# Carry: exp-xz/s21b.tar.xz (exp-bin/{s19,pin}/dualkv_bench, exp-bin/pin/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s21b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in pin; do
  timeout 200 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; echo "suite $v rc $? at $SECONDS s" >> $LOG
  tail -1 $OUT/suite_$v.txt >> $LOG
  for tool in memcheck racecheck synccheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/$v/dualkv_cuda_tests \
      --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_${v}_$tool.txt 2>&1
    echo "$v $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_${v}_$tool.txt | tail -1)" >> $LOG
  done
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "1 fp16" "2 bf16" "2 fp16"; do
  set -- $pass
  for variant in s19 pin; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
