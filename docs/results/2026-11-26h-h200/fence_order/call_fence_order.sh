#!/bin/bash
# Session 20, one H200 (issue 11). late_fence/ showed that moving the consumers' proxy fence after
# the next step's S^T / dP^T issue costs 5-8%: a reading is that fence.proxy.async waits for the
# warpgroup's wgmma still in flight. main (exp-bin/s19) has two such fences with a wgmma in flight:
# the dS fence after dV is issued, and the dQ hand-off fence after dK is issued. Variants:
#   p18a:  the dQ block staged and handed over before dK is issued (dQ waited for in full);
#   p18e:  the dS fence before dV is issued (the barrier stays after it);
#   p18ae: both.
# GPU suite of p18a and p18ae, sanitizers of p18ae's Hopper backward case, then alternating rounds
# of dualkv_bench at the five design shapes.
# Carry: exp-xz/s20b.tar.xz (exp-bin/{s19,p18a,p18e,p18ae}/dualkv_bench, exp-bin/{p18a,p18ae}/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s20b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in p18a p18ae; do
  timeout 200 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; echo "suite $v rc $? at $SECONDS s" >> $LOG
  tail -1 $OUT/suite_$v.txt >> $LOG
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/p18ae/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "2 bf16" "1 fp16"; do
  set -- $pass
  for variant in s19 p18a p18e p18ae; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
