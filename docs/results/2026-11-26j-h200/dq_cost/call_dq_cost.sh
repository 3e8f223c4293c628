#!/bin/bash
# Session 22, one GPU (issue 11): what the in-kernel dQ costs. The deterministic backward's KV kernel
# is the atomic one without its dQ part (no dS store, dS barrier, dQ GEMM, staging or reductions:
# four GEMMs per step instead of five); ncu times each KV-kernel launch (gpu__time_duration) of
# both modes at two shapes, main's build (exp-xz/s22b.tar.xz: exp-bin/m22/dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s22b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
for config in 28x16384 16x65536; do
  for mode in "" "--deterministic"; do
    echo "== $config ${mode:-atomic}" >> $OUT/ncu.txt
    timeout 200 ncu --kernel-name regex:backward_kv_kernel --launch-skip 2 --launch-count 3 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \
      exp-bin/m22/dualkv_bench --configs $config --dtype bf16 --kernel-family hopper $mode --repeats 10 \
      2>&1 | grep -E "backward_kv_kernel|gpu__time_duration|cycles_elapsed" >> $OUT/ncu.txt
    echo "$config ${mode:-atomic} done at $SECONDS s" >> $LOG
  done
done
