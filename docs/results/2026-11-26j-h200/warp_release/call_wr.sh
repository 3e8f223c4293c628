#!/bin/bash
# Session 22, one GPU (issues 10 and 11): the TMA pipelines' empty barriers count consumer warps, and
# lane 0 of each warp arrives after __syncwarp (wr, as FA4's sm90 kernels release), instead of
# every consumer thread arriving (256 arrivals per stage release; CUTLASS's default at cluster
# size 1). Both Hopper kernels. Binaries built on the CPU machine (exp-xz/s22c.tar.xz):
# exp-bin/m22 (main) and exp-bin/wr (main + wr.patch).
# GPU suite and compute-sanitizer (memcheck, racecheck, synccheck) on the Hopper cases of wr, then
# alternating rounds of dualkv_bench --kernel-family hopper (forward and backward) against main.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s22c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s22/tests; mkdir -p $T
timeout 240 exp-bin/wr/dualkv_cuda_tests --gtest_brief=1 > $T/suite_wr.txt 2>&1
echo "suite wr rc $? at $SECONDS s: $(tail -1 $T/suite_wr.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/wr/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*Hopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s22 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16" "2 fp16"; do
  set -- $pass
  for variant in m22 wr; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
