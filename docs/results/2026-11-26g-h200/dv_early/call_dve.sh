#!/bin/bash
# Session 19, one H200 (issue 11): (1) ncu of the Hopper backward KV kernel at (28, 16K) bf16 for
# main (main18 build) and the staged-dQ build (s19), as session 16's call_s16f.sh; (2) a probe on
# top of s19, dve (dv-early: dV = P^T dO issued before waiting for dP^T, session 15's probe,
# exp/s19/dve.patch): its GPU suite, ncu likewise, and two alternating rounds of dualkv_bench
# against s19 at three shapes, bf16.
# Carry: exp-xz/dve.tar.xz (exp-bin/{main18,s19,dve}/dualkv_bench, exp-bin/dve/dualkv_cuda_tests).
cd "$(dirname "$0")/../.."
LOG=$OUT/log.txt
tar xJf exp-xz/dve.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/dve/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_dve.txt 2>&1; echo "suite dve rc $? at $SECONDS s" >> $LOG
tail -2 $OUT/suite_dve.txt >> $LOG
for v in main18 s19 dve; do
  timeout 200 ncu --section WarpStateStats --section MemoryWorkloadAnalysis --section SpeedOfLight \
    --metrics l1tex__m_l1tex2xbar_throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum \
    --kernel-name regex:backward_kv --launch-skip 1 --launch-count 1 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 > $OUT/ncu_$v.txt 2>&1
  echo "ncu $v rc=$? at $SECONDS s" >> $LOG
done
for round in 1 2; do
  for v in s19 dve; do
    echo "== round $round $v" >> $OUT/bench.txt
    exp-bin/$v/dualkv_bench --configs 28x4096,28x16384,16x65536 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -3 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
