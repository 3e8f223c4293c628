#!/bin/bash
# Session 13, call 2: the 2-CTA dQ exchange after the hang fixes (setmaxnreg total within the CTA's
# 384 x 168 registers; non-aligned cluster barrier at exit). GPU suite on pairs (not brief, so a
# hang names its test), A/B against main (bf16, two alternating rounds), ncu of main and pairs.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/pairs/dualkv_cuda_tests > $OUT/tests_pairs.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $LOG
grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran" $OUT/tests_pairs.txt | tail -8 >> $LOG
tail -3 $OUT/tests_pairs.txt >> $LOG
timeout 200 bash exp/run_bins.sh "main pairs" 28x4096,28x16384,16x65536 "main pairs"
