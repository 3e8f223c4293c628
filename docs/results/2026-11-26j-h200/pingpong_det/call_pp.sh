#!/bin/bash
# Session 22, one GPU (issue 11): consumer ping-pong, probed where no dS barrier is in the way: the
# deterministic backward's KV kernel (four GEMMs per step). pp = main + pp.patch: warpgroup 1
# issues its S^T and dP^T after warpgroup 0's, and warpgroup 0 its next ones after warpgroup 1's
# (two named barriers), so the warpgroups run half a batch apart. Binaries (exp-xz/s22d.tar.xz):
# exp-bin/m22 (main) and exp-bin/pp. The backward GPU tests of pp (both modes, every case), then
# ncu durations of the deterministic KV kernel of both at (28, 16K) and (16, 64K), then
# alternating dualkv_bench --deterministic rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s22d.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 200 exp-bin/pp/dualkv_cuda_tests --gtest_filter='*Backward*' --gtest_brief=1 > $OUT/suite_pp.txt 2>&1
echo "backward tests pp rc $? at $SECONDS s: $(tail -1 $OUT/suite_pp.txt)" >> $LOG
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 exp-bin/pp/dualkv_cuda_tests \
  --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/racecheck.txt 2>&1
echo "racecheck rc=$? at $SECONDS s: $(grep -h 'RACECHECK SUMMARY' /tmp/racecheck.txt | tail -1)" >> $LOG
for config in 28x16384 16x65536; do
  for b in m22 pp; do
    echo "== $config $b" >> $OUT/ncu.txt
    timeout 100 ncu --kernel-name regex:backward_kv_kernel --launch-skip 2 --launch-count 2 --metrics gpu__time_duration.sum \
      exp-bin/$b/dualkv_bench --configs $config --dtype bf16 --kernel-family hopper --deterministic --repeats 10 \
      2>&1 | grep -E "gpu__time_duration" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2; do
  for b in m22 pp; do
    echo "== round $round $b" >> $OUT/ab.txt
    exp-bin/$b/dualkv_bench --configs 28x4096,28x16384,16x65536 --dtype bf16 --kernel-family hopper --deterministic \
      2>&1 | grep -E "^N[0-9]" | tail -3 >> $OUT/ab.txt
  done
done
echo "done at $SECONDS s" >> $LOG
