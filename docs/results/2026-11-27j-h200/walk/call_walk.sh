#!/bin/bash
# Session 31, one GPU: where the runs variants' 4% at the design shapes comes from. Main's sm90
# forward kernel source, unchanged but for the walk's type, on this session's plan and walk:
# s31j with KeyBlockWalk<kRuns> (the shared flag and its mask decision), s31k the same with
# KeyRange not 16-byte aligned, s31m with KeyBlockWalk<kSegments> (no shared flag at all). None
# is NaN-safe on shared tiles; at (28, 16K) and (28, 4K) there are none. ncu at the locked base
# clock, three launches each.
cd "$(dirname "$0")/../../../.."
tar xJf exp-xz/s31jkm.tar.xz
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum
for spec in "128 28x16384" "128 28x4096"; do
  set -- $spec
  for v in s30main s31j s31k s31m; do
    printf "%s d%s %s:" $v $1 ${2:0:12} >> $OUT/ncu.txt
    timeout 100 ncu --metrics $M --kernel-name regex:forward_kernel --launch-skip 3 --launch-count 3 \
      exp-bin/$v/dualkv_bench --configs $2 --head-dim $1 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 2>&1 \
      | awk '/gpu__time_duration/ {t = t " " $NF} /sm__cycles_elapsed/ {c = c " " $NF} /inst_executed/ {i = i " " $NF}
             END {print " ms" t " | cycles" c " | inst" i}' >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
