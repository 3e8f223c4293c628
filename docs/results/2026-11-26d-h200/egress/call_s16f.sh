#!/bin/bash
# Session 16 (issue 11): where the backward's dQ reductions cost. ncu of the Hopper backward KV
# kernel at (28, 16K) bf16 for main (a87e57c) and p0b (session 13's probe: main's backward without
# the dQ reductions, dQ GEMM kept; wrong dQ), with the warp-state and memory-workload sections
# plus the SM-to-L2 egress and L2 reduction counters.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
for v in final p0b; do
  timeout 200 ncu --section WarpStateStats --section MemoryWorkloadAnalysis --section SpeedOfLight \
    --metrics l1tex__m_l1tex2xbar_throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum \
    --kernel-name regex:backward_kv --launch-skip 1 --launch-count 1 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 > $OUT/ncu_$v.txt 2>&1
  echo "ncu $v rc=$? at $SECONDS s" >> $LOG
done
