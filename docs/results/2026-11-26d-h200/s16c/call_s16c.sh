#!/bin/bash
# Session 16, third A/B call (issue 10), one H200: how the persistent forward hands out its work.
#   ufwd   main (e936309): CTA b takes items b, b + G, b + 2G, ... (G = gridDim.x = 132)
#   snake  rounds alternate direction: b, 2G - 1 - b, 2G + b, ... (snake.patch)
#   dyn    probe: items past the first G from a global atomic counter, fetched by the producer and
#          passed to the consumers with the Q tile (dyn.patch; a static counter, not for main)
# GPU suite on snake and dyn, synccheck of the Hopper sanitizer cases on dyn, then two
# alternating rounds of dualkv_bench --kernel-family hopper --dtype bf16 at all five shapes.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
for v in snake dyn; do
  timeout 150 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite_$v.txt 2>&1; rc=$?
  echo "suite $v rc=$rc at $SECONDS s" >> $LOG
  grep -E "tests ran|PASSED|FAILED" $OUT/suite_$v.txt | tail -4 >> $LOG
done
timeout 90 compute-sanitizer --tool synccheck --error-exitcode 3 exp-bin/dyn/dualkv_cuda_tests \
  --gtest_filter='*Sanitizer*Forward*Hopper*' --gtest_brief=1 > $OUT/synccheck_dyn.txt 2>&1
echo "synccheck dyn rc=$? at $SECONDS s" >> $LOG
timeout 330 bash exp/run_bins.sh "ufwd snake dyn" 28x4096,28x16384,16x32768,28x32768,16x65536
