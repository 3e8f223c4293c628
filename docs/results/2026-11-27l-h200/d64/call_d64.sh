#!/bin/bash
# Session 33, one H200 (issue 11 item 2): head_dim 64's atomic backward without local memory.
# `new` takes the consumers' operand descriptors from the warpgroup's first thread (uniform
# registers) and recomputes the masking coordinates of boundary steps from an index hidden from
# hoisting, for head_dim 64 only (config.cuh kLeanIndexRegisters); head_dim 128's SASS is
# byte-identical to main's. ptxas: head_dim 64 atomic backward 8 B spilled (2 LDL + 1 STL in the
# step loop) -> none. Binaries: exp-xz/s33a.tar.xz (exp-bin/main = main at d2e069b, exp-bin/new).
# GPU suite and the sanitizers on `new`, then both under ncu at the locked base clock (3 launches
# of the KV kernel per shape), then alternating free-clock rounds.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
python3 -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('exp-xz/s33a.tar.xz')).extractall('.')"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
timeout 200 exp-bin/new/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite new rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/new/dualkv_cuda_tests \
    --gtest_filter='CudaSanitizer.BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "new $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_local_op_st.sum
for config in 28x4096 28x16384 16x65536 $STEP0; do
  for v in main new; do
    echo "== $v ${config:0:12}" >> $OUT/ncu.txt
    timeout 60 ncu --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 2 --launch-count 3 \
      exp-bin/$v/dualkv_bench --head-dim 64 --configs $config --dtype bf16 --kernel-family hopper \
      --repeats 10 --warmups 0 2>&1 | grep -E "duration|inst_executed|local|ERR" >> $OUT/ncu.txt
  done
done
echo "ncu done at $SECONDS s" >> $LOG
for round in 1 2; do
  for v in main new; do
    echo "== round $round $v" >> $OUT/ab.txt
    timeout 60 exp-bin/$v/dualkv_bench --head-dim 64 --configs 28x4096,28x16384,16x65536 --dtype bf16 \
      --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
