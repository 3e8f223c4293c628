#!/bin/bash
# Session 26, one H200 (issue 11 item 2): dss (dss.patch) stores dS^T with stmatrix from one
# 32-bit shared address per thread (ds_store.cuh: a fixed XOR per store, checked against the
# layout at compile time) instead of CuTe's tiled copy, whose 64-bit swizzle arithmetic ptxas
# hoisted into registers. head_dim 64 atomic kernel: spills 44 B stored / 48 B loaded -> 8 / 16;
# head_dim 128: 8 / 16 -> 4 / 8 (outside the loop), step loop 1,424 -> 1,380 SASS instructions.
# GPU suite, memcheck, racecheck and synccheck on the Hopper backward sanitizer tests, then main
# (s23) and dss under ncu at (28, 16K) with the clock left alone (cycles, instructions, local
# loads and stores), then in alternating rounds with nvidia-smi sampling: three bf16 and one fp16 round at
# head_dim 128 (three design shapes and the step's ragged shape), two bf16 rounds at head_dim 64.
# Binaries: exp-xz/s26a.tar.xz (exp-bin/s23 = main, exp-bin/dss).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s26a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/dss/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite.txt 2>&1
echo "suite dss rc $? at $SECONDS s: $(tail -1 /tmp/suite.txt)" >> $LOG
grep -E "FAILED|Failure" /tmp/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/dss/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "dss $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
L=l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_local_op_st.sum
for v in s23 dss; do
  for head in 128 64; do
    for metrics in $M $L; do
      echo "== $v head_dim $head" >> $OUT/ncu.txt
      timeout 120 ncu --clock-control none --metrics $metrics --kernel-name regex:'backward_kv_kernel' \
        --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --head-dim $head --configs 28x16384 --dtype bf16 \
        --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
        | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|local|ERR" >> $OUT/ncu.txt
    done
  done
done
echo "ncu done at $SECONDS s" >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
for round in 1 2 3 fp16 d64a d64b; do
  dtype=bf16; configs=28x4096,28x16384,16x65536,$STEP0; head=128
  [ $round = fp16 ] && dtype=fp16
  case $round in d64*) head=64; configs=28x4096,28x16384,16x65536;; esac
  for v in s23 dss; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --head-dim $head --configs $configs --dtype $dtype --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
