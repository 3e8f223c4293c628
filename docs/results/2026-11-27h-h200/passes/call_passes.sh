#!/bin/bash
# Session 29, one H200: how long the Hopper backward's two row passes (the pre-pass: D and LSE x
# log2(e); the dQ conversion from the tiled fp32 accumulator) take beside its KV kernel, at the
# step's shape and (28, 16K), bf16 (ncu, clock left alone; one backward's three kernels after
# two warm-up backwards). Binaries: exp-xz/s29b.tar.xz (this session's kernels).
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s29b.tar.xz
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for shape in $STEP0 28x16384; do
  echo "== ${shape:0:12}" >> $OUT/ncu.txt
  timeout 150 ncu --clock-control none --metrics $M --kernel-name regex:"preprocess|convert|backward_kv" \
    --launch-skip 6 --launch-count 3 exp-bin/s29b/dualkv_bench --configs $shape --dtype bf16 \
    --kernel-family hopper --repeats 3 --warmups 0 2>&1 \
    | grep -E "^  [a-z_]+.*\(|duration|dram__|inst_executed|ERR" >> $OUT/ncu.txt
done
