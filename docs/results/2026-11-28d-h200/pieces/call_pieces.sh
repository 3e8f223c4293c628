#!/bin/bash
# Session 35, one H200 (issue 11): FA4's backward on each piece of its composition alone
# (fa4_pieces.py), beside dualkv's split probes p1 (rectangle + response key tiles) and p2 (causal
# prompt) from docs/results/2026-11-28c-h100/split_probe/, in one call: probes, FA4, probes again.
# Before it, docs/results/2026-11-28b-h100/same_run/call_stage.sh twice (one part of the largest FA4
# wheel each, left in /tmp/whl-stage). Carry: .whl (all wheels but the largest) and
# exp-xz/probe.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cat /tmp/whl-stage/cu13.part* > .whl/big/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl.xz
mkdir -p exp-bin/probe && tar xJf exp-xz/probe.tar.xz -C exp-bin/probe
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
probes() {
  for w in 1 2; do
    echo "== dualkv probe $w, round $1" >> $LOG
    DUALKV_PROBE_WALK=$w exp-bin/probe/dualkv_bench --kernel-family hopper --configs 28x16384,16x65536 --dtype bf16 \
      2>&1 | grep -E "^N[0-9]" | sort -u >> $LOG
  done
}
probes 1
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
echo "== FA4 pieces at $SECONDS s" >> $LOG
timeout 300 python3 docs/results/2026-11-28d-h200/pieces/fa4_pieces.py 28x16384 16x65536 2>&1 | grep -v Warning >> $LOG
probes 2
echo "done at $SECONDS s" >> $LOG
