#!/bin/bash
# Session 24, one H200 (issue 11): lfa (lfa.patch) against main's kernels (exp-bin/s23). The pad
# probe (../pad/) showed that work between a step's dK issue and the next step's S^T issue costs
# cycles one for one. At head_dim 128, lfa takes the staged dQ block's fence (fence.proxy.async,
# which ptxas emits as MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S) and the arrival that hands it to the
# dQ warp off that stretch: they now follow the next step's S^T issue, while S^T runs. (lds.patch,
# not run: staging the whole block there made ptxas wait for every wgmma first.) GPU suite and
# compute-sanitizer on lfa; three bf16 rounds and one fp16 round, alternating.
# Binaries: exp-xz/s24e.tar.xz (exp-bin/s23 bench, exp-bin/lfa bench and tests).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24e.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s24/tests; mkdir -p $T
timeout 240 exp-bin/lfa/dualkv_cuda_tests --gtest_brief=1 > $T/suite_lfa.txt 2>&1
echo "suite lfa rc $? at $SECONDS s: $(tail -1 $T/suite_lfa.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/lfa/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s24 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16" "3 bf16"; do
  set -- $pass
  for variant in s23 lfa; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
