#!/bin/bash
# Session 18, first call (one H200): the log-prob layer's cost before its fused kernels.
# The extension built on the device; bench/run_logprobs_bench.py at P 8K, N 32; one 36-layer
# step of dualkv under torch.profiler with --fuse-elementwise (exp/profile_step.py is session
# 14's docs/results/2026-11-26b-h200x2/flash_and_profile/profile_step.py printing 45 kernels).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
python3 bench/run_logprobs_bench.py > $OUT/logprobs_bench.txt 2>&1; echo "logprobs bench rc $? at $SECONDS s" >> $LOG
timeout 300 python3 exp/profile_step.py --layers 36 --prompt-lengths 8192 --responses 32 --fuse-elementwise \
    --methods dualkv > $OUT/profile36.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
