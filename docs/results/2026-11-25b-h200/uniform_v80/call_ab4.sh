#!/bin/bash
# Session 12, first call: GPU suite on the uniform-descriptor build, then an A/B of main, uniform,
# v80f and v80f-kvmajor (Hopper family, bf16, two alternating rounds), ncu of main and uniform at (28, 16K).
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/uniform/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_uniform.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $OUT/log.txt
tail -4 $OUT/tests_uniform.txt >> $OUT/log.txt
bash exp/run_bins.sh "main uniform v80f v80f-kvmajor" 28x4096,28x16384,16x65536 "main uniform"
