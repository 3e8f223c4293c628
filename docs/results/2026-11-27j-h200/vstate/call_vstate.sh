#!/bin/bash
# Session 31, one GPU: s31v, main's forward with the consumers' V pipeline state derived from the
# K state (V(n) is consumed a fixed distance behind K) instead of kept: two values fewer live
# across the loop, where one more cost 2% (walk/). GPU suite of s31v; ncu at the locked base
# clock (three launches) of s30main and s31v.
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s31v.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 300 exp-bin/tests/s31v_dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s31v rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for spec in "128 28x16384" "128 $STEP0" "128 $STEP1" "128 28x4096" "128 16x65536" "64 28x4096" "64 $STEP0"; do
  set -- $spec
  for v in s30main s31v; do
    printf "%s d%s %s:" $v $1 ${2:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $2 --head-dim $1 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
