#!/bin/bash
# Session 18, one H200, branch exp/s8u: session 12's s8 (dQ staged in shared memory and reduced by
# a dQ warp with bulk reductions, c4f421b) with the operand descriptors sliced by the warpgroup's
# first thread (session 16's uniform descriptors), since FA4 (sass/) has both and each alone was
# level (s8) or slower (uniform). The GPU suite of its build, then two alternating rounds of
# dualkv_bench: main, s8 (session 17's s8now build) and s8u.
# Carry: exp-xz/s8u.tar.xz (exp-bin/{main18,s8now,s8u}/dualkv_bench, exp-bin/s8u/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s8u.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
exp-bin/s8u/dualkv_cuda_tests --gtest_brief=1 --gtest_filter='-TokenScores*' > $OUT/suite_s8u.log 2>&1
echo "suite rc $? at $SECONDS s" >> $LOG; tail -2 $OUT/suite_s8u.log >> $LOG
for round in 1 2; do
  for variant in main18 s8now s8u; do
    echo "== round $round $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs 28x4096,28x16384,16x65536 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -3 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
