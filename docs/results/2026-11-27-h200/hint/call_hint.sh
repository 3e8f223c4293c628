#!/bin/bash
# Session 24, one H200 (issue 11): L2 eviction priority for the backward's dQ reductions, a probe
# of energy per step (../clock2/: at the cap our backward holds 1605 MHz against FA4's 1680 and
# moves 5x its DRAM bytes per step). rdl (rdl.patch): each cp.reduce.async.bulk of a dQ block with
# .L2::cache_hint EVICT_LAST (Q, dO and their statistics are loaded EVICT_LAST already). qdn
# (qdn.patch): rdl + the Q and dO tiles loaded EVICT_NORMAL, so the dQ lines outrank them. Both
# change where lines are kept in L2, not when CTAs reduce into the same rows. Against main's build
# (exp-bin/s23): ncu with the clock unlocked (DRAM bytes, L2 hit rate, mean clock) on the KV kernel
# at (28, 16K) bf16, then three alternating rounds of dualkv_bench.
# Binaries: exp-xz/s24c.tar.xz (exp-bin/s23, exp-bin/rdl, exp-bin/qdn: dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for variant in s23 rdl qdn; do
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
    --launch-count 1 exp-bin/$variant/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper \
    --repeats 10 --warmups 0 > /tmp/ncu_$variant.txt 2>&1
  echo "== $variant" >> $OUT/ncu.txt
  grep -E "duration|per_second|cycles_elapsed.max|dram__|hit_rate" /tmp/ncu_$variant.txt >> $OUT/ncu.txt
  echo "ncu $variant at $SECONDS s" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for round in 1 2 3; do
  for variant in s23 rdl qdn; do
    echo "== round $round bf16 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype bf16 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
