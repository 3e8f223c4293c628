#!/bin/bash
# Session 34, one H100 (issue 12): the one-GPU step at P = 8K, N = 32 on the other lent one-GPU kind,
# with today's kernels (its last H100 run was session 9's, with older kernels). Session 21's one-GPU
# command (FlexAttention compiled for the step's length, --max-fit 32) $1 times (default 2) on one machine, after
# the extension build.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --fuse-elementwise"
for run in $(seq 1 ${1:-2}); do
  nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader >> $LOG
  timeout 240 python3 bench/run_step_bench.py $common --methods dualkv flex_packed --out $OUT/run$run > $OUT/run$run.log 2>&1
  echo "run $run rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/run$run.log >> $LOG
  python3 -c "import json; d=json.load(open('$OUT/run$run/step_bench.json')); [print(m, v['step_s_all'], v['peak_memory_gib']) for e in d['entries'] for m, v in e['methods'].items()]" >> $LOG
  rm -f $OUT/run$run/step_bench.png
done
