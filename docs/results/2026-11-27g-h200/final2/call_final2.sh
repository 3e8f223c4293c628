#!/bin/bash
# Session 28, one GPU: s28i = s28h with the dQ warp handing each staged block back through a full
# barrier (bar.sync) instead of an arrival, so racecheck sees its row zeroing ordered before the
# warpgroup's next staging (final/racecheck_s28h.txt). GPU suite and the three sanitizers (logs
# kept), then m27 / s28i in two alternating rounds at the step's shape and two design shapes.
# Then the one-GPU step benchmark with the extension built on the device from this tree
# (../step/call_step.sh). Binaries: exp-xz/s28e.tar.xz (exp-bin/m27 = main at 11edcc6, exp-bin/s28i).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s28e.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/s28i/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s28i rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s28i/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "s28i $tool rc=$? at $SECONDS s: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
for v in m27 s28i m27 s28i; do
  echo "== $v" >> $OUT/ab.txt
  exp-bin/$v/dualkv_bench --configs $STEP0,28x4096,28x16384 --dtype bf16 --kernel-family hopper 2>&1 \
    | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
done
echo "rounds done at $SECONDS s" >> $LOG
mkdir -p $OUT/step
OUT=$OUT/step bash docs/results/2026-11-27g-h200/step/call_step.sh
cat $OUT/step/log.txt >> $LOG
