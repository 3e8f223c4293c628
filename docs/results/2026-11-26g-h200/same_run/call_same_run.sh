#!/bin/bash
# Session 19, one H200 (issue 11): the same-run comparison with the cuDNN and FA4 compositions at
# the five design shapes, bf16 then fp16 (dualkv_bench, bench/baselines.py, bench/report_table.py),
# with the staged-dQ backward (branch s19/staged-dq, 5d019d2). As session 16's call_s16d_same_run.sh.
# Carry: .whl (FA4 wheels), exp-xz/s19bench.tar.xz (exp-bin/s19/dualkv_bench).
cd "$(dirname "$0")/../.."
tar xJf exp-xz/s19bench.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  mkdir -p $OUT/same_run_$dt
  exp-bin/s19/dualkv_bench --kernel-family hopper --dtype $dt --json $OUT/same_run_$dt/dualkv_hopper.json > /dev/null 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json $OUT/same_run_$dt/baselines.json 2>&1 | grep -v Warning > $OUT/same_run_$dt/baselines.txt
  python3 bench/report_table.py $OUT/same_run_$dt/dualkv_hopper.json $OUT/same_run_$dt/baselines.json > $OUT/same_run_$dt/table.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
echo "done at $SECONDS s" >> $LOG
