#!/bin/bash
# Session 15: fwd4 = the Hopper forward with control flow around every wgmma that depends only on
# the walk (synccheck found fwd2/fwd3's rescale path issuing the same wgmmas from different code
# copies in different warps of a warpgroup): per block, retire P V, rescale O per warp, issue S
# and the next P V, softmax under it. Suite and sanitizer subset (memcheck, racecheck, synccheck)
# on fwd4, then A/B main (pre-session) / fwd3 / fwd4, Hopper bf16, two alternating rounds.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
tests=exp-bin/fwd4/dualkv_cuda_tests
timeout 150 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; echo "suite rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite.txt | tail -4 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 $tests --gtest_filter='*Sanitizer*:CudaPlans.CachedAndShortLivedPlansGiveTheSameBits' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s" >> $LOG
  grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" $OUT/sanitizer_$tool.txt | tail -3 >> $LOG
done
timeout 200 bash exp/run_bins.sh "main fwd3 fwd4" 28x4096,28x16384,16x65536
