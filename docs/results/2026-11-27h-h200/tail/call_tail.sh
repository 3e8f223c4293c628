#!/bin/bash
# Session 29, one GPU: s29a, the dQ warp no longer zeroes rows of a staged block. A causal step
# whose block holds another response's rows adds it into a slot the convert pass reads only for
# the step's own queries (dq_accumulator.h: named (segment, tile) slots and per-segment tail
# slots). GPU suite and sanitizers of s29a (racecheck of s28h beside it, same filter); ncu of the
# KV kernel of s28h and s29a at the step's shape; then s28h / s29a alternating rounds (bf16 x 2,
# head_dim 64) with nvidia-smi sampling. Binaries: exp-xz/s29a.tar.xz (exp-bin/s28h = main at 3931945).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s29a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/s29a/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite s29a rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
for run in "s29a memcheck" "s29a racecheck" "s29a synccheck" "s28h racecheck"; do
  set -- $run
  timeout 150 compute-sanitizer --tool $2 --error-exitcode 3 exp-bin/$1/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $OUT/sanitizer_$1_$2.txt 2>&1
  echo "$1 $2 rc=$? at $SECONDS s: $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/sanitizer_$1_$2.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for v in s28h s29a; do
  echo "== $v step shape" >> $OUT/ncu.txt
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:backward_kv_kernel \
    --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs $STEP0 --dtype bf16 \
    --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
    | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2 d64; do
  configs=$STEP0,$STEP1,28x4096,28x16384,16x65536; head=128
  [ $round = d64 ] && head=64 && configs=$STEP0,$STEP1,28x4096,28x16384
  for v in s28h s29a; do
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
