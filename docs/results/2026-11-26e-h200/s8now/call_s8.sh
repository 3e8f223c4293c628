#!/bin/bash
# Session 17 (issue 11): session 12's s8 (dQ staged in shared memory, one bulk reduction per
# warpgroup block by a dQ warp; branch exp/s8-trace at c4f421b, no probe) against main (final),
# after the trace showed it 9% faster with the probe in both. GPU suite and the Hopper backward
# sanitizer case under memcheck and racecheck on s8now, then exp/run_bins.sh at the five shapes.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
t=exp-bin/s8now/dualkv_cuda_tests
timeout 150 $t --gtest_brief=1 > $OUT/suite.txt 2>&1; echo "suite rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED  \] [0-9]" $OUT/suite.txt | tail -3 >> $LOG
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 $t --gtest_filter='*Sanitizer*BackwardHopper*' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
timeout 300 bash exp/run_bins.sh "final s8now" 28x4096,28x16384,16x32768,28x32768,16x65536
