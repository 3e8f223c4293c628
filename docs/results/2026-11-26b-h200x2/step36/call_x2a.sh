#!/bin/bash
# Session 14, call A on 2 H200s: the extension built on the device, then the 36-layer step
# benchmark's five 2-GPU points not run yet (P 8K x N 8, 16; P 16K x N 8, 16, 32) for dualkv and
# FlexAttention (FSDP2, one group per rank, whole-group micro-batches, warmup 1, 2 timed steps).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j30 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG
tail -1 /tmp/build.log >> $LOG
run() {  # name, P, N...
  local name=$1 p=$2; shift 2
  timeout 330 torchrun --nproc-per-node 2 bench/run_step_bench.py --layers 36 --prompt-lengths $p --responses "$@" \
    --warmup 1 --repeats 2 --methods dualkv flex_packed --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ " $OUT/$name.log >> $LOG
}
run step_x2_p8k 8192 8 16
run step_x2_p16k 16384 8 16 32
