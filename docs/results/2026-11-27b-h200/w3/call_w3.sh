#!/bin/bash
# Session 25, one H200 (issue 11): w3 = w2 (prompt key tiles walk the response rectangle for every
# head first, in lock-step, then their own prompt part) with a leaner walk state (w2 spilled 32 B at
# head_dim 128) and the prompt tiles with responses mapped KV-head-major ahead of everything else
# (w2 mapped every tile KV-head-major and lost 7.5% at (28, 4K): late KV heads' heavy tiles started
# last). ../prefetch/ found DRAM traffic costs clock at the cap (8 KiB per step: -1.5% clock, -3%
# time) and w2 cuts the KV kernel's DRAM bytes 5.6x (+1.3% clock) but cost cycles. GPU suite on w3,
# ncu with the clock left alone at (28, 16K), then main and w3 in three alternating rounds at three
# design shapes and the step's ragged shape, nvidia-smi sampling clock and power.
# Binaries: exp-xz/s25c.tar.xz (exp-bin/s23 = main, exp-bin/w3: main + w3.patch).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s25c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 240 exp-bin/w3/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_w3.txt 2>&1
echo "suite w3 rc $? at $SECONDS s: $(tail -1 $OUT/suite_w3.txt)" >> $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for v in s23 w3; do
  echo "== $v" >> $OUT/ncu.txt
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
    --launch-count 1 exp-bin/$v/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 \
    --warmups 0 2>&1 | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|hit_rate" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
for round in 1 2 3; do
  for v in s23 w3; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --configs 28x4096,28x16384,16x65536,$STEP0 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
