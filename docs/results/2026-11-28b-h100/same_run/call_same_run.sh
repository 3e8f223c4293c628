#!/bin/bash
# Session 35, one H100 (the call asked for an H200 and got an H100; issue 11): main at its head (the head_dim 128 kernels are session 29's,
# SASS byte-identical), binaries built on the CPU machine (exp-xz/s35.tar.xz: dualkv_cuda_tests
# and dualkv_bench of build/cuda-sm90). The GPU suite, then the same-run comparison with the cuDNN
# and FA4 compositions at the five design shapes, bf16 then fp16 (dualkv_bench, bench/baselines.py,
# bench/report_table.py), as session 29's docs/results/2026-11-27h-h200/same_run/.
# Carry: .whl (all wheels but the largest, whose parts call_stage.sh left in /tmp/whl-stage) and
# exp-xz/s35.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cat /tmp/whl-stage/cu13.part* > .whl/big/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl.xz
mkdir -p exp-bin/s35 && tar xJf exp-xz/s35.tar.xz -C exp-bin/s35
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
timeout 240 exp-bin/s35/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite.txt 2>&1
echo "suite rc $? at $SECONDS s: $(tail -1 /tmp/suite.txt)" >> $LOG
grep -E "FAILED|Failure" /tmp/suite.txt | head -20 >> $LOG
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  exp-bin/s35/dualkv_bench --kernel-family hopper --dtype $dt --json /tmp/dualkv_hopper_$dt.json > /tmp/dualkv_$dt.txt 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json /tmp/baselines_$dt.json 2>&1 | grep -v Warning > /tmp/baselines_$dt.txt
  python3 bench/report_table.py /tmp/dualkv_hopper_$dt.json /tmp/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
(cd /tmp && tar czf $OUT/raw.tgz suite.txt dualkv_*.txt baselines_*.txt *.json)
