#!/bin/bash
# Session 28, one GPU: where s28's backward loses 2-3% at the design shapes (call_runs.sh), whose
# steps are the same as main's: ncu of every backward kernel (memset, pre-pass, KV kernel, dQ
# convert) of main (m27) and s28 at (28, 16K) and (28, 4K), bf16, clock left alone; then two more
# alternating bench rounds at those shapes. Binaries: exp-xz/s28a.tar.xz.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s28a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for shape in 28x16384 28x4096; do
  for v in m27 s28; do
    echo "== $v $shape" >> $OUT/ncu.txt
    timeout 150 ncu --clock-control none --metrics $M --kernel-name regex:'backward|convert|preprocess' \
      --launch-skip 6 --launch-count 6 exp-bin/$v/dualkv_bench --configs $shape --dtype bf16 \
      --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | grep -E "^  [a-z_]+.*kernel|void|duration|cycles_elapsed|inst_executed|hmma|dram__|lts__|ERR" \
      | sed -E 's/\(dualkv::detail::[^)]*\)//' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2; do
  for v in m27 s28; do
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --configs 28x4096,28x16384 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" >> $OUT/ab.txt
  done
done
echo "rounds done at $SECONDS s" >> $LOG
