#!/usr/bin/env bash
# Runs the GPU suite, then its sanitizer subset under compute-sanitizer memcheck, racecheck and synccheck.
#
#   tests/cuda/run_gpu_tests.sh [BUILD_DIR]        (default build/cuda)
#
# The suite runs as DUALKV_GPU_TEST_SHARDS gtest shards side by side on the one GPU (default: the
# CPU count, at most 8): most of a case's time is its CPU references, so one process leaves the
# GPU idle (about 130 s for the whole suite on 8 shards of a 16-core H200 host, against more than
# 300 s in one process). Each shard's failures are printed with their messages.
# Exits non-zero if any test fails or a sanitizer reports an error; runs every step regardless.
set -uo pipefail
build=${1:-build/cuda}
tests=$build/tests/cuda/dualkv_cuda_tests
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
shards=${DUALKV_GPU_TEST_SHARDS:-$(($(nproc) < 8 ? $(nproc) : 8))}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
status=0

echo "== GPU suite ($shards shards)"
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$tests" --gtest_brief=1 >"$logs/shard$i.log" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < shards; ++i)); do
  if ! wait "${pids[$i]}"; then
    status=1
    echo "-- shard $i of $shards failed:"
    cat "$logs/shard$i.log"
  fi
done
awk '/^\[  PASSED  \]/ { passed += $4 } END { print "passed: " passed + 0 " tests" }' "$logs"/shard*.log

for tool in memcheck racecheck synccheck; do
  echo "== compute-sanitizer --tool $tool (sanitizer subset)"
  "$sanitizer" --tool "$tool" --error-exitcode 3 "$tests" --gtest_filter='*Sanitizer*:CudaPlans.CachedAndShortLivedPlansGiveTheSameBits' --gtest_brief=1 || status=1
done
exit $status
