#!/bin/bash
# usage: exp/run_full.sh "configs" — builds the working tree (tests + bench) and exp/base (bench), runs the
# GPU suite, the sanitizers on the Hopper backward, and base/new benches alternated.
CONFIGS=${1:-all}
ROOT=$PWD
LOG=$OUT/log.txt
GT=$ROOT/.device-build/gtest/lib/x86_64-linux-gnu/cmake/GTest
( cmake -S . -B build/d -G Ninja -DDUALKV_BUILD_TESTS=ON -DDUALKV_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDUALKV_CUTLASS_INCLUDE_DIR=$ROOT/.cutlass -DGTest_DIR=$GT -DCMAKE_BUILD_TYPE=Release > /dev/null && \
  ninja -C build/d -j12 dualkv_cuda_tests dualkv_bench > $OUT/build_new.log 2>&1; echo "new build rc $?" >> $LOG ) &
( cd exp/base && cmake -S . -B build -G Ninja -DDUALKV_BUILD_TESTS=OFF -DDUALKV_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDUALKV_CUTLASS_INCLUDE_DIR=$ROOT/.cutlass -DCMAKE_BUILD_TYPE=Release > /dev/null && \
  ninja -C build -j4 dualkv_bench > build.log 2>&1; echo "base build rc $?" >> $LOG ) &
wait
grep -E "error|warning" $OUT/build_new.log | head -20 >> $LOG
build/d/tests/cuda/dualkv_cuda_tests > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $LOG; tail -3 $OUT/tests.txt >> $LOG
grep -E "FAILED" $OUT/tests.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool $tool build/d/tests/cuda/dualkv_cuda_tests --gtest_filter='CudaSanitizer.BackwardHopper*' > $OUT/san_$tool.txt 2>&1
  echo "sanitizer $tool rc $?" >> $LOG; grep -E "SUMMARY|PASSED|FAILED" $OUT/san_$tool.txt >> $LOG
done
for round in 1 2; do
  for v in base new; do
    B=build/d/bench/dualkv_bench; [ $v = base ] && B=exp/base/build/bench/dualkv_bench
    echo "== $v round $round" >> $LOG
    $B --kernel-family hopper --configs $CONFIGS --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -8 >> $LOG
  done
done
echo done >> $LOG
