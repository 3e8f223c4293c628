#!/bin/bash
# Session 25, one H200 (issue 11 item 2): the head_dim 128 atomic KV kernel kept two values (the
# key tile's place) in local memory across its loop (8 bytes, stored once per CTA). nolocal.patch
# looks the tile's place up again in the epilogue behind hide_from_hoisting: no local memory at
# head_dim 128 (the step loop: 1,427 SASS instructions against 1,426). GPU suite, memcheck and
# racecheck on the Hopper backward sanitizer tests, then main and nolocal in three alternating
# bf16 rounds and one fp16 round at three design shapes and the step's ragged shape.
# Binaries: exp-xz/s25g.tar.xz (exp-bin/s23 = main, exp-bin/nl: main + nolocal.patch).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s25g.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/nl/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_nl.txt 2>&1
echo "suite nl rc $? at $SECONDS s: $(tail -1 $OUT/suite_nl.txt)" >> $LOG
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/nl/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
for round in 1 2 3 fp16; do
  dtype=bf16; [ $round = fp16 ] && dtype=fp16
  for v in s23 nl; do
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --configs 28x4096,28x16384,16x65536,$STEP0 --dtype $dtype --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
