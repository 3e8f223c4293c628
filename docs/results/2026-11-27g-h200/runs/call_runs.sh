#!/bin/bash
# Session 28, one GPU (issues 11 and 12): the backward's query tiles laid on runs (a group's prompt;
# its responses together), so a prompt key tile's steps over the responses are full tiles across
# response boundaries (QueryWalk). At the step benchmark's shape (P = 8K, 32 ragged responses) that
# is 2.1% fewer steps, and partial steps fall from 5.2% to 0.9% of them (count.py); partial steps
# also zero their rows with 16-byte stores (zero_rows.cuh). The forward is unchanged (a control).
# GPU suite of s28, compute-sanitizer on the Hopper backward's sanitizer cases, ncu of both KV
# kernels at the step's shape, then main (m27) and s28 in alternating rounds with nvidia-smi
# sampling: bf16 at head_dim 128 (two step shapes and two design shapes, whose responses are
# multiples of the tile: unchanged work), one fp16 round, one head_dim 64 round; then the portable
# kernels (their KV kernel walks the same steps) at one step shape and (28, 4K).
# Binaries: exp-xz/s28a.tar.xz (exp-bin/m27 = main at 11edcc6, exp-bin/s28).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s28a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/s28/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite.txt 2>&1
echo "suite s28 rc $? at $SECONDS s: $(tail -1 /tmp/suite.txt)" >> $LOG
grep -E "FAILED|Failure" /tmp/suite.txt | head -20 >> $LOG
cp /tmp/suite.txt $OUT/suite.txt
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s28/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "s28 $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
for v in m27 s28; do
  for kernel in backward_kv_kernel; do
    echo "== $v $kernel, step shape 0, bf16, head_dim 128" >> $OUT/ncu.txt
    timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:$kernel \
      --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs $STEP0 --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2 fp16 d64 portable portable_d64; do
  dtype=bf16; configs=$STEP0,$STEP1,28x4096,28x16384; head=128; family=hopper
  [ $round = fp16 ] && dtype=fp16
  [ $round = d64 ] && head=64 && configs=$STEP0,$STEP1,28x4096
  case $round in portable*) family=portable; configs=$STEP0,28x4096;; esac
  [ $round = portable_d64 ] && head=64
  for v in m27 s28; do
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
