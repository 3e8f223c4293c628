#!/bin/bash
# Session 18, one H200: the fused token-score kernels. The extension built on the device; the
# Python tests that run them on CUDA; bench/run_logprobs_bench.py (compare ../before/); one
# 36-layer step of dualkv under torch.profiler (exp/profile_step.py as in ../before/).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
python3 -m pytest -q tests/python/test_token_scores_op.py tests/python/test_logprobs.py \
    > $OUT/pytest.log 2>&1; echo "pytest rc $? at $SECONDS s" >> $LOG
tail -3 $OUT/pytest.log >> $LOG
python3 bench/run_logprobs_bench.py > $OUT/logprobs_bench.txt 2>&1; echo "logprobs bench rc $? at $SECONDS s" >> $LOG
timeout 300 python3 exp/profile_step.py --layers 36 --prompt-lengths 8192 --responses 32 --fuse-elementwise \
    --methods dualkv > $OUT/profile36.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
