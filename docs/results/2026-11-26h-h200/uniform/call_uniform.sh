#!/bin/bash
# Session 20, one H200 (issue 11). uni: main's backward with its shared-memory operand partitions
# sliced by the warpgroup's first thread (consumer_operand_slice, as the forward does), so the
# wgmma descriptors live in uniform registers (49 R2UR per step to 1; 1,422 to 1,372 static loop
# instructions; 4 B of spills). It lost 1-3% in sessions 12 and 18 without a profile of why: two
# alternating bf16 rounds against main, then session 18's per-instruction sampling of uni at
# (28, 16K) to set beside sass19/ (main).
# Carry: exp-xz/s20f.tar.xz (exp-bin/{s19,uni}/dualkv_bench).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s20f.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
configs=28x4096,28x16384,16x65536
for round in 1 2; do
  for variant in s19 uni; do
    echo "== round $round bf16 $variant" >> $OUT/bench.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | tail -3 >> $OUT/bench.txt
  done
done
echo "bench done at $SECONDS s" >> $LOG
S="--section SourceCounters --section WarpStateStats --section InstructionStats"
timeout 150 ncu $S --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 -o $OUT/uni \
  exp-bin/uni/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
  > $OUT/uni_run.txt 2>&1; echo "uni ncu rc $? at $SECONDS s" >> $LOG
ncu --import $OUT/uni.ncu-rep --page source --print-source sass --csv > $OUT/uni_sass.csv 2> $OUT/uni_sass.err
ncu --import $OUT/uni.ncu-rep --page details > $OUT/uni_details.txt 2>&1
gzip -9 $OUT/uni_sass.csv
rm -f $OUT/*.ncu-rep
python3 docs/results/2026-11-26f-h200/sass/analyse_sass.py $OUT/uni_sass.csv.gz --top 40 > $OUT/analysis.txt 2>&1
echo "done at $SECONDS s" >> $LOG
