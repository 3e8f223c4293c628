#!/bin/bash
# Session 28, one GPU: s28g's KV kernel walks the same steps as main's at (28, 16K) and reads and
# writes the same addresses, yet takes 4% more cycles and moves ~25% more DRAM bytes (gaps/).
# nz = s28g without the partial steps' dQ row selection (a diagnostic: it breaks NaN isolation on
# a response key tile's boundary steps). ncu of the KV kernel of m27, s28g and nz at (28, 16K) and
# the step's shape, then one bench round of each. Binaries: exp-xz/s28c.tar.xz.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s28c.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for shape in 28x16384 $STEP0; do
  for v in m27 s28g nz; do
    echo "== $v ${shape:0:12}" >> $OUT/ncu.txt
    timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:backward_kv_kernel \
      --launch-skip 4 --launch-count 1 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for v in m27 s28g nz m27 s28g nz; do
  echo "== $v" >> $OUT/ab.txt
  exp-bin/$v/dualkv_bench --configs $STEP0,28x4096,28x16384 --dtype bf16 --kernel-family hopper 2>&1 \
    | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
done
echo "rounds done at $SECONDS s" >> $LOG
