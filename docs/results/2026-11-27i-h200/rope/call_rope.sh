#!/bin/bash
# Session 30, one H200 (issue 12): the fused RoPE's formulations timed alone at the step's T, with
# Inductor's generated code kept for the main formulation.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
TORCH_LOGS=output_code timeout 300 python3 rope_bench.py 45800 > $OUT/rope.txt 2> $OUT/inductor_code.txt
echo "rc $?" >> $OUT/rope.txt
