#!/bin/bash
# Session 19, two H200s (issue 12): the 2-GPU step with FlexAttention compiled for a symbolic
# stream length (--flex-shapes dynamic), dualkv and FlexAttention in one run, as session 16's
# prepared call_x2_step.sh otherwise (one warm-up, 3 timed steps).
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 330 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 \
  --responses 32 --warmup 1 --repeats 3 --methods dualkv flex_packed --fuse-elementwise --flex-shapes dynamic \
  --out $OUT/step_x2_dynamic > $OUT/step_x2_dynamic.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step_x2_dynamic.log >> $LOG
