#!/bin/bash
# Session 30, one GPU (issue 12): this session's Python changes against session 29's, on one
# machine. The extension (the same C++ in both) built on the device; session 21's one-GPU step
# with this tree, then with session 29's fused.py, transformers.py and bench/step_attention.py
# (to_session29.patch applied to copies of the installed package and of bench/).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
old=/tmp/session29 && mkdir -p $old/python && cp -r bench $old/
cp -r "$(python3 -c 'import dualkv, os; print(os.path.dirname(dualkv.__file__))')" $old/python/dualkv
patch -p1 -d $old < docs/results/2026-11-27i-h200/ab/to_session29.patch >> $LOG 2>&1; echo "patch rc $?" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 240 python3 bench/run_step_bench.py $common --out $OUT/new > $OUT/new.log 2>&1
echo "new rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/new.log >> $LOG
PYTHONPATH=$old/python timeout $((590 - SECONDS)) python3 $old/bench/run_step_bench.py $common --out $OUT/old > $OUT/old.log 2>&1
echo "session 29 rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/old.log >> $LOG
