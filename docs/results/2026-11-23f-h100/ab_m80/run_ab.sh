#!/bin/bash
# usage: exp/run_ab.sh "variants" "configs" testvariant
# Builds each exp/<variant> into /tmp/ab/<variant> (outside the repo: kept while the machine is warm),
# runs the GPU suite of one variant, then two alternating bench rounds.
VARIANTS=${1:-"base v80"}
CONFIGS=${2:-28x4096,28x16384,16x65536}
TESTV=${3:-none}
ROOT=$PWD
LOG=$OUT/log.txt
GT=$ROOT/.device-build/gtest/lib/x86_64-linux-gnu/cmake/GTest
n=$(echo $VARIANTS | wc -w); j=$((16 / n))
for v in $VARIANTS; do
  ( B=/tmp/ab/$v; T=OFF; TGT=dualkv_bench; if [ "$v" = "$TESTV" ]; then T=ON; TGT="dualkv_bench dualkv_cuda_tests"; fi
    [ -x $B/bench/dualkv_bench ] && [ "$T" = OFF -o -x $B/tests/cuda/dualkv_cuda_tests ] && { echo "$v already built" >> $LOG; exit 0; }
    cmake -S exp/$v -B $B -G Ninja -DDUALKV_BUILD_TESTS=$T -DGTest_DIR=$GT -DDUALKV_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DDUALKV_CUTLASS_INCLUDE_DIR=$ROOT/.cutlass -DCMAKE_BUILD_TYPE=Release > /dev/null && ninja -C $B -j$j $TGT > $OUT/build_$v.log 2>&1; echo "$v build rc $? at $SECONDS s" >> $LOG; tail -2 $OUT/build_$v.log >> $LOG ) &
done
wait
if [ "$TESTV" != none ]; then timeout 240 /tmp/ab/$TESTV/tests/cuda/dualkv_cuda_tests > $OUT/tests_$TESTV.txt 2>&1; echo "tests $TESTV rc $? at $SECONDS s" >> $LOG; grep -E "FAILED|PASSED" $OUT/tests_$TESTV.txt | head -20 >> $LOG; fi
for round in 1 2; do
  for v in $VARIANTS; do
    echo "== $v round $round at $SECONDS s" >> $LOG
    /tmp/ab/$v/bench/dualkv_bench --kernel-family hopper --configs $CONFIGS --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -8 >> $LOG
  done
done
echo done >> $LOG
