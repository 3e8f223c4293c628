#!/bin/bash
# v80f: GPU suite, then A/B against main's kernels, then ncu at (28,16K)
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 exp-bin/v80f/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_v80f.txt 2>&1; echo "tests rc=$?" >> $OUT/log.txt
tail -5 $OUT/tests_v80f.txt >> $OUT/log.txt
bash exp/run_bins.sh "cur v80f" 28x4096,28x16384,16x65536 "cur v80f"
