#!/bin/bash
# Session 20, one H200 (issue 11). Two probes of the staged-dQ backward (main = exp-bin/s19):
#   pe:    a quarter of the exponentials (every fourth score of a thread) computed on the FMA pipe
#          (exp2_polynomial: exponent bits times a degree-4 polynomial), to shorten the
#          special-function unit's queue (MUFU.EX2 and the HGMMA issue both stall on mio);
#   dqbuf: two dQ staging buffers per consumer warpgroup (head_dim 128; the storage then fills the
#          232,448 bytes exactly), handed over through mbarriers instead of named barriers, so a
#          warpgroup never waits for the dQ warp's previous reduction to have read its buffer.
# GPU suite of both, sanitizers of dqbuf's Hopper backward case, then alternating rounds of
# dualkv_bench at the five design shapes.
# Carry: exp-xz/s20c.tar.xz (exp-bin/{s19,pe,dqbuf}/dualkv_bench, exp-bin/{pe,dqbuf}/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s20c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in dqbuf pe; do
  timeout 200 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; echo "suite $v rc $? at $SECONDS s" >> $LOG
  tail -1 $OUT/suite_$v.txt >> $LOG
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/dqbuf/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "2 bf16" "1 fp16"; do
  set -- $pass
  for variant in s19 pe dqbuf; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
