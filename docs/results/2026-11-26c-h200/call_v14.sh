#!/bin/bash
# Prepared in session 14 for the next session's first device call: the branch exp/dv-early
# (binaries exp-bin/v14: the backward issues dV = P^T dO before waiting for dP; the forward keeps
# P(n-1) V(n-1) in flight under the softmax of block n with a lazy reference maximum). GPU suite
# on v14 first (a wrong result stops the call), then an A/B against main, bf16 and fp16, two
# alternating rounds each, then ncu of both KV/forward kernels at (28, 16K).
# Pack first on the CPU machine: exp/pack.sh main v14 (then drop main's test binary from exp-xz).
cd "$(dirname "$0")/.."
bash exp/unpack.sh
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 exp-bin/v14/dualkv_cuda_tests > $OUT/tests_v14.txt 2>&1; rc=$?; echo "tests rc=$rc at $SECONDS s" >> $LOG
grep -E "FAILED|tests ran|PASSED" $OUT/tests_v14.txt | tail -8 >> $LOG
[ $rc -ne 0 ] && exit 1
timeout 200 bash exp/run_bins.sh "main v14" 28x4096,28x16384,16x65536
sed -i 's/--dtype bf16/--dtype fp16/' exp/run_bins.sh
echo "== fp16" >> $LOG
timeout 200 bash exp/run_bins.sh "main v14" 28x4096,28x16384,16x65536
for v in main v14; do
  echo "== ncu $v" >> $LOG
  timeout 120 ncu --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    --kernel-name regex:"forward_kernel|backward_kv" --launch-skip 4 --launch-count 4 \
    exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x16384 --dtype bf16 2>&1 | grep -E "^  [a-z_]+.*\(|^\s+(gpu__|sm__|smsp__)" >> $LOG
done
