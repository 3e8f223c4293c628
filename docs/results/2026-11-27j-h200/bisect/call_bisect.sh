#!/bin/bash
# Session 31, one GPU: why s31a's forward is 3-7% slower at every shape, both families, although
# its plan equals main's at the design shapes. s31b: KeyRange 16-byte aligned, the poison rows'
# coordinates rebuilt in the rare branch instead of kept live; s31c: s31b without the sanitize and
# poison code (not NaN-safe, measurement only). ncu (instructions, cycles) of the forward kernels
# of s30main and s31b at (28, 16K) and the portable forward at (28, 4K); SASS of the Hopper bf16
# d128 forward of both; then alternating rounds of all four.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
SUMMARY=docs/results/2026-11-27-h200/clock2/clock_summary.py
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
STEP0=8192:1312/2038/2027/1006/546/1504/1694/1866/917/1473/515/1128/1727/1788/607/1495/743/724/528/789/2029/411/1931/418/1420/1115/666/1525/514/901/308/481
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
for v in s30main s31b; do
  for family in hopper portable; do
    config=28x16384; [ $family = portable ] && config=28x4096
    echo "== $v $family $config" >> $OUT/ncu.txt
    timeout 100 ncu --clock-control none --metrics $M --kernel-name regex:forward_kernel \
      --launch-skip 3 --launch-count 1 exp-bin/$v/dualkv_bench --configs $config --dtype bf16 \
      --kernel-family $family --repeats 10 --warmups 0 2>&1 \
      | grep -E "forward_kernel|duration|cycles_elapsed|inst_executed|hmma|ERR" >> $OUT/ncu.txt
  done
  cuobjdump -sass exp-bin/$v/dualkv_bench > /tmp/all_$v.sass 2>/dev/null
  python3 - "$v" <<'PY' >> $OUT/sass_summary.txt
import re, sys
v = sys.argv[1]
text = open(f"/tmp/all_{v}.sass").read()
for func in re.split(r"\n\s*Function : ", text)[1:]:
    name = func.split("\n", 1)[0].strip()
    if "forward_kernel" not in name: continue
    n = len(re.findall(r"/\*[0-9a-f]{4,}\*/", func))
    print(v, n, "LDL" in func, name[:160])
PY
done
echo "ncu and sass done at $SECONDS s" >> $LOG
for round in 1 2 d64 portable; do
  configs=$STEP0,28x4096,28x16384; head=128; family=hopper
  [ $round = d64 ] && head=64 && configs=$STEP0,28x4096
  [ $round = portable ] && family=portable && configs=$STEP0,28x4096
  for v in s30main s31a s31b s31c; do
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi.csv &
    smi=$!
    begin=$(date +%s.%N)
    echo "== round $round $v" >> $OUT/ab.txt
    exp-bin/$v/dualkv_bench --head-dim $head --configs $configs --dtype bf16 --kernel-family $family 2>&1 \
      | grep -E "^N[0-9]" | awk '!seen[$0]++' >> $OUT/ab.txt
    end=$(date +%s.%N)
    kill $smi
    echo "window $begin $end" > /tmp/window.txt
    python3 $SUMMARY "round $round $v" /tmp/smi.csv /tmp/window.txt >> $OUT/ab.txt
  done
  echo "round $round done at $SECONDS s" >> $LOG
done
