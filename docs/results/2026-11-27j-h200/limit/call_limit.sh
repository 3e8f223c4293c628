#!/bin/bash
# Session 31, one GPU: s31n, the runs walk deciding a block's mask with one compare against a
# per-range limit set on entering the range (no flag kept across the loop; a shared range's flag
# read from the plan in the masked path only), the mask and the V-stage preparation decided
# together; s31o, s31n without the sanitize and poison code (not NaN-safe; measurement only).
# GPU suite of s31n, the forward's sanitizer cases; ncu at the locked base clock (three
# launches) of s30main, s31n and s31o.
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s31no.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 300 exp-bin/tests/s31n_dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s31n rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/tests/s31n_dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*ForwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "s31n $tool rc=$? at $SECONDS s: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for spec in "128 28x16384" "128 $STEP0" "128 $STEP1" "128 28x4096" "64 28x4096" "64 $STEP0"; do
  set -- $spec
  for v in s30main s31n s31o; do
    printf "%s d%s %s:" $v $1 ${2:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $2 --head-dim $1 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
