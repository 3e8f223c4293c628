#!/bin/bash
# Session 21, one GPU (issue 11, head_dim 64). main's head_dim 64 atomic backward (128-query steps)
# has its wgmma serialised by ptxas (C7512): the next step's S^T and dP^T (64 + 64 accumulators)
# do not fit beside dK's register operand. d64drain waits for dK at the end of each step at
# head_dim 64 only (no C7512; 44 B of spills; head_dim 128's SASS is unchanged).
# GPU suite of d64drain, then alternating rounds at head_dim 64 against main (m21), and one
# head_dim 128 round as a control.
# Carry: exp-xz/s21g.tar.xz (exp-bin/{m21,d64drain}/dualkv_bench, exp-bin/d64drain/dualkv_cuda_tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s21g.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 exp-bin/d64drain/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_d64drain.txt 2>&1; echo "suite rc $? at $SECONDS s" >> $LOG
tail -1 $OUT/suite_d64drain.txt >> $LOG
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16 64" "1 fp16 64" "2 bf16 64" "1 bf16 128"; do
  set -- $pass
  for variant in m21 d64drain; do
    echo "== round $1 $2 d$3 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --head-dim $3 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
  echo "round $1 $2 d$3 done at $SECONDS s" >> $LOG
done
