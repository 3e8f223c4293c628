#!/bin/bash
# usage: exp/run_ab.sh "variants" "configs" ncu(0/1)
VARIANTS=${1:-"base h1"}
CONFIGS=${2:-all}
NCU=${3:-0}
TESTV=${4:-none}
ROOT=$PWD
LOG=$OUT/log.txt
GT=$ROOT/.device-build/gtest/lib/x86_64-linux-gnu/cmake/GTest
n=$(echo $VARIANTS | wc -w); j=$((16 / n))
for v in $VARIANTS; do
  ( cd exp/$v && T=OFF; TGT=dualkv_bench; if [ "$v" = "$TESTV" ]; then T=ON; TGT="dualkv_bench dualkv_cuda_tests"; fi; cmake -S . -B build -G Ninja -DDUALKV_BUILD_TESTS=$T -DGTest_DIR=$GT -DDUALKV_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DDUALKV_CUTLASS_INCLUDE_DIR=$ROOT/.cutlass -DCMAKE_BUILD_TYPE=Release > /dev/null && ninja -C build -j$j $TGT > build.log 2>&1; echo "$v build rc $?" >> $LOG; tail -3 build.log >> $LOG ) &
done
wait
if [ "$TESTV" != none ]; then exp/$TESTV/build/tests/cuda/dualkv_cuda_tests > $OUT/tests_$TESTV.txt 2>&1; echo "tests $TESTV rc $?" >> $LOG; tail -3 $OUT/tests_$TESTV.txt >> $LOG; fi
for round in 1 2; do
  for v in $VARIANTS; do
    echo "== $v round $round" >> $LOG
    exp/$v/build/bench/dualkv_bench --kernel-family hopper --configs $CONFIGS --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -8 >> $LOG
  done
done
if [ "$NCU" = 1 ]; then
  for v in $VARIANTS; do
    echo "== ncu $v" >> $LOG
    ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_read_lookup_miss.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_red_lookup_miss.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed \
      --kernel-name regex:backward_kv_kernel --launch-skip 1 --launch-count 1 \
      exp/$v/build/bench/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 2>&1 | grep -E "^\s+(gpu__|dram__|lts__|sm__)" >> $LOG
  done
fi
echo done >> $LOG
