#!/bin/bash
# Session 24, one H200 (issues 11 and 12): the Qwen3-8B decoder-layer benchmark with main's Hopper
# kernels (session 23's kept backward), after the CUDA Python tests: bench/run_layer_bench.sh
# --quick builds the extension on the device (carry .cutlass). Then dualkv's backward at (28, 16K)
# back to back (backward_loop.py) while nvidia-smi samples the clock and power (clock_summary.py):
# the clock the backward holds at the power cap on its own. call_fa4_loop.sh does the same for
# FA4's backward on the same warm machine.
cd "$(dirname "$0")/../../../.."
D=docs/results/2026-11-27-h200/clock2
bash bench/run_layer_bench.sh --quick
echo "layer benchmark rc $? at $SECONDS s" >> $OUT/log.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > /tmp/smi_dualkv.csv &
smi=$!
timeout 120 python3 $D/backward_loop.py --runs 60 > /tmp/run_dualkv.txt 2>&1
echo "backward loop rc $? at $SECONDS s" >> $OUT/log.txt
kill $smi
cat /tmp/run_dualkv.txt >> $OUT/clock.txt
python3 $D/clock_summary.py dualkv /tmp/smi_dualkv.csv /tmp/run_dualkv.txt >> $OUT/clock.txt 2>&1
