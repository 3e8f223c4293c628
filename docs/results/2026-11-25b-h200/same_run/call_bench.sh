#!/bin/bash
# Session 12: same-run comparison on this GPU of main's kernels (exp-bin/main, the kernels of
# 775d382) with the cuDNN and FA4 compositions, all five design shapes, one dtype per call:
#   exp/call_bench.sh bf16|fp16
cd "$(dirname "$0")/.."
bash exp/unpack.sh
mkdir -p exp-bin/mainb/bench && cp exp-bin/main/dualkv_bench exp-bin/mainb/bench/
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
DUALKV_BUILD_DIR=$PWD/exp-bin/mainb timeout 570 bash bench/run_gpu_bench.sh --dtype $1 2>&1 | grep -v Warning > $OUT/bench_$1.txt
echo "rc=$? at $SECONDS s" >> $OUT/bench_$1.txt
