#!/bin/bash
# Prepared in session 23, not run (issue 11): the rest of FA4's step order on top of the kept one.
# h2new.patch: dK waited for at the end of every step at head_dim 128 too (kDrainDkEachStep; FA4
# drains there; session 21's h2 lost 2-4% on the old order). No spills at head_dim 128 (the drain
# frees the registers the early LSE had taken). h2p1.patch: h2new + LSE and D read as 8-byte pairs
# (p1new of ../order3/), FA4's statistics loads. Then ncu's metrics of main's KV kernel at
# (28, 16K), to set beside FA4 at our tile (../fa4_q64/): per-step cycles after the kept change.
# Binaries: exp-xz/s24a.tar.xz (exp-bin/s23 = main at 576a157's kernels, exp-bin/h2new with its
# tests, exp-bin/h2p1), built on the CPU machine at the end of session 23; if the archive is gone,
# rebuild: main's dualkv_bench into exp-bin/s23, main + h2new.patch into exp-bin/h2new (bench and
# dualkv_cuda_tests), main + h2p1.patch into exp-bin/h2p1.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
tar xJf exp-xz/s24a.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
T=/tmp/s24/tests; mkdir -p $T
timeout 240 exp-bin/h2new/dualkv_cuda_tests --gtest_brief=1 > $T/suite_h2new.txt 2>&1
echo "suite h2new rc $? at $SECONDS s: $(tail -1 $T/suite_h2new.txt)" >> $LOG
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/h2new/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > $T/sanitizer_$tool.txt 2>&1
  echo "$tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' $T/sanitizer_$tool.txt | tail -1)" >> $LOG
done
tar czf $OUT/tests.tgz -C /tmp/s24 tests
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
configs=28x4096,28x16384,16x65536,$STEP0
for pass in "1 bf16" "1 fp16" "2 bf16"; do
  set -- $pass
  for variant in s23 h2new h2p1; do
    echo "== round $1 $2 $variant" >> $OUT/ab.txt
    exp-bin/$variant/dualkv_bench --configs $configs --dtype $2 --kernel-family hopper 2>&1 | grep -E "^N[0-9]" | tail -4 >> $OUT/ab.txt
  done
  echo "round $1 $2 done at $SECONDS s" >> $LOG
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,lts__t_sector_hit_rate.pct
timeout 150 ncu --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 1 --launch-count 1 \
  exp-bin/s23/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 --warmups 0 \
  > $OUT/metrics_s23.txt 2>&1; echo "s23 metrics rc $? at $SECONDS s" >> $LOG
