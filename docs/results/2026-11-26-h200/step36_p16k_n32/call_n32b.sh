#!/bin/bash
# Session 13, call D (the same warm machine, dualkv installed by call C): the 36-layer step
# benchmark at P = 16K, N = 32 for the N-copy FlashAttention baseline (fit search up to 4: 8 did not
# fit a step at N = 16, call B).
cd "$(dirname "$0")/.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
python3 -c "import dualkv; print('dualkv', dualkv.cuda_compiled())" >> $LOG 2>&1
timeout 560 python3 bench/run_step_bench.py --layers 36 --prompt-lengths 16384 --responses 32 --max-fit 4 \
  --warmup 1 --repeats 1 --methods flash_ncopy --out $OUT/step_p16k_n32_flash > $OUT/step_p16k_n32_flash.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG
tail -12 $OUT/step_p16k_n32_flash.log >> $LOG
