#!/bin/bash
# Session 22, one GPU (issue 11): the same-run comparison at head_dim 64 after session 21's head_dim
# 64 backward change (dK waited for at each step's end): main's Hopper kernels (dualkv_bench
# --head-dim 64) beside the cuDNN and FA4 compositions (baselines.py --head-dim 64), at the five
# design shapes, bf16 then fp16; bench/report_table.py joins them. Session 21's call_d64.sh, with
# this session's binary. Leaves the FA4 wheels installed in /tmp/site for ../ragged_same_run/.
# Carry: the .whl files but the largest (call_stage.sh staged it in /tmp/whl-stage) and
# exp-xz/s22b.tar.xz (exp-bin/m22/dualkv_bench: main at 19e0e3f).
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s22b.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
mkdir -p /tmp/d64
for dt in bf16 fp16; do
  exp-bin/m22/dualkv_bench --kernel-family hopper --head-dim 64 --dtype $dt --json /tmp/d64/dualkv_hopper_$dt.json \
    > /tmp/d64/dualkv_$dt.txt 2>&1
  timeout 250 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt --head-dim 64 \
    --json /tmp/d64/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
  python3 bench/report_table.py /tmp/d64/dualkv_hopper_$dt.json /tmp/d64/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== $dt at $SECONDS s" >> $LOG
done
tar czf $OUT/json.tgz -C /tmp d64
