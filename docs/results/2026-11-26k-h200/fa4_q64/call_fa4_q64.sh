#!/bin/bash
# Session 23, one H200 (issue 11): FA4's backward at dualkv's step shape beside dualkv's KV kernel,
# both at (28, 16K) bf16 under ncu at its base clock. FA4 on the responses x prompt rectangle
# with its query tile forced to 64 (rect64.py), so both kernels issue the same five wgmmas per
# 64-query x 128-key step. Per kernel: duration, clock, tensor-pipe activity, shared-memory
# wavefronts and bank conflicts, instructions, L2 hit rate; then per-instruction warp sampling.
# Needs the FA4 wheels (the largest staged by ../../2026-11-26j-h200/d64_same_run/call_stage.sh in
# /tmp/whl-stage on the warm machine) and exp-xz/s23a.tar.xz (exp-bin/main23: main's build).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s23a.tar.xz
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache
D=docs/results/2026-11-26k-h200/fa4_q64
timeout 200 python3 $D/rect64.py --time 2>&1 | grep -v Warning > $OUT/fa4_times.txt
echo "fa4 timed at $SECONDS s" >> $LOG
exp-bin/main23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" > $OUT/dualkv_times.txt
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,lts__t_sector_hit_rate.pct,sm__inst_executed_pipe_uniform.sum,smsp__inst_executed_op_ldsm.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
timeout 150 ncu --metrics $M --kernel-name regex:'FlashAttentionBackwardSm90' --launch-skip 2 --launch-count 1 \
  python3 $D/rect64.py --profile > $OUT/metrics_fa4.txt 2>&1; echo "fa4 metrics rc $? at $SECONDS s" >> $LOG
timeout 150 ncu --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 \
  exp-bin/main23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 3 --warmups 0 \
  > $OUT/metrics_dualkv.txt 2>&1; echo "dualkv metrics rc $? at $SECONDS s" >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 150 ncu $S --kernel-name regex:'FlashAttentionBackwardSm90' --launch-skip 2 --launch-count 1 -o /tmp/fa4q64 \
  python3 $D/rect64.py --profile > /tmp/fa4_sass_run.txt 2>&1; echo "fa4 sampling rc $? at $SECONDS s" >> $LOG
ncu --import /tmp/fa4q64.ncu-rep --page source --print-source sass --csv > $OUT/fa4q64_sass.csv 2> /dev/null
ncu --import /tmp/fa4q64.ncu-rep --page details > $OUT/fa4q64_details.txt 2>&1
gzip -9 $OUT/fa4q64_sass.csv
echo "done at $SECONDS s" >> $LOG
