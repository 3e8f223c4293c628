#!/usr/bin/env bash
# Runs dualkv_bench and the PyTorch baselines in one device session and prints one table.
#
#   bench/run_gpu_bench.sh [--configs all|NxP,...] [--dtype fp16|bf16|both]
#
# Both flags go to both programs. DUALKV_BUILD_DIR names the CMake build holding
# bench/dualkv_bench (default build/h3c); results go to $OUT (the device tool's output folder)
# or build/bench-results: dualkv.json, baselines.json, table.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DUALKV_BUILD_DIR:-$root/build/h3c}
results=${OUT:-$root/build/bench-results}
mkdir -p "$results"
export PYTHONUNBUFFERED=1

"$build/bench/dualkv_bench" --json "$results/dualkv.json" "$@"
python3 "$root/bench/baselines.py" --json "$results/baselines.json" "$@"
python3 "$root/bench/report_table.py" "$results/dualkv.json" "$results/baselines.json" | tee "$results/table.txt"
