#!/bin/bash
# Session 16, second A/B call (issues 10 and 11), one H200. Binaries built on the CPU machine:
#   fwd4   main's kernels (f5c4e19)
#   uboth  both Hopper kernels slice their shared-memory operands by the warpgroup's first thread
#          (session 11's uniform descriptors, uniform_both.patch). In today's backward SASS this
#          also leaves the dQ reductions' address register untouched until the next step's S^T
#          is issued (main rewrites it first thing at the loop top and waits for all 8 REDG).
# GPU suite on uboth, then exp/run_bins.sh (two alternating rounds of
# dualkv_bench --kernel-family hopper --dtype bf16) and ncu of the backward for both.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 150 exp-bin/uboth/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_uboth.txt 2>&1; rc=$?
echo "suite uboth rc=$rc at $SECONDS s" >> $LOG
grep -E "tests ran|PASSED|FAILED" $OUT/suite_uboth.txt | tail -4 >> $LOG
timeout 300 bash exp/run_bins.sh "fwd4 uboth" 28x4096,28x16384,16x65536 "fwd4 uboth"
