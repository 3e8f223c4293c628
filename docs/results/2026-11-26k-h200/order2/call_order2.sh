#!/bin/bash
# Session 23, one GPU (issue 11): ../order/ found dO waited for just before dP^T (after S^T's
# issue) faster than main. Here it is separated from the LSE move and taken one step further.
# dlo.patch: only dO's wait moved (boundary steps still wait for both first, to zero rows).
# dofirst.patch (dlo + the producer loading a step's dO before its Q: the dO stage frees after dV,
# the Q stage only after the next step's S^T, so in Q-then-dO order dO waited behind Q's stage).
# Binaries built on the CPU machine (exp-xz/s23d.tar.xz): exp-bin/main23 (main, cc3eeff),
# exp-bin/dlo, exp-bin/dofirst, exp-bin/dolate (../order/). GPU suite and compute-sanitizer on
# dofirst, then alternating rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s23d.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s23/tests; mkdir -p $T
timeout 240 exp-bin/dofirst/dualkv_cuda_tests --gtest_brief=1 > $T/suite_dofirst.txt 2>&1
echo "suite dofirst rc $? at $SECONDS s: $(tail -1 $T/suite_dofirst.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/dofirst/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s23 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in main23 dlo dofirst dolate; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
