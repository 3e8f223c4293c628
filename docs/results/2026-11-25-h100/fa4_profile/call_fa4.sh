#!/bin/bash
# Session 11: FA4's sm90 backward under the same ncu metrics as dualkv's KV kernel, at (28, 16K) bf16,
# through bench/baselines.py's fa4_composition (A1 prompt causal, A2 responses x prompt, B responses causal).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
python3 -c "import flash_attn.cute.interface; print('fa4 import ok')" >> $LOG 2>&1
echo "== plain run at $SECONDS s" >> $LOG
timeout 300 python3 bench/baselines.py --baselines fa4_composition --configs 28x16384 --dtype bf16 \
  --min-repeats 3 --max-repeats 3 > $OUT/fa4_bench.txt 2>&1; echo "rc $? at $SECONDS s" >> $LOG
tail -5 $OUT/fa4_bench.txt >> $LOG
M=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__grid_size,launch__block_size
echo "== ncu metrics at $SECONDS s" >> $LOG
timeout 300 ncu --metrics $M --kernel-name regex:'(?i)bwd|backward' --launch-count 40 \
  python3 bench/baselines.py --baselines fa4_composition --configs 28x16384 --dtype bf16 --min-repeats 1 --max-repeats 1 \
  > $OUT/fa4_ncu.txt 2>&1; echo "rc $? at $SECONDS s" >> $LOG
grep -E "^  [a-zA-Z_].*\(|^\s+(gpu__|sm__|l1tex__|smsp__|lts__|launch__)" $OUT/fa4_ncu.txt | cut -c1-200 >> $LOG
echo "== warp states of the FA4 backward main kernels at $SECONDS s" >> $LOG
timeout 240 ncu --section WarpStateStats --section SchedulerStats --kernel-name regex:'FlashAttentionBackwardSm90' --launch-skip 3 --launch-count 3 \
  python3 bench/baselines.py --baselines fa4_composition --configs 28x16384 --dtype bf16 --min-repeats 1 --max-repeats 1 \
  > $OUT/fa4_stalls.txt 2>&1; echo "rc $? at $SECONDS s" >> $LOG
echo done >> $LOG
