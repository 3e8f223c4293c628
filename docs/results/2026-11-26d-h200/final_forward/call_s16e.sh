#!/bin/bash
# Session 16: the bf16 same-run comparison again, on the machine of call_s16d_same_run.sh right
# after it (its thinnest forward margins were 1%: (28, 32K) alternating, (16, 64K) alone).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
mkdir -p /tmp/sr
exp-bin/final/dualkv_bench --kernel-family hopper --dtype bf16 --json /tmp/sr/dualkv_hopper.json > /dev/null 2>&1
timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype bf16 \
  --json /tmp/sr/baselines.json 2>&1 | grep -v Warning > /tmp/sr/baselines.txt
python3 bench/report_table.py /tmp/sr/dualkv_hopper.json /tmp/sr/baselines.json > $OUT/table_bf16.txt 2>&1
cp /tmp/sr/dualkv_hopper.json $OUT/dualkv_hopper_bf16.json; cp /tmp/sr/baselines.json $OUT/baselines_bf16.json
echo "done at $SECONDS s" >> $LOG
