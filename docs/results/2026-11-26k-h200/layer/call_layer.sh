#!/bin/bash
# Session 23, one H200 (issue 11 item 4): the Qwen3-8B decoder-layer benchmark with today's Hopper
# kernels (main at e5a2551 or later; session 21's backward plan), after the CUDA Python tests:
# bench/run_layer_bench.sh --quick builds the extension on the device (carry .cutlass).
cd "$(dirname "$0")/../../../.."
bash bench/run_layer_bench.sh --quick
