#!/bin/bash
# Session 20, one H200 (issue 11). Two probes of the staged-dQ backward (main = exp-bin/s19):
#   p13:  the consumers' dQ hand-off fence + full-barrier arrive moved after the next step's S^T
#         and dP^T issue (session 20's SASS sampling: FENCE.VIEW.ASYNC.S 5.6% of samples);
#   p113: p13 + LSE and D read as 8-byte pairs when the step's stats row is 8-byte aligned
#         (LDS 9.1% of samples, mio).
# GPU suite of both, sanitizers of p13's Hopper backward case, then alternating rounds of
# dualkv_bench at the five design shapes.
# Carry: exp-xz/s20a.tar.xz (exp-bin/{s19,p13,p113}/dualkv_bench, exp-bin/p13/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s20a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in p13; do
  timeout 200 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; echo "suite $v rc $? at $SECONDS s" >> $LOG
  tail -2 $OUT/suite_$v.txt >> $LOG
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/p13/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "2 bf16" "1 fp16"; do
  set -- $pass
  for variant in s19 p13 p113; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
