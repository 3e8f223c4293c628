#!/usr/bin/env bash
# The test command: builds the CPU library and runs the C++ suite, then the Python suite when
# PyTorch is installed (required under CI=true). On a machine with a GPU, also builds and runs the
# GPU suite (DUALKV_DEVICE=cpu skips it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/build_env.sh"

dualkv_build cpu dualkv_tests dualkv_demo
ctest --test-dir "$root/build/cpu" --output-on-failure -j "$(nproc)" -LE gpu

if [[ "$(dualkv_pick_preset)" == cuda ]]; then
  dualkv_build cuda dualkv_cuda_tests
  ctest --test-dir "$root/build/cuda" --output-on-failure -L gpu
fi

if python3 -c "import torch" >/dev/null 2>&1; then
  "$root/scripts/python_tests.sh"
elif [[ "${CI:-}" == true ]]; then
  echo "test.sh: PyTorch is required under CI (pip install -r python/requirements-ci.txt)" >&2
  exit 1
else
  echo "test.sh: Python suite skipped: PyTorch not installed (pip install -r python/requirements-ci.txt)"
fi
