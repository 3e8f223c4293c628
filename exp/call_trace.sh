#!/bin/bash
# Session 17 (issue 11): branch exp/bwd-trace. CTA 0 of the atomic Hopper backward records its SM
# clock at 12 points of steps 256-319 for each consumer warpgroup (thread 0 of each); the launch
# prints them (DUALKV_TRACE=1). (28, 16K) and (16, 64K), bf16; the last launch's trace is kept.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
for c in 28x16384 16x65536; do
  DUALKV_TRACE=1 exp-bin/trace/dualkv_bench --kernel-family hopper --configs $c --dtype bf16 --repeats 10 --warmups 1 \
    2> $OUT/trace_all.txt | sed -n "/^config/,/^$/p" | head -2 >> $LOG
  grep TRACE $OUT/trace_all.txt | tail -128 > $OUT/trace_$c.txt
  echo "$c: $(grep -c TRACE $OUT/trace_all.txt) trace lines" >> $LOG
done
rm $OUT/trace_all.txt
