#!/bin/bash
# Session 12, call 4: where the dQ reductions' cost comes from. GPU suite on w1; A/B (bf16, two
# alternating rounds) of main, w1 (prompt key tiles walk the response rectangle first, every head,
# then their prompt part: resident CTAs in lock-step), w2 (w1 + KV-head-major CTA order) and prot
# (perf probe, wrong dQ: each CTA's dQ slot rotated by its block index: same traffic, no
# same-line contention); ncu metrics of all four at (28, 16K).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/w1/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_w1.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $LOG
tail -4 $OUT/tests_w1.txt >> $LOG
bash exp/run_bins.sh "main w1 w2 prot" 28x4096,28x16384,16x65536 "main w1 w2 prot"
