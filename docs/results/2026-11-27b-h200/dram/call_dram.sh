#!/bin/bash
# Session 25, one H200 (issue 11): does DRAM traffic cost clock at the power cap? probe_loads.patch:
# warps 2 and 3 of the producer warpgroup, otherwise idle, load 8 KiB per CTA step (about FA4's
# and our per-step DRAM difference, 10.1 against 1.9 KB) off the consumers' critical path, paced
# by a 1 us sleep, from a window of the scratch buffer set by DUALKV_PROBE_SPAN_LOG2 (16-byte
# words): 2^28 (4 GiB: every load misses L2, "dram") or 2^14 (256 KiB: every load hits L2, "l2").
# The two differ only in where the loads are served. Against main's build (exp-bin/s23): ncu with
# the clock left alone (cycles, DRAM bytes, L2 hit rate, tensor pipe), then three alternating
# rounds of dualkv_bench at (16, 64K) bf16 with 20 repeats while nvidia-smi samples clock and power.
# Binaries: exp-xz/s25a.tar.xz (exp-bin/s23: main, exp-bin/probe: main + probe_loads.patch).
cd "$(dirname "$0")/../../../.."
D=docs/results/2026-11-27b-h200/dram
LOG=$OUT/log.txt
tar xJf exp-xz/s25a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,clocks.max.mem --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
run_variant() {  # $1: name; runs $2... with the probe window of the name
  local name=$1; shift
  case $name in dram) export DUALKV_PROBE_SPAN_LOG2=28 ;; l2) export DUALKV_PROBE_SPAN_LOG2=14 ;; esac
  local bin=exp-bin/probe; [ $name = main ] && bin=exp-bin/s23
  "$@" $bin/dualkv_bench
  unset DUALKV_PROBE_SPAN_LOG2
}
ncu_one() {
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
    --launch-count 1 "$1" --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0
}
for v in main dram l2; do
  echo "== $v" >> $OUT/ncu.txt
  run_variant $v ncu_one 2>&1 | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|hit_rate" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
bench_one() {
  "$1" --configs 16x65536 --dtype bf16 --kernel-family hopper --repeats 20 2>&1 | grep -E "^N[0-9]"
}
for round in 1 2 3; do
  for v in main dram l2; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    row=$(run_variant $v bench_one)
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    echo "== round $round $v: $row" >> $OUT/ab.txt
    python3 $D/../../2026-11-27-h200/clock2/clock_summary.py "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
