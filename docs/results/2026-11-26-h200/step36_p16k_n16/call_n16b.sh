#!/bin/bash
# Session 13, call B (the same warm machine, dualkv installed by call A): the 36-layer step
# benchmark at P = 16K, N = 16 for the N-copy FlashAttention baseline.
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -c "import dualkv; print('dualkv', dualkv.cuda_compiled())" >> $LOG 2>&1
timeout 560 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 16384 --responses 16 --max-fit 16 \
  --warmup 1 --repeats 1 --methods flash_ncopy --out $OUT/step_p16k_n16_flash > $OUT/step_p16k_n16_flash.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
tail -12 $OUT/step_p16k_n16_flash.log >> $LOG
