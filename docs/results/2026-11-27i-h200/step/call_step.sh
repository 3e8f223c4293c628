#!/bin/bash
# Session 30, one GPU (issue 12): the fused elementwise layers with only the token dimensions
# symbolic. The extension built on the device from this tree; the RoPE / norm / SiLU kernels timed
# alone (../rope/rope_bench.py); session 21's one-GPU step at P = 8K, N = 32 (FlexAttention compiled
# for the timed step's length, --max-fit 32); then one profiled 36-layer dualkv step (session 19's
# profile_step.py, run from exp/ so that it finds bench/).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
(cd docs/results/2026-11-27i-h200/rope && timeout 150 python3 rope_bench.py 45800 > $OUT/rope.txt 2>&1)
echo "rope rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 300 python3 bench/run_step_bench.py $common --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step.log >> $LOG
mkdir -p exp && cp docs/results/2026-11-26g-h200/profile_seed1/profile_step.py exp/
timeout $((580 - SECONDS)) python3 exp/profile_step.py --layers 36 --prompt-lengths 8192 --responses 32 --fuse-elementwise \
    --methods dualkv > $OUT/profile.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
