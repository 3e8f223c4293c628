#!/bin/bash
# Session 21, one H200 (issue 11): FA4's sm90 backward on the responses x prompt rectangle
# (non-causal) and on the causal prompt, with its own query tile (80 non-causal, 64 causal) and
# with the tile forced (fa4_tile_probe.py); dualkv's backward on main at the same design shapes.
# Carry: the .whl files but the largest (call_stage.sh staged it in /tmp/whl-stage),
# exp-xz/s20f.tar.xz (exp-bin/s19/dualkv_bench = main's kernels).
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s20f.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
timeout 400 python3 docs/results/2026-11-26i-h200/fa4_tile/fa4_tile_probe.py 2>&1 | grep -v Warning > $OUT/fa4_tile.txt
exp-bin/s19/dualkv_bench --kernel-family hopper --configs 28x4096,28x16384 > $OUT/dualkv.txt 2>&1
echo "done at $SECONDS s" >> $OUT/fa4_tile.txt
