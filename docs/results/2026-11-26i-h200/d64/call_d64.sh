#!/bin/bash
# Session 21, one H200 (issue 11): the same-run comparison at head_dim 64 (first run at 64): main's
# Hopper kernels (dualkv_bench --head-dim 64) beside the cuDNN and FA4 compositions (baselines.py
# --head-dim 64), at the five design shapes, bf16 then fp16; bench/report_table.py joins them.
# Carry: the .whl files but the largest (../fa4_tile/call_stage.sh staged it in /tmp/whl-stage),
# exp-xz/s21d.tar.xz (exp-bin/hd/dualkv_bench: main's kernels, the bench with --head-dim).
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s21d.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in ${DTYPES:-bf16 fp16}; do
  exp-bin/hd/dualkv_bench --kernel-family hopper --head-dim 64 --dtype $dt --json $OUT/dualkv_hopper_$dt.json > $OUT/dualkv_$dt.txt 2>&1
  timeout 250 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt --head-dim 64 \
    --json $OUT/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
  python3 bench/report_table.py $OUT/dualkv_hopper_$dt.json $OUT/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== $dt at $SECONDS s" >> $LOG
done
