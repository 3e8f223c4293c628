#!/bin/bash
# Session 19, one H200 (issue 12): the one-GPU step (P = 8K, N = 32, --max-fit 32) as fixed
# (compile caches cleared after the fit search: FlexAttention compiled for the timed step's own
# stream length), then as before the fix (exp/s19/step_no_reset.py: FlexAttention's timed step runs
# the symbolic-length kernel that the search's several lengths left), on the same machine.
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 270 python3 bench/run_step_bench.py $common --out $OUT/fixed > $OUT/fixed.log 2>&1
echo "fixed rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/fixed.log >> $LOG
timeout 270 python3 exp/s19/step_no_reset.py $common --out $OUT/before > $OUT/before.log 2>&1
echo "before rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/before.log >> $LOG
