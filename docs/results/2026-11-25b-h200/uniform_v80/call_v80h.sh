#!/bin/bash
# Session 12, call 2: GPU suite on v80h (v80f + per-block dQ hand-back + early LSE/D at 80 queries),
# A/B of main, v80f and v80h (Hopper family, bf16, two alternating rounds), then per-instruction
# stall sampling of main and v80h at (28, 16K) with the whole SASS source page kept as CSV.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/v80h/dualkv_cuda_tests --gtest_brief=1 > $OUT/tests_v80h.txt 2>&1; echo "tests rc=$? at $SECONDS s" >> $LOG
tail -4 $OUT/tests_v80h.txt >> $LOG
bash exp/run_bins.sh "main v80f v80h" 28x4096,28x16384,16x65536 ""
for v in main v80h; do
  timeout 150 ncu --kernel-name regex:backward_kv --launch-skip 2 --launch-count 1 --section WarpStateStats --section SourceCounters \
      -f -o /tmp/$v exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 > /tmp/ncu_$v.log 2>&1
  ncu -i /tmp/$v.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $OUT/source_$v.csv.gz
  echo "stalls $v done at $SECONDS s" >> $LOG
done
