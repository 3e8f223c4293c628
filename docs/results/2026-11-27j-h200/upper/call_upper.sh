#!/bin/bash
# Session 31, one GPU: what the runs plan could give at the step's shapes at best. s31m is main's
# forward kernel source on the runs plan with the segments walk: a shared tile's blocks of an
# earlier response go unmasked for the later response's rows (wrong results there, measured only),
# so it pays neither the row masks nor the sanitize code; s31o pays the masks, not the sanitize
# code. ncu at the locked base clock, three launches each, beside s30main (main).
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s31mo.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for shape in $STEP0 $STEP1; do
  for v in s30main s31m s31o; do
    printf "%s d128 %s:" $v ${shape:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
