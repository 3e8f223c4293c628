#!/bin/bash
# Prepared in session 16 for the next session (issue 10): the branch exp/fwd-vote (binaries
# exp-bin/vote; main's kernels otherwise): fwd3's schedule, where S(n) is issued before
# P(n-2) V(n-2) retires (session 15: 1-2% faster than fwd4), with the rescale decision voted across
# the warpgroup (bar.red.or.pred) so that the four warps of a warpgroup leave and re-enter the
# pipelined loop together: every wgmma is issued from one code path, which synccheck requires
# (fwd3 failed it). Session 15's vote cost 44-48 B of spills; with the uniform operand descriptors
# of session 16 it compiles with 0 spills and no C75xx diagnostic.
# GPU suite (LaterKeysRaiseTheMaximum makes the vote fire mid-walk), synccheck, racecheck and
# memcheck of the Hopper forward sanitizer cases, then `exp/run_bins.sh "final vote"` (final =
# main's kernels of a87e57c) at the five shapes, bf16, two alternating rounds.
# Pack first: exp/pack.sh final vote (then drop exp-xz/final/dualkv_cuda_tests.xz).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
tests=exp-bin/vote/dualkv_cuda_tests
timeout 150 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; rc=$?; echo "suite rc=$rc at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite.txt | tail -4 >> $LOG
[ $rc -ne 0 ] && exit 1
for tool in synccheck racecheck memcheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $tests --gtest_filter='*Sanitizer*Forward*Hopper*' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
timeout 300 bash exp/run_bins.sh "final vote" 28x4096,28x16384,16x32768,28x32768,16x65536
