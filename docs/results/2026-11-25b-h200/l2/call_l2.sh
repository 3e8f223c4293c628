#!/bin/bash
# Session 12, call 5: is the L2 the limit of the dQ reductions? ncu SpeedOfLight + MemoryWorkloadAnalysis
# and L2 reduction throughput of main, p0 (no dQ reductions: wrong dQ), s8 (all dQ through the dQ
# warp's bulk reductions) and w2 (lock-step walk + KV-head-major order) at (28, 16K), bf16.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
for v in main p0 s8 w2; do
  timeout 120 ncu --kernel-name regex:backward_kv --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics lts__t_sectors_op_red.sum.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red.sum.per_second,lts__t_requests_op_red.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red_lookup_miss.sum,lts__t_sectors_op_red_lookup_hit.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum,l1tex__m_l1tex2xbar_write_bytes.sum \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 > $OUT/ncu_$v.txt 2>&1
  echo "$v done at $SECONDS s" >> $OUT/log.txt
done
