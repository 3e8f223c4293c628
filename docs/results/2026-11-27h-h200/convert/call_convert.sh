#!/bin/bash
# Session 29, one H200: s29c converts the Hopper backward's tiled dQ accumulator with its own
# kernel: the thread of a row in the first half of a 16-row group converts that row and the row 8
# further from four contiguous 16-byte loads per slot (the accumulator's wgmma order), instead of
# one row from four 8-byte loads 16 bytes apart. GPU suite and sanitizers of s29c; ncu of the
# three backward kernels of s29b and s29c at the step's shape and (28, 16K); then s29b / s29c
# alternating rounds (bf16 x 2, head_dim 64). Binaries: exp-xz/s29c.tar.xz.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s29c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/s29c/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s29c rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s29c/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "s29c $tool rc=$? at $SECONDS s: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
for shape in $STEP0 28x16384; do
  for v in s29b s29c; do
    echo "== $v ${shape:0:12}" >> $OUT/ncu.txt
    timeout 150 ncu --clock-control none --metrics $M --kernel-name regex:"convert" \
      --launch-skip 2 --launch-count 1 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "^  [a-z_ ]+.*\(|duration|dram__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2 d64; do
  configs=$STEP0,$STEP1,28x4096,28x16384,16x65536; head=128
  [ $round = d64 ] && head=64 && configs=$STEP0,$STEP1,28x4096,28x16384
  for v in s29b s29c; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --head-dim $head --configs $configs --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
