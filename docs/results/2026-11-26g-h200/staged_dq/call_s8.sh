#!/bin/bash
# Session 19, one H200 (issue 11): the staged-dQ backward (branch s19/staged-dq: session 12's s8,
# cleaned: every dQ block staged in shared memory and reduced by the dQ warp's bulk reductions).
# Its GPU suite, compute-sanitizer memcheck / racecheck / synccheck of the Hopper backward case,
# then two alternating rounds of dualkv_bench at the five design shapes, bf16 and fp16: main
# (session 18's main18 build; the backward has not changed since) against s19.
# Carry: exp-xz/s19.tar.xz (exp-bin/{main18,s19}/dualkv_bench, exp-bin/s19/dualkv_cuda_tests).
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s19.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
tests=exp-bin/s19/dualkv_cuda_tests
timeout 240 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; echo "suite rc $? at $SECONDS s" >> $LOG
tail -3 $OUT/suite.txt >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $tests --gtest_filter='*Sanitizer*BackwardHopper*' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for round in 1 2; do
  for dtype in bf16 fp16; do
    for variant in main18 s19; do
      echo "== round $round $dtype $variant" >> $OUT/bench.txt
      exp-bin/$variant/dualkv_bench --configs $configs --dtype $dtype --kernel-family hopper 2>&1 \
        | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
    done
  done
done
echo "bench done at $SECONDS s" >> $LOG
