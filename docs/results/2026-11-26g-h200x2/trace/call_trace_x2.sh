#!/bin/bash
# Session 19, two H200s: chrome traces (CUDA activity) of one 36-layer step per method under
# torchrun, both ranks, to see what overlaps dualkv's attention forward on 2 GPUs.
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >> $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
TRACE_DIR=$OUT/traces timeout 400 torchrun --nproc-per-node 2 exp/profile_x2_trace.py --layers 36 --prompt-lengths 8192 --responses 32 \
    --fuse-elementwise --methods dualkv flex_packed > $OUT/profile_x2.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
ls -la $OUT/traces >> $LOG
