#!/bin/bash
# Prepared in session 13 for the next session's first device call (not run): the probes q0 and q1
# of the 2-CTA exchange branch (build_q.sh; binaries in exp-bin/q0, exp-bin/q1 if the checkout
# survives) against main, p4 and p0b (session 13's probes), bf16, two alternating rounds.
# Pack first on the CPU machine: exp/pack.sh main q0 q1 p4 p0b (bench binaries only, ~2 MB each).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
bash exp/run_bins.sh "main q0 q1 p4 p0b" 28x4096,28x16384,16x65536 "q1"
