#!/bin/bash
# Session 12, call 3: how the dQ registers leave the MMA warps. GPU suite on s4; A/B (bf16, two
# alternating rounds) of main, the probes p4 / p0 (4 / 0 of the 8 red.global per thread: wrong dQ,
# upper bounds) and s2 / s4 / s8 (2 / 4 / 8 of the 8 groups staged in shared memory and bulk-reduced
# by a dQ warp, the rest red.global from registers); ncu metrics of main and s4 at (28, 16K).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/s4/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_s4.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $LOG
tail -4 $OUT/tests_s4.txt >> $LOG
bash exp/run_bins.sh "main p4 p0 s4 s8 s2" 28x4096,28x16384,16x65536 "main s4"
