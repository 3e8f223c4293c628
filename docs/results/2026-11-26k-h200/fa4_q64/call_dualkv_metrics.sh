#!/bin/bash
# Session 23, one H200 (issue 11): the dualkv half of call_fa4_q64.sh (its dualkv ncu run had asked
# --repeats 3, below the benchmark's minimum of 10): the same metrics and per-instruction sampling
# of main's KV kernel at (28, 16K) bf16 (exp-xz/s23a.tar.xz: exp-bin/main23).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s23a.tar.xz
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,lts__t_sector_hit_rate.pct,sm__inst_executed_pipe_uniform.sum,smsp__inst_executed_op_ldsm.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
B="exp-bin/main23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0"
timeout 150 ncu --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 $B \
  > $OUT/metrics_dualkv.txt 2>&1; echo "dualkv metrics rc $? at $SECONDS s" >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 150 ncu $S --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 -o /tmp/dualkv $B \
  > /tmp/dualkv_sass_run.txt 2>&1; echo "dualkv sampling rc $? at $SECONDS s" >> $LOG
ncu --import /tmp/dualkv.ncu-rep --page source --print-source sass --csv > $OUT/dualkv_sass.csv 2> /dev/null
ncu --import /tmp/dualkv.ncu-rep --page details > $OUT/dualkv_details.txt 2>&1
gzip -9 $OUT/dualkv_sass.csv
echo "done at $SECONDS s" >> $LOG
