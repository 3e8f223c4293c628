#!/bin/bash
# Session 18, two H200s: one profiled 36-layer step per method under torchrun (FSDP2 over both
# GPUs), to see why dualkv's step loses 0.3-0.4 s on 2 GPUs against 1 while FlexAttention's does
# not. exp/profile_x2.py is kept beside this script; it imports exp/profile_step.py (session 14's,
# plus token-score kernels counted as "other").
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
timeout 400 torchrun --nproc-per-node 2 exp/profile_x2.py --layers 36 --prompt-lengths 8192 --responses 32 \
    --fuse-elementwise --methods dualkv flex_packed > $OUT/profile_x2.log 2>&1
echo "profile rc $? at $SECONDS s" >> $LOG
