#!/bin/bash
# Session 17 (issue 11): the clock trace (CTA 0, steps 256-319) of main's backward (trace) and of
# session 12's s8 (dQ staged in shared memory, one bulk reduction per warpgroup block by a dQ warp;
# s8trace) at (28, 16K) bf16, then both binaries timed without printing (two alternating rounds).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
for v in trace s8trace; do
  DUALKV_TRACE=1 exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 --repeats 10 \
    --warmups 1 2> $OUT/all.txt > /dev/null
  grep TRACE $OUT/all.txt | tail -128 > $OUT/trace_$v.txt
done
rm -f $OUT/all.txt
for round in 1 2; do
  for v in trace s8trace; do
    echo "== $v round $round" >> $LOG
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x4096,28x16384,16x65536 --dtype bf16 2>&1 \
      | sed -n "/^config/,/^$/p" | head -4 >> $LOG
  done
done
