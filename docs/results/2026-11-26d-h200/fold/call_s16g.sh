#!/bin/bash
# Session 16 (issue 10, code quality): the Hopper forward with its "retire the last P V, free its V
# buffer, rescale O" sequence written once (retire_and_rescale) instead of twice. Same operations;
# ptxas emits 8 fewer instructions and renames predicates. GPU suite on it, then two alternating
# rounds of dualkv_bench --kernel-family hopper --dtype bf16 against main (a87e57c, "final").
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
timeout 150 exp-bin/fold/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_fold.txt 2>&1; echo "suite fold rc=$? at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite_fold.txt | tail -4 >> $LOG
timeout 120 bash exp/run_bins.sh "final fold" 28x4096,28x16384,16x65536
