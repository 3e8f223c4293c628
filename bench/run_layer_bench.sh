#!/usr/bin/env bash
# On a GPU machine: installs the extension (sm90), runs the CUDA Python tests, then the Qwen3-8B
# layer benchmark.
#
#   bench/run_layer_bench.sh [--quick] [other bench/layer_benchmark.py flags]
#
# Needs the CuTe/CUTLASS headers in .cutlass/include or .cutlass.
# Results go to $OUT when it is set, else build/layer-bench: build.log, tests.log,
# bench.log, layer_benchmark.json, layer_benchmark.txt, layer_speedup.png. The benchmark runs
# even when a test fails; the script then exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
results=${OUT:-$root/build/layer-bench}
mkdir -p "$results"
export PYTHONUNBUFFERED=1
cd "$root"
if [[ -f .cutlass/include/cute/tensor.hpp ]]; then cutlass=$root/.cutlass/include; else cutlass=$root/.cutlass; fi

python3 -m pip install . --no-build-isolation --no-deps \
  -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR="$cutlass" \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -C build.tool-args=-j16 2>&1 | tee "$results/build.log"

# Every test whose id names CUDA: test_models_cuda.py and the op tests' cuda parametrisations.
tests_status=0
python3 -m pytest -q -rs tests/python -k cuda 2>&1 | tee "$results/tests.log" || tests_status=$?

python3 bench/layer_benchmark.py --out "$results" "$@" 2>&1 | tee "$results/bench.log"
exit "$tests_status"
