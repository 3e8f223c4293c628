#!/bin/bash
# Session 31, one GPU: the forward kernels of s30main (main), s31d (tiles on runs with the
# sanitized V stages; the mask kept as main's block kinds plus kShared; the portable kernel's code
# as main's) and s31e (s31d without the sanitize and poison code: not NaN-safe, measurement only)
# under ncu at its locked base clock (three launches each), so the code's cost reads without the
# power cap's clock; then s30main / s31d alternating rounds at the free clock.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for spec in "hopper 128 28x16384" "hopper 128 $STEP0" "hopper 128 28x4096" "hopper 64 28x4096" "hopper 64 $STEP0" "portable 128 28x4096"; do
  set -- $spec
  for v in s30main s31d s31e; do
    printf "%s %s d%s %s:" $v $1 $2 ${3:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $3 --head-dim $2 --dtype bf16 --kernel-family $1 --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2; do
  for v in s30main s31d; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --configs $STEP0,28x4096,28x16384,16x65536 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
