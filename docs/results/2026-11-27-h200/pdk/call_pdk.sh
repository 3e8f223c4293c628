#!/bin/bash
# Session 24, one H200 (issue 11): pdk (pdk.patch) against main's kernels (exp-bin/s23). The
# previous step's dK is waited for right after S^T is issued and before dP^T is issued (it was
# waited for with S^T, after both issues), and its Q stage goes back there. The tensor pipe runs
# its wgmmas in order, so S^T still queues behind that dK; what changes is that dS^T's registers
# are free before dP^T's accumulators are allocated: at head_dim 128 the atomic kernel then has no
# local memory at all (main: 8 bytes across the loop), and an 80-query step would need those
# registers. GPU suite and compute-sanitizer on pdk; three alternating rounds; then the
# deterministic backward's cost against the default at the five design shapes (main's kernels).
# Binaries: exp-xz/s24b.tar.xz (exp-bin/s23 bench, exp-bin/pdk bench and tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s24/tests; mkdir -p $T
timeout 240 exp-bin/pdk/dualkv_cuda_tests --gtest_brief=1 > $T/suite_pdk.txt 2>&1
echo "suite pdk rc $? at $SECONDS s: $(tail -1 $T/suite_pdk.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/pdk/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s24 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16" "3 bf16"; do
  set -- $pass
  for variant in s23 pdk; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
for mode in "" --deterministic; do
  echo "== s23 bf16 ${mode:-default}" >> $OUT/deterministic.txt
  exp-bin/s23/dualkv_bench --configs all --dtype bf16 --kernel-family hopper $mode 2>&1 | grep -E "^N[0-9]" >> $OUT/deterministic.txt
done
echo "deterministic done at $SECONDS s" >> $LOG
