#!/usr/bin/env bash
# Runs the GPU suite, then its sanitizer subset under compute-sanitizer memcheck, racecheck and synccheck.
#
#   tests/cuda/run_gpu_tests.sh [BUILD_DIR]        (default build/cuda)
#
# Exits non-zero if any test fails or a sanitizer reports an error; runs every step regardless.
set -uo pipefail
build=${1:-build/cuda}
tests=$build/tests/cuda/dualkv_cuda_tests
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0

echo "== GPU suite"
"$tests" --gtest_brief=1 || status=1
for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer --tool $tool (sanitizer subset)"
  "$sanitizer" --tool "$tool" --error-exitcode 3 "$tests" --gtest_filter='*Sanitizer*:CudaPlans.CachedAndShortLivedPlansGiveTheSameBits' --gtest_brief=1 || status=1
done
exit $status
