#!/bin/bash
# Session 21, one H200 (issue 11). cta_trace/ showed the KV kernel's response key tiles stepping at
# 2.4-2.7 us while they run beside prompt tiles but 3.7-4.5 us once only response tiles are left
# (the last 5-6 ms of the kernel at N = 28): the heaviest-first order runs tile j of every response
# and KV head together, so a response's 16 key tiles add into its dQ rows, and read its Q and dO
# rows, at 16 different times. order: a response's key tiles are one unit in the plan (weighed by
# its first tile, heaviest first inside), prompt tiles still heaviest first.
# GPU suite of order, then alternating rounds against main's kernels (hd: main + --head-dim).
# Carry: exp-xz/s21e.tar.xz (exp-bin/{hd,order}/dualkv_bench, exp-bin/order/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s21e.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 exp-bin/order/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_order.txt 2>&1; echo "suite order rc $? at $SECONDS s" >> $LOG
tail -1 $OUT/suite_order.txt >> $LOG
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16 hopper $configs" "1 fp16 hopper $configs" "2 bf16 hopper $configs" "1 bf16 portable 28x4096,28x16384"; do
  set -- $pass
  for variant in hd order; do
    echo "== round $1 $2 $3 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $4 --dtype $2 --kernel-family $3 2>&1 | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
  echo "round $1 $2 $3 done at $SECONDS s" >> $LOG
done
