#!/bin/bash
# Session 28, one GPU: s28g = s28 with the dQ accumulator's slots named by the segment holding a
# tile's first token (main's addresses at the design shapes: an unused slot after each segment's
# tiles) instead of the run's first segment (contiguous slots per response run). diag/ showed s28's
# KV kernel at (28, 16K) with the same steps as main moving 35% more DRAM bytes in 4% more cycles.
# GPU suite and sanitizers of s28g; ncu of the KV kernel of m27, s28 and s28g at (28, 16K) and the
# step's shape; then m27 / s28g alternating rounds (bf16 x 2, fp16, head_dim 64) with nvidia-smi
# sampling. Binaries: exp-xz/s28b.tar.xz (exp-bin/m27 = main at 11edcc6, exp-bin/s28, exp-bin/s28g).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s28b.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/s28g/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite.txt 2>&1
echo "suite s28g rc $? at $SECONDS s: $(tail -1 /tmp/suite.txt)" >> $LOG
grep -E "FAILED|Failure" /tmp/suite.txt | head -20 >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/s28g/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "s28g $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
STEP1=8192:1154/1122/557/1280/1487/446/911/1764/1762/649/1312/1061/1073/1441/262/1607/412/1922/338/685/982/1888/1568/1961/847/1465/1004/1641/145/1821/1737/1319
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for shape in 28x16384 $STEP0; do
  for v in m27 s28 s28g; do
    echo "== $v ${shape:0:12}" >> $OUT/ncu.txt
    timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:backward_kv_kernel \
      --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2 fp16 d64 portable; do
  dtype=bf16; configs=$STEP0,$STEP1,28x4096,28x16384,16x65536; head=128; family=hopper
  [ $round = fp16 ] && dtype=fp16
  [ $round = d64 ] && head=64 && configs=$STEP0,$STEP1,28x4096,28x16384
  [ $round = portable ] && family=portable && configs=$STEP0,28x4096
  for v in m27 s28g; do
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
