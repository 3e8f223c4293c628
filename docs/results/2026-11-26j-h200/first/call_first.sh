#!/bin/bash
# Session 22, first device call (one GPU). Binaries built on the CPU machine (exp-xz/s22a.tar.xz):
#   exp-bin/m22: main of this session (dualkv_bench takes ragged P:R1/R2/... items; two new
#     sanitizer cases: the Hopper backward's long walk at head_dim 128 and 64);
#   exp-bin/trace: m22 + cta_trace2.patch (per-CTA start/end, SM, steps, tile; DUALKV_CTA_TRACE=file);
#   exp-bin/w2trace: trace + ../../2026-11-26i-h200/prepared_w2/w2_on_main.patch (session 12's
#     lock-step walk). The A/B compares trace with w2trace: both carry the probe's few stores per CTA.
# 1. GPU suite of m22 and w2; compute-sanitizer memcheck, racecheck, synccheck on the Hopper backward's
#    sanitizer cases (not run since session 20's kernels: session 21's plan order and head_dim 64 drain).
# 2. The 1-GPU step's attention shapes (P = 8192, the 32 ragged response lengths of the step
#    benchmark's seeds 0 and 1) beside (28, 4K), with per-CTA traces: is the backward slower per step
#    there (the step's profile: 33 ms per call against ~28 ms by the step model)?
# 3. w2 against main (w2trace against trace), alternating rounds; traces of both at (28, 16K).
cd "$(dirname "$0")/../../../.."
# The device returns at most 8 files: logs and tables at the top, suite logs and traces as two tarballs.
LOG=$OUT/log.txt
T=/tmp/s22/tests; TR=/tmp/s22/traces; mkdir -p $T $TR
tar xJf exp-xz/s22a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
for b in m22 w2trace; do
  timeout 240 exp-bin/$b/dualkv_cuda_tests --gtest_brief=1 > $T/suite_$b.txt 2>&1
  echo "suite $b rc $? at $SECONDS s: $(tail -1 $T/suite_$b.txt)" >> $LOG
done
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/m22/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
exp-bin/m22/dualkv_bench --configs $STEP0,$STEP1,28x4096 --dtype both --kernel-family hopper > $OUT/step_shapes.txt 2>&1
echo "step shapes done at $SECONDS s" >> $LOG
tar czf $OUT/tests.tgz -C /tmp/s22 tests
for shape in STEP0 STEP1; do
  DUALKV_CTA_TRACE=$TR/m22_$shape.csv exp-bin/trace/dualkv_bench --configs ${!shape} --dtype bf16 \
    --kernel-family hopper > /dev/null 2>&1
done
configs=28x4096,28x16384,16x65536
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in trace w2trace; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -3 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
for variant in trace w2trace; do
  DUALKV_CTA_TRACE=$TR/${variant}_28x16384.csv exp-bin/$variant/dualkv_bench --configs 28x16384 --dtype bf16 \
    --kernel-family hopper > /dev/null 2>&1
done
DUALKV_CTA_TRACE=$TR/w2trace_STEP0.csv exp-bin/w2trace/dualkv_bench --configs $STEP0 --dtype bf16 \
  --kernel-family hopper > /dev/null 2>&1
python3 docs/results/2026-11-26j-h200/analyse_cta_trace.py $TR/*.csv > $OUT/trace_analysis.txt 2>&1
tar czf $OUT/traces.tgz -C /tmp/s22 traces
echo "done at $SECONDS s" >> $LOG
