#!/bin/bash
# Session 23, one GPU (issue 11): two steps of FA4's issue order in the KV kernel. lse.patch: the
# step's LSE read from shared memory before the S^T and dP^T wgmmas are issued (ours read it after
# issuing both; 8 B of spills at head_dim 128). dolate.patch (on top of lse): dO waited for only
# just before dP^T is issued, after S^T (boundary steps still wait for both first, to zero rows).
# Binaries built on the CPU machine (exp-xz/s23c.tar.xz): exp-bin/main23 (main, cc3eeff),
# exp-bin/lse, exp-bin/dolate. GPU suite and compute-sanitizer on dolate, then alternating rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s23c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s23/tests; mkdir -p $T
timeout 240 exp-bin/dolate/dualkv_cuda_tests --gtest_brief=1 > $T/suite_dolate.txt 2>&1
echo "suite dolate rc $? at $SECONDS s: $(tail -1 $T/suite_dolate.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/dolate/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s23 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in main23 lse dolate; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
