#!/bin/bash
# Session 21, one H200 (issue 11): the same-run comparison with the cuDNN and FA4 compositions at
# the five design shapes, bf16 then fp16 (dualkv_bench, bench/baselines.py, bench/report_table.py),
# with the backward plan that keeps a response's key tiles together (s21/response-order); then the
# per-CTA trace of that order (../cta_trace/ probe on top) at two shapes.
# Carry: the .whl files but the largest (../fa4_tile/call_stage.sh staged it in /tmp/whl-stage),
# exp-xz/s21f.tar.xz (exp-bin/order/dualkv_bench, exp-bin/ordertrace/dualkv_bench).
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s21f.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  exp-bin/order/dualkv_bench --kernel-family hopper --dtype $dt --json $OUT/dualkv_hopper_$dt.json > $OUT/dualkv_$dt.txt 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json $OUT/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
  python3 bench/report_table.py $OUT/dualkv_hopper_$dt.json $OUT/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
for c in 28x4096 28x16384; do
  DUALKV_CTA_TRACE=$OUT/trace_$c.csv exp-bin/ordertrace/dualkv_bench --configs $c --dtype bf16 --kernel-family hopper \
    2>&1 | grep -E "^N[0-9]" >> $OUT/trace_bench.txt
  gzip $OUT/trace_$c.csv
done
echo "done at $SECONDS s" >> $LOG
