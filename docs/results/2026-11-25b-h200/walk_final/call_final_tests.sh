#!/bin/bash
# Session 12, call 6: the kept change (rectangle-first walk + KV-head-major CTAs) on main's build:
# GPU suite and sanitizer subset (tests/cuda/run_gpu_tests.sh layout), then A/B against the
# previous main (exp-bin/main) for the Hopper family at the five shapes and the portable family
# (which walks the same QueryWalk) at three, bf16, two alternating rounds.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
mkdir -p exp-bin/newb/tests/cuda && cp exp-bin/new/dualkv_cuda_tests exp-bin/newb/tests/cuda/
timeout 300 bash tests/cuda/run_gpu_tests.sh exp-bin/newb > $OUT/gpu_tests.txt 2>&1; echo "run_gpu_tests rc=$? at $SECONDS s" >> $LOG
grep -E "^==|PASSED|FAILED|ERROR SUMMARY" $OUT/gpu_tests.txt >> $LOG
for round in 1 2; do
  for v in main new; do
    echo "== hopper $v round $round at $SECONDS s" >> $LOG
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs all --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -6 >> $LOG
  done
done
for round in 1 2; do
  for v in main new; do
    echo "== portable $v round $round at $SECONDS s" >> $LOG
    exp-bin/$v/dualkv_bench --kernel-family portable --configs 28x4096,28x16384,16x65536 --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -4 >> $LOG
  done
done
echo done >> $LOG
