#!/bin/bash
# Session 23, one GPU (issue 11): the KV kernel's consumer code compiled once per consumer
# warpgroup (cwg.patch), so the shared-memory operands are partitioned by a compile-time warpgroup
# index: every wgmma descriptor is a constant offset from its tile's base (no per-thread descriptor
# arithmetic and R2UR before each wgmma; session 20's uniform descriptors used a runtime warp-uniform
# index). The consumer-to-consumer named barriers become unaligned (barrier.sync), since the two
# paths reach them from different code addresses. 120 B of spills at head_dim 128 (coordinates of
# the boundary steps' masking pass, hoisted), 320 B at head_dim 64 (not measured here).
# Binaries built on the CPU machine (exp-xz/s23b.tar.xz): exp-bin/main23 (main, cc3eeff) and
# exp-bin/cwg (main + cwg.patch). GPU suite and compute-sanitizer on cwg, then alternating rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s23b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s23/tests; mkdir -p $T
timeout 240 exp-bin/cwg/dualkv_cuda_tests --gtest_brief=1 > $T/suite_cwg.txt 2>&1
echo "suite cwg rc $? at $SECONDS s: $(tail -1 $T/suite_cwg.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/cwg/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s23 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16" "3 bf16"; do
  set -- $pass
  for variant in main23 cwg; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
