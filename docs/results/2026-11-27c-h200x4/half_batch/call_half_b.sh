#!/bin/bash
# Session 26, issue 14: the second call of call_half_a.sh's pair (again if need be), on the same
# warm machine. Waits for the N-copy FlashAttention step that call_half_a.sh started and collects
# it; then, with time left in this call, dualkv's step on the same rollouts (whole-group
# micro-batches, a warm-up on the step's first micro-batch).
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log_b.txt
export PYTHONUNBUFFERED=1
while [ $SECONDS -lt 585 ] && [ ! -f /tmp/i14/flash_rc ]; do sleep 5; done
echo "call b at $SECONDS s ($(date +%T)); flash_rc: $(cat /tmp/i14/flash_rc 2>/dev/null)" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/i14/half_flash_ncopy.log | tail -4 >> $LOG
cp -r /tmp/i14/half_flash_ncopy /tmp/i14/half_flash_ncopy.log $OUT/ 2>/dev/null
if [ -f /tmp/i14/flash_rc ] && [ ! -d /tmp/i14/half_dualkv ] && [ $SECONDS -lt 360 ]; then
  timeout $((590 - SECONDS)) torchrun --nproc-per-node 4 bench/run_step_bench.py $(cat /tmp/i14/common) \
    --methods dualkv --warmup-micro-batches 1 --out /tmp/i14/half_dualkv > /tmp/i14/half_dualkv.log 2>&1
  echo "dualkv rc $? at $SECONDS s" >> $LOG
  grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/i14/half_dualkv.log | tail -4 >> $LOG
  cp -r /tmp/i14/half_dualkv.log $OUT/
  cp /tmp/i14/half_dualkv/step_bench.json $OUT/half_dualkv.json 2>/dev/null
fi
