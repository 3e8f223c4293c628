#!/bin/bash
# Session 21, one H200 (issue 11): per-CTA start and end times of main's KV kernel (the trace
# probe, cta_trace.patch: globaltimer and %smid per CTA, written after each launch when
# DUALKV_CTA_TRACE names a file), bf16, at three design shapes. The file holds the last launch.
# Carry: exp-xz/s21c.tar.xz (exp-bin/trace/dualkv_bench).
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s21c.tar.xz
for c in 28x4096 28x16384 16x65536; do
  DUALKV_CTA_TRACE=$OUT/trace_$c.csv exp-bin/trace/dualkv_bench --configs $c --dtype bf16 --kernel-family hopper 2>&1 \
    | grep -E "^N[0-9]" >> $OUT/bench.txt
  gzip $OUT/trace_$c.csv
done
