#!/bin/bash
# Session 33, one H200: head_dim 64's Hopper forward with 192-query tiles (three consumer
# warpgroups at 160 registers) and 64-key blocks, 4 K/V stages (tile_shape.h {64, 192, 64, 4}:
# no spills, no C75xx), against main's {64, 128, 128, 3}. A perf probe: the tests did not run on it.
# Binaries: exp-xz/s33b.tar.xz (exp-bin/new = main at 7345d10, exp-bin/f192).
cd "$(dirname "$0")/../../../.."
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('exp-xz/s33b.tar.xz')).extractall('.')"
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/log.txt
for round in 1 2; do
  for v in new f192; do
    echo "== round $round $v" >> $OUT/ab.txt
    timeout 60 exp-bin/$v/dualkv_bench --head-dim 64 --configs 28x4096,28x16384,16x65536 --dtype bf16 \
      --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
  done
done
for config in 28x4096 28x16384; do
  for v in new f192; do
    echo "== $v $config" >> $OUT/ncu.txt
    timeout 60 ncu --metrics gpu__time_duration.sum --kernel-name regex:'forward_kernel' --launch-skip 2 --launch-count 3 \
      exp-bin/$v/dualkv_bench --head-dim 64 --configs $config --dtype bf16 --kernel-family hopper \
      --repeats 10 --warmups 0 2>&1 | grep -E "duration|ERR" >> $OUT/ncu.txt
  done
done
