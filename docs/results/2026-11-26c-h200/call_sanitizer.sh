#!/bin/bash
# Session 15: the final GPU test binary (main's kernels of 8f57f01, tests of 2e54f6f): the whole
# GPU suite, then its sanitizer subset (now with a Hopper forward case of several key blocks per
# tile and growing keys) under compute-sanitizer memcheck, racecheck and synccheck.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
tests=exp-bin/final/dualkv_cuda_tests
timeout 150 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; echo "suite rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite.txt | tail -4 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 $tests --gtest_filter='*Sanitizer*:CudaPlans.CachedAndShortLivedPlansGiveTheSameBits' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s" >> $LOG
  grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" $OUT/sanitizer_$tool.txt | tail -3 >> $LOG
done
