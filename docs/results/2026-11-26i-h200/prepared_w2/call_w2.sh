#!/bin/bash
# Prepared in session 21, not run (no device time left). Issue 11, one GPU: session 12's lock-step
# walk (w2: prompt key tiles walk the responses first, every head, then their prompt part;
# KV-head-major CTAs) on today's main, with the response-grouped plan. Session 12 measured it level
# (L2 hit rate 84% -> 93%); this reruns it now that the response tiles no longer slow the kernel's
# end, and traces both orders per CTA (does a prompt tile step faster when the resident prompt
# tiles walk the rectangle together?). Note: w2's walk state spills 12 B in the head_dim 128
# atomic kernel (main: none).
# Binaries (built in session 21 from main 36b5fa3's kernels; rebuild from the patches if gone):
#   exp-bin/m21: main; exp-bin/w2: main + w2_on_main.patch; exp-bin/ordertrace: main +
#   ../cta_trace/cta_trace.patch; exp-bin/w2trace: main + w2_on_main.patch + cta_trace.patch.
# Carry: exp-xz/s21h.tar.xz.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s21h.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 exp-bin/w2/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_w2.txt 2>&1; echo "suite w2 rc $? at $SECONDS s" >> $LOG
tail -1 $OUT/suite_w2.txt >> $LOG
configs=28x4096,28x16384,16x32768,28x32768,16x65536
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in m21 w2; do
    echo "== round $1 $2 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -5 >> $OUT/bench.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
# One folder per order, file names as ../cta_trace/analyse_cta_trace.py reads them.
for variant in ordertrace w2trace; do
  mkdir -p $OUT/$variant
  DUALKV_CTA_TRACE=$OUT/$variant/trace_28x16384.csv exp-bin/$variant/dualkv_bench --configs 28x16384 --dtype bf16 \
    --kernel-family hopper > /dev/null 2>&1
  gzip $OUT/$variant/trace_28x16384.csv
done
echo "done at $SECONDS s" >> $LOG
