#!/bin/bash
# Session 15: fwd3 = main's fwd2 forward with the portable (sm80) online softmax restored to its
# exact pre-session form, plus the GPU test of keys that grow along each segment (the lazy
# maximum's rescale path). Whole GPU suite on fwd3; the new test on a mutant whose mid-walk
# rescale is removed (it must fail); portable and Hopper A/B against main at one shape.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
timeout 240 exp-bin/fwd3/dualkv_cuda_tests > $OUT/tests_fwd3.txt 2>&1; rc=$?; echo "tests rc=$rc at $SECONDS s" >> $LOG
grep -E "FAILED|tests ran|PASSED" $OUT/tests_fwd3.txt | tail -8 >> $LOG
timeout 60 exp-bin/mutant/dualkv_cuda_tests --gtest_filter='*LaterKeys*hopper*' > $OUT/tests_mutant.txt 2>&1; echo "mutant rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED  \] [0-9]+ test" $OUT/tests_mutant.txt | tail -3 >> $LOG
for round in 1 2; do
  for v in main fwd3; do
    for family in portable hopper; do
      echo "== $family $v round $round" >> $LOG
      exp-bin/$v/dualkv_bench --kernel-family $family --configs 28x16384 --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -3 >> $LOG
    done
  done
done
echo "done at $SECONDS s" >> $LOG
