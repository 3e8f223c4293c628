#!/bin/bash
# Session 24, one H200 (issue 11): at which clock do FA4's backward and ours run at the power cap?
# ncu at its base clock gave our KV kernel 2% fewer cycles per step than FA4's at our tile
# (../h2/metrics_s23.txt against ../../2026-11-26k-h200/fa4_q64/), yet at the cap ours takes
# longer per step. Here ncu leaves the clock alone (--clock-control none) and reports each kernel's
# mean SM clock, cycles, instructions and DRAM bytes; nvidia-smi samples clock and power every 20 ms
# while each runs back to back (FA4: only backwards; dualkv_bench: forward then backward, then
# forwards alone). FA4 on the (28, 16K) rectangle at tile 64 and 80 (rect_clock.py), dualkv's
# whole (28, 16K) backward (exp-bin/s23: main's kernels, from exp-xz/s24a.tar.xz).
# Needs the FA4 wheels: the largest staged in /tmp/whl-stage by
# ../../2026-11-26j-h200/d64_same_run/call_stage.sh on the warm machine, the rest carried.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
mkdir -p .whl/big && cp -n /tmp/whl-stage/*.whl.xz .whl/big/
tar xJf exp-xz/s24a.tar.xz
eval "$(bench/install_fa4_wheels.sh)" 2>> $LOG
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4-cache
D=docs/results/2026-11-27-h200/clock
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv >> $LOG
sample() {  # $1: name; the rest: the command, run while nvidia-smi samples
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 20 \
    > $OUT/smi_$name.csv & local smi=$!
  "$@" > $OUT/run_$name.txt 2>&1; echo "$name rc $? at $SECONDS s" >> $LOG
  kill $smi
}
for t in 64 80; do timeout 120 python3 $D/rect_clock.py --tile $t --runs 3 > /dev/null 2>&1; done  # compile both
echo "compiled at $SECONDS s" >> $LOG
sample fa4_64 timeout 120 python3 $D/rect_clock.py --tile 64 --runs 60
sample fa4_80 timeout 120 python3 $D/rect_clock.py --tile 80 --runs 60
sample dualkv timeout 120 exp-bin/s23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 40
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for t in 64 80; do
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'FlashAttentionBackwardSm90' --launch-skip 4 \
    --launch-count 1 python3 $D/rect_clock.py --tile $t --runs 6 > $OUT/ncu_fa4_$t.txt 2>&1
  echo "ncu fa4 $t rc $? at $SECONDS s" >> $LOG
done
timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 --launch-count 1 \
  exp-bin/s23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
  > $OUT/ncu_dualkv.txt 2>&1; echo "ncu dualkv rc $? at $SECONDS s" >> $LOG
