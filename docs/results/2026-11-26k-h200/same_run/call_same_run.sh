#!/bin/bash
# Session 23, one H200 (issue 11): the kept change (the step's LSE read before S^T is issued, dO
# waited for between the S^T and dP^T issues), built from this session's main (exp-bin/s23,
# exp-xz/s23e.tar.xz with exp-bin/main23 = cc3eeff). The GPU suite and compute-sanitizer on it; a
# head_dim 64 check against main23 (the change also moves dO's wait there); then the same-run
# comparison with the cuDNN and FA4 compositions at the five design shapes, bf16 then fp16
# (dualkv_bench, bench/baselines.py, bench/report_table.py).
# Carry: the .whl files but the largest (../../2026-11-26j-h200/d64_same_run/call_stage.sh staged
# it in /tmp/whl-stage on the warm machine) and exp-xz/s23e.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s23e.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
T=/tmp/s23/tests; mkdir -p $T
timeout 240 exp-bin/s23/dualkv_cuda_tests --gtest_brief=1 > $T/suite_s23.txt 2>&1
echo "suite s23 rc $? at $SECONDS s: $(tail -1 $T/suite_s23.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s23/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s23 tests
for b in main23 s23; do
  echo "== head_dim 64 bf16 $b" >> $OUT/d64.txt
  exp-bin/$b/dualkv_bench --head-dim 64 --configs 28x4096,28x16384,16x65536 --dtype bf16 --kernel-family hopper \
    2>&1 | grep -E "^N[0-9]" >> $OUT/d64.txt
done
echo "d64 done at $SECONDS s" >> $LOG
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  exp-bin/s23/dualkv_bench --kernel-family hopper --dtype $dt --json $OUT/dualkv_hopper_$dt.json > $OUT/dualkv_$dt.txt 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json $OUT/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
  python3 bench/report_table.py $OUT/dualkv_hopper_$dt.json $OUT/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
# The device returns at most 8 files: the raw outputs go into one archive.
(cd $OUT && tar czf raw.tgz dualkv_*.txt baselines_*.txt *.json && rm -f dualkv_*.txt baselines_*.txt *.json)
