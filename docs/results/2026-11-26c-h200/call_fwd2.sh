#!/bin/bash
# Session 15: the forward with P V under the next block's softmax, P double-buffered in registers
# and a lazy reference maximum (exp-bin/fwd2; session 14's v14 forward raced on one P buffer).
# GPU suite first (a wrong result stops the call), then A/B against main (Hopper bf16, two
# alternating rounds; portable bf16 at one shape), then ncu of both forward kernels. The same-run
# comparison with the compositions is call_fwd2b.sh, on the warm machine.
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/fwd2/dualkv_cuda_tests > $OUT/tests_fwd2.txt 2>&1; rc=$?; echo "tests rc=$rc at $SECONDS s" >> $LOG
grep -E "FAILED|tests ran|PASSED" $OUT/tests_fwd2.txt | tail -8 >> $LOG
[ $rc -ne 0 ] && exit 1
timeout 150 bash exp/run_bins.sh "main fwd2" 28x4096,28x16384,16x65536
for v in main fwd2; do
  echo "== portable $v" >> $LOG
  exp-bin/$v/dualkv_bench --kernel-family portable --configs 28x16384 --dtype bf16 2>&1 | sed -n "/^config/,/^$/p" | head -3 >> $LOG
done
for v in main fwd2; do
  echo "== ncu $v" >> $LOG
  timeout 90 ncu --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
    --kernel-name regex:"forward_kernel" --launch-skip 2 --launch-count 2 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 2>&1 | grep -E "^  [a-z_]+.*\(|^\s+(gpu__|sm__|smsp__)" >> $LOG
done
echo "done at $SECONDS s" >> $LOG
