#!/bin/bash
# Session 11, F176: the Hopper forward with 128 x 176 tiles built with CuTe's extended wgmma shapes
# (one HGMMA.64x176x16 per k step; session 5's 176-key try ran eleven 64x16 wgmmas per k step):
# forward GPU tests, then main's binary (cur) and f176 alternated, bf16.
cd "$(dirname "$0")/.."
timeout 40 exp-bin/f176/dualkv_cuda_tests --gtest_brief=1 --gtest_filter='*CudaForward*hopper*' > /tmp/t.txt 2>&1; echo "tests rc=$? at $SECONDS s"; tail -3 /tmp/t.txt
for round in 1 2; do for v in cur f176; do
  echo "== $v round $round at $SECONDS s"
  exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x4096,28x16384,16x65536 --dtype bf16 --repeats 10 --warmups 2 2>&1 | sed -n "/^config/,/^$/p" | head -4
done; done
