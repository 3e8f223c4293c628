#!/bin/bash
# Session 24, one H200 (issue 11), on the machine call_layer_loop.sh left warm (the extension
# installed there): FA4's backward on the (28, 16K) rectangle at query tile 64 and 80
# (rect_loop.py) and dualkv's whole (28, 16K) backward (backward_loop.py), each back to back while
# nvidia-smi samples clock and power (clock_summary.py); dualkv first and last.
# Needs the FA4 wheels: the largest staged in /tmp/whl-stage by
# ../../2026-11-26j-h200/d64_same_run/call_stage.sh, the rest carried.
cd "$(dirname "$0")/../../../.."
D=docs/results/2026-11-27-h200/clock2
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache
for t in 64 80; do timeout 120 python3 $D/rect_loop.py --tile $t --runs 3 > /dev/null 2>&1; done  # compile both
echo "compiled at $SECONDS s" >> $LOG
sample() {  # $1: name; the rest: the command, run while nvidia-smi samples
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi_$name.csv &
  local smi=$!
  "$@" > /tmp/run_$name.txt 2>&1; echo "$name rc $? at $SECONDS s" >> $LOG
  kill $smi
  grep -v window /tmp/run_$name.txt | grep -v Warning >> $OUT/clock.txt
  python3 $D/clock_summary.py $name /tmp/smi_$name.csv /tmp/run_$name.txt >> $OUT/clock.txt 2>&1
}
sample dualkv_first timeout 120 python3 $D/backward_loop.py --runs 60
sample fa4_tile64 timeout 120 python3 $D/rect_loop.py --tile 64 --runs 60
sample fa4_tile80 timeout 120 python3 $D/rect_loop.py --tile 80 --runs 60
sample dualkv_last timeout 120 python3 $D/backward_loop.py --runs 60
