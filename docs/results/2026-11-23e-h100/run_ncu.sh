#!/bin/bash
# usage: exp/run_ncu.sh variant config — full ncu profile of the backward KV kernel, details + SASS source csv
V=$1; C=${2:-28x16384}
ncu --set full --import-source yes --kernel-name regex:backward_kv_kernel --launch-skip 1 --launch-count 1 -o $OUT/prof_$V \
  exp/$V/build/bench/dualkv_bench --kernel-family hopper --configs $C --dtype bf16 > $OUT/ncu_run_$V.txt 2>&1
ncu --import $OUT/prof_$V.ncu-rep --print-details all > $OUT/details_$V.txt 2>&1
ncu --import $OUT/prof_$V.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/source_$V.csv.gz
rm -f $OUT/prof_$V.ncu-rep
echo "ncu $V done" >> $OUT/log.txt
