#!/bin/bash
# Session 31, one GPU: main's kernels (unchanged since session 29) with the new forward test
# CudaForward.NanValuesInOddSegmentsStayThere (NaN in v alone of every other segment), both
# families: the whole GPU suite. Binary built here from this tree and carried (exp-bin/final).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 300 exp-bin/final/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
timeout 120 exp-bin/final/dualkv_cuda_tests --gtest_filter='*NanValues*' > $OUT/nan_values.txt 2>&1
echo "NaN-values tests rc $?: $(grep -c '^\[       OK \]' $OUT/nan_values.txt) OK, $(tail -1 $OUT/nan_values.txt)" >> $LOG
