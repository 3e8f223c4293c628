#!/bin/bash
# Session 11, E1 (statistics tiles read as float4): GPU suite on the new binary, then two alternating
# rounds of the Hopper bench against main's kernel (exp-bin/cur), then ncu of both at (28, 16K).
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/e1/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_e1.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $OUT/log.txt
tail -4 $OUT/tests_e1.txt >> $OUT/log.txt
bash exp/run_bins.sh "cur e1" 28x4096,28x16384,16x65536 "cur e1"
