#!/bin/bash
# Session 20, one H200 (issue 11). dq2: one dQ warp per consumer warpgroup (warps 1 and 2 of the
# producer warpgroup) instead of one for both, so a warpgroup's staging buffer is handed back as
# soon as its own reduction has read it, never after the other warpgroup's hand-over (main's dQ
# warp waits for both blocks of a step before handing back either). late_fence/ showed the
# hand-off's latency matters (p13: -6 to -8%).
# GPU suite and sanitizers of dq2, then alternating rounds of dualkv_bench at the five design shapes.
# Carry: exp-xz/s20e.tar.xz (exp-bin/{s19,dq2}/dualkv_bench, exp-bin/dq2/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s20e.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 exp-bin/dq2/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_dq2.txt 2>&1; echo "suite dq2 rc $? at $SECONDS s" >> $LOG
tail -1 $OUT/suite_dq2.txt >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/dq2/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "1 fp16" "2 bf16" "2 fp16"; do
  set -- $pass
  for variant in s19 dq2; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
