#!/bin/bash
# Session 30, one GPU (issue 12): ../step2/call_step2.sh with the feature dimensions marked static under dynamic=True (instead of dynamic=None with the token dimensions marked dynamic), after the gradient-layout change (squeeze
# instead of select in the attention integrations, RoPE rotated in the projections' storage
# order). The extension built on the device; the fused-layer and model tests on the GPU; the
# one-GPU step; one profiled 36-layer step of each method.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 120 python3 -m pytest -q tests/python/test_fused.py tests/python/test_models_cuda.py > $OUT/pytest.log 2>&1
echo "pytest rc $? at $SECONDS s: $(tail -1 $OUT/pytest.log)" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 240 python3 bench/run_step_bench.py $common --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step.log >> $LOG
mkdir -p exp && cp docs/results/2026-11-26g-h200/profile_seed1/profile_step.py exp/
timeout $((585 - SECONDS)) python3 exp/profile_step.py --layers 36 --prompt-lengths 8192 --responses 32 --fuse-elementwise \
    --methods dualkv flex_packed > $OUT/profile.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
