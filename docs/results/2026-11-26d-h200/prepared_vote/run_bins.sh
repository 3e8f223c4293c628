#!/bin/bash
# usage: exp/run_bins.sh "variants" "configs" [ncu variants]
# Runs prebuilt exp-bin/<variant>/dualkv_bench (Hopper family, bf16) in two alternating rounds,
# then times every kernel of one backward at (28, 16K) under ncu for the listed variants.
VARIANTS=${1:-"base v80"}
CONFIGS=${2:-28x4096,28x16384,16x65536}
NCUV=${3:-}
LOG=$OUT/log.txt
for round in 1 2; do
  for v in $VARIANTS; do
    echo "== $v round $round at $SECONDS s" >> $LOG
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs $CONFIGS --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -7 >> $LOG
  done
done
for v in $NCUV; do
  echo "== ncu $v" >> $LOG
  ncu --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,lts__t_sectors_op_red.sum --kernel-name regex:backward --launch-skip 3 --launch-count 3 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 2>&1 | grep -E "^  [a-z_]+.*\(|^\s+(gpu__|sm__|l1tex__|smsp__|lts__)" >> $LOG
done
echo done >> $LOG
