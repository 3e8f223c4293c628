#!/bin/bash
# Session 17 (issue 11): the producer-less backward (thread 0 loads, 255 registers, dP^T issued once
# the previous dK is done) at 80-query steps (v80p) and 64-query steps (v64p), against main (final).
# memcheck of the Hopper backward sanitizer case, the GPU suite on both variants, then two
# alternating rounds of dualkv_bench at three shapes, then ncu.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
for v in v80p v64p; do
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 exp-bin/$v/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/memcheck_$v.txt 2>&1
  echo "$v memcheck rc=$? at $SECONDS s" >> $LOG
  timeout 150 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1
  echo "$v suite rc=$? at $SECONDS s" >> $LOG
  grep -E "tests ran|PASSED|FAILED  \] [0-9]" $OUT/suite_$v.txt | tail -3 >> $LOG
done
grep -q "PASSED  \] 360" $OUT/suite_v80p.txt || grep -q "PASSED  \] 360" $OUT/suite_v64p.txt || exit 1
timeout 330 bash exp/run_bins.sh "final v64p v80p" 28x4096,28x16384,16x65536 "final v80p"
