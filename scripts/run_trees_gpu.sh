#!/usr/bin/env bash
# Tree layouts on one H100/H200 in one device session: the GPU suite's tree cases (both kernel
# families, fp16/bf16, head dims 64, 128 and 256, both backward modes) and their sanitizer runs, the
# Python tree tests through the CUDA kernels, then the tree benchmark (attention and the Qwen3-8B
# step). Every log and result goes to $OUT when it is set, else build/trees-gpu.
#
#   scripts/run_trees_gpu.sh [tests|bench|all]        (default all)
#
# DUALKV_BUILD_DIR names a CMake build of the cuda-sm90 preset holding dualkv_cuda_tests (built
# here when it is missing). Where .whl/ holds the FlashAttention-4 wheels (scripts/fetch_fa4_wheels.sh),
# they are installed first so that the benchmark's flex_fa4 runs; otherwise it is reported failed.
# Runs every step and exits non-zero if any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
build=${DUALKV_BUILD_DIR:-$root/build/cuda-sm90}
results=${OUT:-$root/build/trees-gpu}
mkdir -p "$results"
export PYTHONUNBUFFERED=1
status=0

if [[ "$what" == tests || "$what" == all ]]; then
  if [[ ! -x "$build/tests/cuda/dualkv_cuda_tests" ]]; then
    cutlass=$(python3 -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))")
    cmake -S "$root" --preset cuda-sm90 -DDUALKV_CUTLASS_INCLUDE_DIR="$cutlass" >/dev/null
    cmake --build "$build" -j "$(nproc)" --target dualkv_cuda_tests 2>&1 | tail -3
  fi
  tests=$build/tests/cuda/dualkv_cuda_tests
  echo "== GPU suite, tree cases" | tee "$results/gpu_trees.log"
  "$tests" --gtest_filter='*tree*:*Tree*' --gtest_brief=1 2>&1 | tee -a "$results/gpu_trees.log" || status=1
  echo "== GPU suite, two-level cases (unchanged behaviour)" | tee "$results/gpu_two_level.log"
  "$tests" --gtest_filter='-*tree*:*Tree*' --gtest_brief=1 2>&1 | tee -a "$results/gpu_two_level.log" || status=1
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool, tree cases" | tee -a "$results/sanitizer_trees.log"
    "$sanitizer" --tool "$tool" --error-exitcode 3 "$tests" --gtest_filter='CudaSanitizer.Tree*' --gtest_brief=1 \
      2>&1 | tee -a "$results/sanitizer_trees.log" || status=1
  done
  echo "== Python tree tests on CUDA" | tee "$results/python_trees.log"
  DUALKV_CUDA=1 python3 -m pip install -q --no-build-isolation --no-deps --upgrade --target "$root/build/python-site-cuda" \
    "$root" 2>&1 | tail -3 | tee -a "$results/python_trees.log"
  PYTHONPATH="$root/build/python-site-cuda" python3 -m pytest -q "$root/tests/python/test_trees.py" 2>&1 \
    | tee -a "$results/python_trees.log" || status=1
fi

if [[ "$what" == bench || "$what" == all ]]; then
  export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=${FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED:-1}
  export FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=${FLASH_ATTENTION_CUTE_DSL_CACHE_DIR:-$root/build/fa4-cache}
  if [ -d "$root/.whl" ]; then
    if fa4_env=$("$root/bench/install_fa4_wheels.sh"); then eval "$fa4_env"; fi
  fi
  site=$root/build/python-site-cuda
  if [[ ! -d "$site/dualkv" ]]; then
    DUALKV_CUDA=1 python3 -m pip install -q --no-build-isolation --no-deps --upgrade --target "$site" "$root"
  fi
  PYTHONPATH="$site" python3 "$root/bench/run_tree_bench.py" --out "$results/bench" 2>&1 | tee "$results/bench.log" \
    || status=1
fi
exit $status
