#!/bin/bash
# Session 13, call 1: the 2-CTA dQ exchange (branch exp/dq-pairs, binary "pairs") on the GPU.
# GPU suite on pairs (timeout: a broken cluster handshake hangs), then A/B against main (bf16,
# two alternating rounds), then ncu metrics of main and pairs at (28, 16K).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 exp-bin/pairs/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_pairs.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $LOG
tail -6 $OUT/tests_pairs.txt >> $LOG
bash exp/run_bins.sh "main pairs" 28x4096,28x16384,16x65536 "main pairs"
