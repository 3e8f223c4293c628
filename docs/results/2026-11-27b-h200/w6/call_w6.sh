#!/bin/bash
# Session 25, one H200 (issue 11): w6 (w6.patch) = w4's alternating lock-step walk, with each
# step's record (segment, begin, segment end, head | last) written by the producer to a 16-slot
# shared-memory ring one step ahead: record i + 1 before step i's Q stage arrives, so the consumers
# read it right after their Q wait and have the next step's bounds before its wait, as main's walk
# does, with no walk in their registers; the dQ warp reads the records too. w6m (w6m.patch) = the
# same records on main's walk order. GPU suites, racecheck and synccheck on the Hopper backward
# sanitizer tests, ncu with the clock left alone at (28, 16K), then three alternating rounds (main,
# w6, w6m) at three design shapes and the step's ragged shape with nvidia-smi sampling.
# Binaries: exp-xz/s25f.tar.xz (exp-bin/s23 = main, exp-bin/w6, exp-bin/w6m).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
tar xJf exp-xz/s25f.tar.xz
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
for v in w6 w6m; do
  timeout 240 exp-bin/$v/dualkv_cuda_tests --gtest_brief=1 > /tmp/suite_$v.txt 2>&1
  echo "suite $v rc $? at $SECONDS s: $(tail -1 /tmp/suite_$v.txt)" >> $LOG
  grep -E "FAILED|Failure" /tmp/suite_$v.txt | head -20 >> $LOG
done
for tool in racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 exp-bin/w6/dualkv_cuda_tests \
    --gtest_filter='*Sanitizer*BackwardHopper*' --gtest_brief=1 > /tmp/sanitizer_$tool.txt 2>&1
  echo "w6 $tool rc=$? at $SECONDS s: $(grep -h 'ERROR SUMMARY' /tmp/sanitizer_$tool.txt | tail -1)" >> $LOG
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for v in s23 w6 w6m; do
  echo "== $v" >> $OUT/ncu.txt
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:'backward_kv_kernel' --launch-skip 4 \
    --launch-count 1 exp-bin/$v/dualkv_bench --configs 28x16384 --dtype bf16 --kernel-family hopper --repeats 10 \
    --warmups 0 2>&1 | grep -E "duration|cycles_elapsed|inst_executed|hmma|dram__|hit_rate" >> $OUT/ncu.txt
done
echo "ncu done at $SECONDS s" >> $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
for round in 1 2 3; do
  for v in s23 w6 w6m; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --configs 28x4096,28x16384,16x65536,$STEP0 --dtype bf16 --kernel-family hopper 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
