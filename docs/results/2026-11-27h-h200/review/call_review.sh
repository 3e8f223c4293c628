#!/bin/bash
# Session 29's review, one H200: s29d derives the own slot of the row 8 further from the row's
# slots (dq_own_slot_of_later_row) instead of searching the layout again in the dQ conversion.
# GPU suite and memcheck of s29d, then ncu of both conversion kernels (s29c, s29d) at the step's
# shape and (28, 16K). Binaries: exp-xz/s29d.tar.xz.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s29d.tar.xz
timeout 240 exp-bin/s29d/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s29d rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 exp-bin/s29d/dualkv_cuda_tests \
  --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/memcheck.txt 2>&1
echo "s29d memcheck rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/memcheck.txt | tail -1)" >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
for shape in $STEP0 28x16384; do
  for v in s29c s29d; do
    echo "== $v ${shape:0:12}" >> $OUT/ncu.txt
    timeout 150 ncu --clock-control none --metrics $M --kernel-name regex:"convert" \
      --launch-skip 2 --launch-count 1 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 | grep -E "duration|dram__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
