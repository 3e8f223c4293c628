#!/bin/bash
# Prepared in session 15 for the next session (issue 10): the branch exp/fwd-pingpong (binaries
# exp-bin/pingpong; main's kernels otherwise): the two consumer warpgroups of the Hopper forward
# take turns to issue their GEMMs (FA3's warp scheduler barriers). ptxas spills 28 bytes at bf16
# d128, so this measures whether the schedule is worth fighting the spills for. GPU suite and the
# sanitizer subset (synccheck above all: the turns are named barriers) on pingpong, then
# `exp/run_bins.sh "fwd4 pingpong"` (fwd4: main's kernels of 6b7fda3) (Hopper bf16, two alternating rounds).
# Pack first: exp/pack.sh fwd4 pingpong (drop exp-xz/fwd4/dualkv_cuda_tests.xz).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
tests=exp-bin/pingpong/dualkv_cuda_tests
timeout 150 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; rc=$?; echo "suite rc=$rc at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite.txt | tail -4 >> $LOG
[ $rc -ne 0 ] && exit 1
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 3 $tests --gtest_filter='*Sanitizer*Hopper*' --gtest_brief=1 \
  > $OUT/synccheck.txt 2>&1; echo "synccheck rc=$? at $SECONDS s" >> $LOG
timeout 200 bash exp/run_bins.sh "fwd4 pingpong" 28x4096,28x16384,16x65536
