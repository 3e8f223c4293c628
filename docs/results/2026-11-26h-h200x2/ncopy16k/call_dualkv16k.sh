#!/bin/bash
# Session 20, two H200s (issue 12): dualkv's 2-GPU step at P = 16K, N = 8, 16, 32 on main (801f20b),
# so that the N-copy baseline rows of call_ncopy16k.sh divide by today's dualkv rather than session
# 14's: the same command as session 14's grid (unfused, one group per rank, whole-group
# micro-batches), one warm-up and one timed step.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1
echo "build rc $? at $SECONDS s" >> $LOG
timeout 240 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 16384 --responses 8 16 32 \
  --warmup 1 --repeats 1 --methods dualkv --out $OUT/dualkv_p16k > $OUT/dualkv_p16k.log 2>&1
echo "dualkv P=16K rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/dualkv_p16k.log >> $LOG
