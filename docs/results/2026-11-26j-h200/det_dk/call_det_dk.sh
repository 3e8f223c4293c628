#!/bin/bash
# Session 22, one GPU (issue 11): the deterministic backward's KV kernel waited for dV and dK at the
# end of every step (`sass_det/`: 20% of its samples on that wait). det2 = main + det_dk.patch:
# dO goes back once dV is done and dK runs on into the next step, as in atomic mode. Binaries
# (exp-xz/s22e.tar.xz): exp-bin/m22 (main), exp-bin/det2. Suite and sanitizers of det2, then
# alternating --deterministic bench rounds, and one default-mode round (its code is unchanged).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s22e.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s22/tests; mkdir -p $T
timeout 240 exp-bin/det2/dualkv_cuda_tests --gtest_brief=1 > $T/suite_det2.txt 2>&1
echo "suite det2 rc $? at $SECONDS s: $(tail -1 $T/suite_det2.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/det2/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s22 tests
configs=28x4096,28x16384,16x65536
for pass in "1 bf16 --deterministic" "1 fp16 --deterministic" "2 bf16 --deterministic" "3 bf16"; do
  set -- $pass
  for b in m22 det2; do
    echo "== round $1 $2 ${3:-atomic} $b" >> $OUT/ab.txt
    exp-bin/$b/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper $3 2>&1 | grep -E "^N[0-9]" | tail -3 >> $OUT/ab.txt
  done
  echo "round $1 $2 ${3:-atomic} done at $SECONDS s" >> $LOG
done
