#!/bin/bash
# Session 14: extension built on the device; the CUDA log-prob test; step profiles (8 layers,
# P 8K, N 32) with the LM-head gradient accumulated inside the GEMM, without and with compiled
# RMSNorm / SiLU-MLP (exp/profile_step.py --fuse).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
python3 -m pytest -q tests/python/test_logprobs.py tests/python/test_models_cuda.py > $OUT/pytest.log 2>&1; echo "pytest rc $? at $SECONDS s" >> $LOG
tail -2 $OUT/pytest.log >> $LOG
timeout 150 python3 exp/profile_step.py --layers 8 --prompt-lengths 8192 --responses 32 --methods dualkv > $OUT/profile.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
timeout 200 python3 exp/profile_step.py --layers 8 --prompt-lengths 8192 --responses 32 --methods dualkv flex_packed --fuse > $OUT/profile_fused.log 2>&1
echo "profile fused rc $? at $SECONDS s" >> $LOG
