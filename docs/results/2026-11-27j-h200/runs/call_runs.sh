#!/bin/bash
# Session 31, one GPU: s31a, the Hopper forward's query tiles on runs (a group's responses cut
# into full tiles across response boundaries; V stages of tiles shared by several responses
# sanitized, their own rows poisoned instead). GPU suite and sanitizers of s31a on the forward's
# sanitizer cases; ncu of both forward kernels at the step's shape; then s30main / s31a
# alternating rounds (bf16 x 2, fp16, head_dim 64, and the portable family, which keeps tiles on
# segments) with nvidia-smi sampling. Binaries: exp-bin/s30main (main at 3dbe03c: session 29's
# kernels) and exp-bin/s31a, carried.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 300 exp-bin/s31a/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s31a rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s31a/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*ForwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$tool.txt 2>&1
  echo "s31a $tool rc=$? at $SECONDS s: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for v in s30main s31a; do
  for shape in $STEP0 $STEP1; do
    echo "== $v ${shape:0:20}" >> $OUT/ncu.txt
    timeout 100 ncu --clock-control none --metrics $M --kernel-name regex:sm90::forward_kernel \
      --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2 fp16 d64 portable; do
  configs=$STEP0,$STEP1,28x4096,28x16384,16x65536; head=128; dtype=bf16; family=hopper
  [ $round = fp16 ] && dtype=fp16 && configs=$STEP0,$STEP1,28x4096
  [ $round = d64 ] && head=64 && configs=$STEP0,$STEP1,28x4096
  [ $round = portable ] && family=portable && configs=$STEP0,28x4096
  for v in s30main s31a; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --head-dim $head --configs $configs --dtype $dtype --kernel-family $family 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
