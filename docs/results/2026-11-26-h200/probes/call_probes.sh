#!/bin/bash
# Session 13, last call: what the dQ reductions really cost. Session 12's p0 probe dropped the
# reductions, and with them (SASS: 25 HGMMA instead of 32) the dQ GEMM, whose result nothing read.
# p0b keeps the GEMM (reductions behind a runtime condition that never holds); pst replaces the
# reductions with plain stores to the same addresses; p4 (session 12) issues 4 of the 8. All perf
# probes with wrong dQ. Two alternating rounds (bf16), then ncu of p0b at (28, 16K).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
bash exp/run_bins.sh "main p0b pst p4" 28x4096,28x16384,16x65536 "p0b"
