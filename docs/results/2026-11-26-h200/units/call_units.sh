#!/bin/bash
# Session 13, call 3: where the dQ reductions cost (lever 2). ncu sections for the memory units,
# pipes and stalls, and the L2 reduction sectors per slice (max / avg / min over slices), on main and
# on the probe p0 (no dQ reductions, wrong dQ) at (28, 16K) bf16, one backward KV kernel each.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
for v in main p0; do
  ncu --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section SpeedOfLight \
    --metrics lts__t_sectors_op_red.max,lts__t_sectors_op_red.avg,lts__t_sectors_op_red.min,lts__t_sectors.max,lts__t_sectors.avg,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_pipe_lsu.sum,sm__memory_throughput.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__lts2xbar_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__d_sectors_fill_sysmem.sum,lts__average_t_sector_red_hit_rate.pct \
    --kernel-name regex:backward_kv --launch-skip 1 --launch-count 1 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 > $OUT/ncu_$v.txt 2>&1
  echo "$v rc=$? at $SECONDS s" >> $OUT/log.txt
done
