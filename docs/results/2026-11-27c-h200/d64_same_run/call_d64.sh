#!/bin/bash
# Session 26, one H200 (issue 11): the same-run comparison at head_dim 64 after this session's dS^T
# store (head_dim 64 backward 6-7% faster than main in ../dss/): the Hopper kernels of 4ad9161
# (exp-bin/dss/dualkv_bench, dualkv_bench --head-dim 64) beside the cuDNN and FA4 compositions
# (baselines.py --head-dim 64) at the five design shapes, bf16; bench/report_table.py joins them.
# Carry: the .whl files but the largest (call_stage.sh staged it) and exp-xz/s26a.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s26a.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
mkdir -p /tmp/d64
dt=bf16
exp-bin/dss/dualkv_bench --kernel-family hopper --head-dim 64 --dtype $dt --json /tmp/d64/dualkv_hopper_$dt.json \
  > /tmp/d64/dualkv_$dt.txt 2>&1
timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt --head-dim 64 \
  --json /tmp/d64/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
python3 bench/report_table.py /tmp/d64/dualkv_hopper_$dt.json /tmp/d64/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
echo "== $dt at $SECONDS s" >> $LOG
tar czf $OUT/json.tgz -C /tmp d64
