#!/bin/bash
# Session 31, one GPU: s31h, main's forward kernel with the fewest changes for tiles on runs
# (main's mask loop plus a row pass for shared blocks only, main's V-row zeroing plus a chunk scan
# for shared blocks only, the preparation packed in main's valid_rows int); s31i, s31h with main's
# mask decision for ancestor ranges (no per-range unmasked end: wrong for shared tiles, measured
# at the design shapes only, where there are none). GPU suite of s31h; ncu at the locked base
# clock (three launches) of s30main, s31h and s31i.
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s31hi.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 300 exp-bin/tests/s31h_dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s31h rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for spec in "128 28x16384 s31i" "128 $STEP0" "128 $STEP1" "128 28x4096 s31i" "64 28x4096 s31i"; do
  set -- $spec
  for v in s30main s31h $3; do
    printf "%s d%s %s:" $v $1 ${2:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $2 --head-dim $1 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
