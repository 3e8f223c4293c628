#!/bin/bash
# Session 23, one GPU (issue 11): two probes on top of the kept order (exp-bin/s23 = main at 79f69aa).
# qrel.patch: the previous step's Q stage released as soon as its dK has completed (wait_group 2
# right after dP^T is issued) instead of after the wait for S^T, so the producer can load the next
# Q earlier. p1new.patch: session 20's p1 (LSE and D read as 8-byte pairs when the row is 8-byte
# aligned) on today's order. Binaries built on the CPU machine (exp-xz/s23f.tar.xz). GPU suite and
# compute-sanitizer on qrel, then alternating rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s23f.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s23/tests; mkdir -p $T
timeout 240 exp-bin/qrel/dualkv_cuda_tests --gtest_brief=1 > $T/suite_qrel.txt 2>&1
echo "suite qrel rc $? at $SECONDS s: $(tail -1 $T/suite_qrel.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/qrel/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s23 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in s23 qrel p1new; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
