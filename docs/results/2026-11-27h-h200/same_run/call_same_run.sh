#!/bin/bash
# Session 29, one H200 (issue 11): s29b = this session's kernels (the dQ tail slots; the test
# binary with the workspace test's larger scratch). The GPU suite; ncu of the KV kernel of s28h
# (main at 3931945) and s29b at (28, 16K); then the same-run comparison with the cuDNN and FA4
# compositions at the five design shapes, bf16 then fp16 (dualkv_bench, bench/baselines.py,
# bench/report_table.py), as session 23's docs/results/2026-11-26k-h200/same_run/.
# Carry: the .whl files but the largest (call_stage.sh left it in /tmp/whl-stage) and
# exp-xz/s29b.tar.xz.
cd "$(dirname "$0")/../../../.."
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s29b.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
timeout 240 exp-bin/s29b/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite.txt 2>&1
echo "suite s29b rc $? at $SECONDS s: $(tail -1 /tmp/suite.txt)" >> $LOG
grep -E "FAILED|Failure" /tmp/suite.txt | head -20 >> $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for v in s28h s29b; do
  echo "== $v (28, 16K)" >> $OUT/ncu.txt
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:backward_kv_kernel \
    --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs 28x16384 --dtype bf16 \
    --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
    | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
eval "$(bench/install_fa4_wheels.sh)"
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
for dt in bf16 fp16; do
  exp-bin/s29b/dualkv_bench --kernel-family hopper --dtype $dt --json /tmp/dualkv_hopper_$dt.json > /tmp/dualkv_$dt.txt 2>&1
  timeout 200 python3 bench/baselines.py --baselines cudnn_composition,fa4_composition --dtype $dt \
    --json /tmp/baselines_$dt.json 2>&1 | grep -v Warning > /tmp/baselines_$dt.txt
  python3 bench/report_table.py /tmp/dualkv_hopper_$dt.json /tmp/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== same run $dt at $SECONDS s" >> $LOG
done
(cd /tmp && tar czf $OUT/raw.tgz suite.txt dualkv_*.txt baselines_*.txt *.json)
