#!/bin/bash
# Session 15, after call_fwd4.sh on the same warm machine (exp-xz holds only the fwd4 benchmark: the FA4 wheels fill the carry): the
# same-run comparison of the fwd4 Hopper kernels with the cuDNN and FA4 compositions at the five
# design shapes, bf16 then fp16 (dualkv_bench, then bench/baselines.py, then report_table.py).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  mkdir -p $OUT/same_run_$dt
  exp-bin/fwd4/dualkv_bench --kernel-family hopper --dtype $dt --json $OUT/same_run_$dt/dualkv_hopper.json > /dev/null 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json $OUT/same_run_$dt/baselines.json 2>&1 | grep -v Warning > $OUT/same_run_$dt/baselines.txt
  python3 bench/report_table.py $OUT/same_run_$dt/dualkv_hopper.json $OUT/same_run_$dt/baselines.json > $OUT/same_run_$dt/table.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
echo "done at $SECONDS s" >> $LOG
