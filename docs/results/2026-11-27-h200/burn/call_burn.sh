#!/bin/bash
# Prepared in session 24, not run (its device time ran out; issue 11): a probe of instruction energy
# at the power cap. burn.patch (built
# with DUALKV_BURN = 512): warps 2 and 3 of the producer warpgroup, otherwise idle, execute 512
# integer multiply-adds per step of their CTA's walk, unsynchronised with the consumers: +1,024 warp
# instructions per CTA step (+22%), off the consumers' critical path. (ptxas also moved two of the
# consumers' values to local memory: two 4-byte local loads per thread per step.) If instructions
# cost power, the backward slows at the cap by more than its cycles grow at ncu's locked clock.
# Against main's build (exp-bin/s23): ncu at its base clock on the KV kernel at (28, 16K) bf16
# (cycles, instructions, tensor-pipe activity), then two alternating rounds of dualkv_bench.
# Binaries: exp-xz/s24f.tar.xz (exp-bin/s23, exp-bin/burn: dualkv_bench), built on the CPU machine
# at the end of session 24; if the archive is gone, rebuild: main's dualkv_bench into exp-bin/s23,
# main + burn.patch with DUALKV_BURN replaced by 512 into exp-bin/burn.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24f.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for variant in s23 burn; do
  timeout 120 ncu --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 --launch-count 1 \
    exp-bin/$variant/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
    > /tmp/ncu_$variant.txt 2>&1
  echo "== $variant" >> $OUT/ncu.txt
  grep -E "duration|cycles_elapsed.max|inst_executed|hmma" /tmp/ncu_$variant.txt >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for round in 1 2; do
  for variant in s23 burn; do
    echo "== round $round bf16 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype bf16 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
