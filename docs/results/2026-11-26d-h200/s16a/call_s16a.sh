#!/bin/bash
# Session 16, first A/B call (issues 10 and 11), one H200. Binaries built on the CPU machine:
#   fwd4    main's kernels (f5c4e19)
#   dqfirst backward: the dQ GEMM issued right after the dS barrier, before dV and dK, so the
#           dQ block's reductions drain under both GEMMs (patch: dqfirst.patch)
#   stages3 forward: 3 K/V stages at head_dim 128 instead of 2 (tile_shape.h)
# GPU suite on both variants, then exp/run_bins.sh (two alternating rounds of
# dualkv_bench --kernel-family hopper --dtype bf16) and ncu of the backward for fwd4 and dqfirst.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
for v in dqfirst stages3; do
  timeout 150 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; rc=$?
  echo "suite $v rc=$rc at $SECONDS s" >> $LOG
  grep -E "tests ran|PASSED|FAILED" $OUT/suite_$v.txt | tail -4 >> $LOG
done
timeout 300 bash exp/run_bins.sh "fwd4 dqfirst stages3" 28x4096,28x16384,16x65536 "fwd4 dqfirst"
