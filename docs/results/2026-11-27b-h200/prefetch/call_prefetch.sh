#!/bin/bash
# Session 25, one H200 (issue 11): what DRAM traffic costs at the power cap, without disturbing the
# consumers (../dram/ did: its loads cost 39-54% cycles). probe_prefetch.patch: one thread of the
# producer warpgroup's warp 2 issues one cp.async.bulk.prefetch.L2 (evict-first) per CTA step, paced
# by a 2 us sleep, from a 4 GiB scratch buffer: DRAM reads of 8 KiB ("pf8") or 16 KiB ("pf16") per
# step, or 8 KiB from a 256 KiB window that stays in L2 ("pfl2", the control: same instructions, no
# DRAM). Also w2 (../../2026-11-26i-h200/prepared_w2/w2_on_main.patch: prompt tiles walk the
# response rectangle first, KV-head-major CTAs; DRAM bytes halved in session 12). Against main's
# build (exp-bin/s23): ncu with the clock left alone at (28, 16K), three rounds at (16, 64K) bf16 (20
# repeats) with nvidia-smi sampling clock and power, then main and w2 at three shapes, two rounds.
# Binaries: exp-xz/s25b.tar.xz (exp-bin/s23, exp-bin/pf, exp-bin/w2).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s25b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
with_variant() {  # $1: variant; the rest: a command given the variant's dualkv_bench
  local name=$1; shift
  local bin=exp-bin/pf/dualkv_bench span=28 bytes=8192
  case $name in main) bin=exp-bin/s23/dualkv_bench ;; w2) bin=exp-bin/w2/dualkv_bench ;;
    pf16) bytes=16384 ;; pfl2) span=14 ;; esac
  DUALKV_PROBE_SPAN_LOG2=$span DUALKV_PROBE_BYTES=$bytes "$@" $bin
}
ncu_one() {
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
    --launch-count 1 "$1" --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0
}
for v in main pf8 pfl2 w2; do
  echo "== $v" >> $OUT/ncu.txt
  with_variant $v ncu_one 2>&1 | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|hit_rate" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
bench_one() { "$1" --configs 16x65536 --dtype bf16 --kernel-family hopper --repeats 20 2>&1 | grep -E "^N[0-9]"; }
for round in 1 2 3; do
  for v in main pf8 pf16 pfl2 w2; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    row=$(with_variant $v bench_one)
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    echo "== round $round $v: $row" >> $OUT/ab.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
for round in 1 2; do
  for v in main w2; do
    echo "== round $round $v" >> $OUT/w2.txt
    exp-bin/$([ $v = main ] && echo s23 || echo w2)/dualkv_bench --configs 28x4096,28x16384,16x65536 --dtype bf16 \
      --kernel-family hopper 2>&1 | grep -E "^N[0-9]" >> $OUT/w2.txt
  done
  echo "w2 round $round done at $SECONDS s" >> $LOG
done
