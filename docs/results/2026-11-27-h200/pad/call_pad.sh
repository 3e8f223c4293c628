#!/bin/bash
# Session 24, one H200 (issue 11): does instruction count cost clock at the power cap? A probe,
# not a candidate: pad.patch adds DUALKV_PAD dependent-free integer multiply-adds per consumer
# thread per step (four chains of mad.lo.u32, consumed by a store that never happens), after dK is
# issued; built with 64 (pad64) and 128 (pad128): +11% and +22% of the step's warp instructions.
# ptxas interleaves them with the dK wgmma issues and pad128 adds one 4-byte local load per step,
# so the cycles per step can move too. Against main's build (exp-bin/s23): ncu with the clock
# unlocked on the KV kernel at (28, 16K) bf16 (mean clock, cycles, instructions), then two
# alternating rounds of dualkv_bench.
# Binaries: exp-xz/s24d.tar.xz (exp-bin/s23, exp-bin/pad64, exp-bin/pad128: dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24d.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for round in 1 2; do
  for variant in s23 pad64 pad128; do
    timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
      --launch-count 1 exp-bin/$variant/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper \
      --repeats 10 --warmups 0 > /tmp/ncu_$variant.txt 2>&1
    echo "== round $round $variant" >> $OUT/ncu.txt
    grep -E "duration|per_second|cycles_elapsed.max|inst_executed|hmma" /tmp/ncu_$variant.txt >> $OUT/ncu.txt
  done
  echo "ncu round $round at $SECONDS s" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for round in 1 2; do
  for variant in s23 pad64 pad128; do
    echo "== round $round bf16 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype bf16 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
