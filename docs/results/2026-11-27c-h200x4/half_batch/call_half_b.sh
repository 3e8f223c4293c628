#!/bin/bash
# Session 26, issue 14: the second call of call_half_a.sh's pair, on the same warm machine. Waits
# for the N-copy FlashAttention step that call_half_a.sh started, then collects it.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log_b.txt
while [ $SECONDS -lt 585 ] && [ ! -f /tmp/i14/flash_rc ]; do sleep 5; done
echo "call b at $SECONDS s ($(date +%T)); flash_rc: $(cat /tmp/i14/flash_rc 2>/dev/null)" >> $LOG
grep -E "^ +[0-9]+ +[0-9]+ |rror" /tmp/i14/half_flash_ncopy.log | tail -4 >> $LOG
cp -r /tmp/i14/half_flash_ncopy /tmp/i14/half_flash_ncopy.log $OUT/ 2>/dev/null
