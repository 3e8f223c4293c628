#!/bin/bash
# Session 11, call S1: (a) in the background, install the PyTorch extension (sm90); (b) meanwhile,
# per-instruction stall sampling of the backward KV kernel, main's (cur) against exp/v80f, at
# (28, 4K); (c) the 36-layer Qwen3-8B step benchmark at P = 8K, N = 32 for dualkv.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
( python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j14 > /tmp/build.log 2>&1; echo "build rc $? at $SECONDS s" >> $LOG; tail -3 /tmp/build.log >> $LOG ) &
for v in cur v80f; do
  timeout 150 ncu --kernel-name regex:backward_kv --launch-skip 2 --launch-count 1 --section WarpStateStats --section SourceCounters \
      -f -o /tmp/$v exp-bin/$v/dualkv_bench --kernel-family hopper --configs 28x4096 --dtype bf16 > /tmp/ncu_$v.log 2>&1
  ncu -i /tmp/$v.ncu-rep --page source --csv --print-source sass > /tmp/source_$v.csv 2>&1
    python3 - /tmp/source_$v.csv > $OUT/stalls_$v.txt <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and r[0] == "# Address" or (r and "Source" in r))
cols = rows[head]
data = [dict(zip(cols, r)) for r in rows[head + 1:] if len(r) == len(cols)]
key = next(c for c in cols if c.startswith("Warp Stall Sampling (All"))
total = sum(float(d[key] or 0) for d in data)
print("columns:", [c for c in cols if "Stall" in c or "stall" in c][:40])
for d in sorted(data, key=lambda d: -float(d[key] or 0))[:45]:
    print(f"{float(d[key] or 0) / total * 100:6.2f}%  {d.get('Address', '')}  {d.get('Source', '')[:90]}")
PY
  ncu -i /tmp/$v.ncu-rep --page details >> $OUT/stalls_$v.txt 2>&1
  echo "stalls $v done at $SECONDS s" >> $LOG
done
wait
python3 -c "import dualkv; print('dualkv', dualkv.cuda_compiled())" >> $LOG 2>&1
timeout 300 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 \
  --warmup 1 --repeats 1 --methods dualkv --out $OUT/step_dualkv > $OUT/step_dualkv.log 2>&1
echo "step dualkv rc $? at $SECONDS s" >> $LOG
tail -12 $OUT/step_dualkv.log >> $LOG
