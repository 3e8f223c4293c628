#!/bin/bash
# Session 31, one GPU (issues 11 and 12), main's kernels (session 29's, unchanged since): the
# Qwen3-8B decoder-layer benchmark (bench/run_layer_bench.sh --quick: builds the extension on the
# device from this tree, runs the CUDA Python tests, then the layer benchmark), then on the same
# install session 21's one-GPU step at P = 8K, N = 32 (FlexAttention compiled for the step's
# length, --max-fit 32), as session 30 ran it.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $OUT/gpu.txt
bash bench/run_layer_bench.sh --quick > $OUT/layer_run.txt 2>&1
echo "layer benchmark rc $? at $SECONDS s" >> $LOG
tail -3 $OUT/tests.log >> $LOG
common="--layers 36 --prompt-lengths 8192 --responses 32 --max-fit 32 --warmup 1 --repeats 2 --methods dualkv flex_packed --fuse-elementwise"
timeout 360 python3 bench/run_step_bench.py $common --out $OUT/step > $OUT/step.log 2>&1
echo "step rc $? at $SECONDS s" >> $LOG; grep -E "^ +[0-9]+ +[0-9]+ |rror" $OUT/step.log >> $LOG
