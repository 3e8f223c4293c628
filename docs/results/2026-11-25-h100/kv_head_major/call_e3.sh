#!/bin/bash
# Session 11, E3 (KV-head-major CTA order in the Hopper backward): GPU suite, two alternating rounds
# against main's kernel (exp-bin/cur) at all five shapes, ncu of both at (28, 16K) with the L2 hit rate.
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/e3/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_e3.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $OUT/log.txt
tail -4 $OUT/tests_e3.txt >> $OUT/log.txt
bash exp/run_bins.sh "cur e3" 28x4096,28x16384,16x32768,28x32768,16x65536 "cur e3"
