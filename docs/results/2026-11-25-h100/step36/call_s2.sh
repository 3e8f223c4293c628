#!/bin/bash
# Session 11, call S2 (right after S1, on the same warm machine with dualkv installed): the 36-layer
# step benchmark at P = 8K, N = 32 for the two baselines.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -c "import dualkv; print('dualkv', dualkv.cuda_compiled())" >> $LOG 2>&1
for m in flex_packed flash_ncopy; do
  timeout 280 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 \
    --warmup 1 --repeats 1 --methods $m --out $OUT/step_$m > /tmp/step_$m.log 2>&1
  echo "step $m rc $? at $SECONDS s" >> $LOG
  tail -15 /tmp/step_$m.log >> $LOG
done
