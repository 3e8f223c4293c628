#!/bin/bash
# Session 17 (issue 11): SM clock and power, sampled every 20 ms, while each implementation runs
# forward and backward alternating at (16, 64K) bf16 on one H200: dualkv's Hopper kernels (main),
# then the FA4 composition, then the cuDNN composition. At the 700 W cap the clock each one holds
# says how much energy it spends per unit of work.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
# Compile FA4's kernels first, unsampled.
timeout 200 python3 bench/baselines.py --baselines fa4_composition,cudnn_composition --configs 16x65536 --dtype bf16 \
  --max-repeats 3 --budget-s 1 > $OUT/compile.txt 2>&1
Q=timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_event_reasons.sw_power_cap
nvidia-smi --query-gpu=$Q --format=csv,noheader -lms 20 > $OUT/smi.csv 2>&1 &
SMI=$!
mark() { echo "$1 $(date +%Y/%m/%d\ %H:%M:%S.%N | cut -c1-23)" >> $OUT/marks.txt; }
mark dualkv_start
exp-bin/final/dualkv_bench --kernel-family hopper --configs 16x65536 --dtype bf16 --repeats 30 > $OUT/dualkv.txt 2>&1
mark dualkv_end
sleep 2
for b in fa4_composition cudnn_composition; do
  mark ${b}_start
  timeout 200 python3 bench/baselines.py --baselines $b --configs 16x65536 --dtype bf16 --min-repeats 30 \
    --max-repeats 30 --budget-s 60 > $OUT/$b.txt 2>&1
  mark ${b}_end
  sleep 2
done
kill $SMI
python3 exp/clock_phases.py $OUT/smi.csv $OUT/marks.txt >> $LOG
grep -E "N16_P65536|bfloat16" $OUT/dualkv.txt $OUT/fa4_composition.txt $OUT/cudnn_composition.txt >> $LOG
