#!/bin/bash
# Session 24, one H200 (issue 11): the clock each whole backward holds at the power cap, run back to
# back at (28, 16K) bf16: dualkv's (../clock2/backward_loop.py), the FA4 composition's and the
# cuDNN composition's (composition_loop.py: bench/baselines.py's three pieces and gradient sums),
# dualkv again; nvidia-smi samples every 20 ms, ../clock2/clock_summary.py takes the medians.
# ../clock2/ compared against FA4's rectangle kernel alone; this is the comparison the benchmark
# makes. Builds the extension first (carry .cutlass); needs the FA4 wheels, the largest staged in
# /tmp/whl-stage by ../../2026-11-26j-h200/d64_same_run/call_stage.sh, the rest carried.
cd "$(dirname "$0")/../../../.."
D=docs/results/2026-11-27-h200
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > /tmp/build.log 2>&1
echo "extension rc $? at $SECONDS s" >> $LOG
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache
timeout 120 python3 $D/clock3/composition_loop.py --baseline fa4_composition --runs 2 > /dev/null 2>&1  # compile
echo "compiled at $SECONDS s" >> $LOG
sample() {  # $1: name; the rest: the command, run while nvidia-smi samples
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi_$name.csv &
  local smi=$!
  "$@" > /tmp/run_$name.txt 2>&1; echo "$name rc $? at $SECONDS s" >> $LOG
  kill $smi
  grep -v window /tmp/run_$name.txt | grep -v Warning >> $OUT/clock.txt
  python3 $D/clock2/clock_summary.py $name /tmp/smi_$name.csv /tmp/run_$name.txt >> $OUT/clock.txt 2>&1
}
sample dualkv_first timeout 120 python3 $D/clock2/backward_loop.py --runs 50
sample fa4_composition timeout 120 python3 $D/clock3/composition_loop.py --baseline fa4_composition --runs 50
sample cudnn_composition timeout 120 python3 $D/clock3/composition_loop.py --baseline cudnn_composition --runs 50
sample dualkv_last timeout 120 python3 $D/clock2/backward_loop.py --runs 50
