#!/bin/bash
# Session 22, one GPU (issues 11 and 12): the same-run comparison at the 1-GPU step's attention
# shapes (P = 8192, the 32 ragged response lengths the step benchmark draws for seeds 0 and 1):
# main's Hopper kernels (dualkv_bench, ragged P:R1/R2/... items) beside the FA4 composition and
# FlexAttention on the packed stream (baselines.py, same items; the cuDNN composition is listed as
# unsupported: cuDNN's SDPA needs equal lengths), bf16 then fp16. baselines.py first checks every
# baseline against an fp32 reference on an equal-length and a ragged small case.
# Runs on the machine ../d64_same_run/call_d64.sh left warm: the FA4 wheels in /tmp/site, the
# binary in exp-bin/m22 (carry exp-xz/s22b.tar.xz again in case the machine is fresh: then the
# FA4 rows say "not installed").
cd "$(dirname "$0")/../../../.."
[ -x exp-bin/m22/dualkv_bench ] || tar xJf exp-xz/s22b.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $LOG
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache PYTHONUNBUFFERED=1
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
mkdir -p /tmp/ragged
for dt in bf16 fp16; do
  exp-bin/m22/dualkv_bench --kernel-family hopper --configs $STEP0,$STEP1 --dtype $dt \
    --json /tmp/ragged/dualkv_hopper_$dt.json > /tmp/ragged/dualkv_$dt.txt 2>&1
  timeout 200 python3 bench/baselines.py --configs $STEP0,$STEP1 --baselines cudnn_composition,fa4_composition,flex_packed \
    --dtype $dt --json /tmp/ragged/baselines_$dt.json 2>&1 | grep -v Warning > $OUT/baselines_$dt.txt
  python3 bench/report_table.py /tmp/ragged/dualkv_hopper_$dt.json /tmp/ragged/baselines_$dt.json > $OUT/table_$dt.txt 2>&1
  echo "== $dt at $SECONDS s" >> $LOG
done
tar czf $OUT/json.tgz -C /tmp ragged
