#!/bin/bash
# Session 16, final forward call, part 1 of 2 (issue 10), one H200: main's kernels (a87e57c: uniform
# operand descriptors and snake work order in the Hopper forward). GPU suite, then compute-sanitizer
# memcheck, racecheck and synccheck of the Hopper forward sanitizer cases. exp-xz held only main's
# test binary (xz -9e). The carry limit (64 MiB with the FA4 wheels) split the call in two.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
tests=exp-bin/final/dualkv_cuda_tests
timeout 150 $tests --gtest_brief=1 > $OUT/suite.txt 2>&1; echo "suite rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite.txt | tail -4 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $tests --gtest_filter='*Sanitizer*Forward*Hopper*' \
    --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
