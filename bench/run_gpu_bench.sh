#!/usr/bin/env bash
# Runs dualkv_bench (Hopper and portable kernel families) and the PyTorch baselines in one device
# session and prints one table.
#
#   bench/run_gpu_bench.sh [--configs all|NxP,...] [--dtype fp16|bf16|both]
#
# Both flags go to all three programs. DUALKV_BUILD_DIR names the CMake build holding
# bench/dualkv_bench (default build/cuda); results go to $OUT when it is set, else
# build/bench-results: dualkv_hopper.json, dualkv_portable.json, baselines.json, table.txt.
# Where .whl/ holds the FlashAttention-4 wheels (scripts/fetch_fa4_wheels.sh fetches them), they are
# installed first so that fa4_composition runs; otherwise the table says "not installed".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DUALKV_BUILD_DIR:-$root/build/cuda}
results=${OUT:-$root/build/bench-results}
mkdir -p "$results"
export PYTHONUNBUFFERED=1

# FA4 JIT-compiles its kernels on first use; keep them in build/ for the next run.
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=${FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED:-1}
export FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=${FLASH_ATTENTION_CUTE_DSL_CACHE_DIR:-$root/build/fa4-cache}
if [ -d "$root/.whl" ]; then
  if fa4_env=$("$root/bench/install_fa4_wheels.sh"); then
    eval "$fa4_env"
  else
    echo "installing the FA4 wheels failed; fa4_composition will be reported as not installed" >&2
  fi
fi

for family in hopper portable; do
  "$build/bench/dualkv_bench" --kernel-family "$family" --json "$results/dualkv_$family.json" "$@"
done
python3 "$root/bench/baselines.py" --json "$results/baselines.json" "$@"
python3 "$root/bench/report_table.py" "$results/dualkv_hopper.json" "$results/dualkv_portable.json" \
  "$results/baselines.json" | tee "$results/table.txt"
