#!/bin/bash
# Session 33, the same warm H200 right after call_order.sh (its extension still installed): the two
# orders again, FlexAttention first this time, so that neither order always runs on the cooler
# machine.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -c "import dualkv; assert dualkv.cuda_compiled()" > $LOG 2>&1 || { echo "no dualkv build on this machine" >> $LOG; exit 1; }
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --fuse-elementwise"
for order in "flex_packed dualkv" "dualkv flex_packed"; do
  name=${order// /_}
  nvidia-smi --query-gpu=temperature.gpu --format=csv,noheader >> $LOG
  timeout 235 python3 bench/run_step_bench.py $common --methods $order --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$order rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/$name.log >> $LOG
done
