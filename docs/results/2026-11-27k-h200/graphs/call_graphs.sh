#!/bin/bash
# Session 32, one GPU: CUDA graph capture. Plans a captured call used are now kept until the
# process exits, and releasing a layout's plans runs in the relaxed capture mode. The C++ GPU suite
# (binary built on the CPU machine from this tree, exp-bin/graphs) and, as a control, the CudaPlans
# tests of a binary without the change (exp-bin/nofix: main's src/cuda/common/device_plan.cpp
# with this tree's tests); compute-sanitizer memcheck on CudaPlans; then the Python extension built
# here and tests/python/test_op_cuda_graphs.py with the other CUDA Python tests.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 - <<'PY'
import lzma, tarfile
for name in ("graphs", "nofix"):
    with lzma.open(f"exp-xz/{name}.tar.xz") as xz, tarfile.open(fileobj=xz) as tar:
        tar.extractall(".")
PY
timeout 300 exp-bin/graphs/dualkv_cuda_tests --gtest_brief=1 > $OUT/suite.txt 2>&1
echo "suite rc $? at $SECONDS s: $(tail -1 $OUT/suite.txt)" >> $LOG
grep -E "FAILED|Failure" $OUT/suite.txt | head -20 >> $LOG
timeout 120 exp-bin/graphs/dualkv_cuda_tests --gtest_filter='CudaPlans.*' > $OUT/plans.txt 2>&1
echo "CudaPlans rc $?: $(tail -1 $OUT/plans.txt)" >> $LOG
timeout 120 exp-bin/nofix/dualkv_cuda_tests --gtest_filter='CudaPlans.*' > $OUT/plans_nofix.txt 2>&1
echo "CudaPlans without the change rc $?: $(grep -E '^\[  (FAILED|PASSED)' $OUT/plans_nofix.txt | tr '\n' ' ')" >> $LOG
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 exp-bin/graphs/dualkv_cuda_tests \
  --gtest_filter='CudaPlans.*' > $OUT/memcheck.txt 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' $OUT/memcheck.txt | tail -1)" >> $LOG
rm -rf exp-bin
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
timeout 300 python3 -m pytest -q -rs tests/python/test_op_cuda_graphs.py > $OUT/graphs_py.txt 2>&1
echo "graph tests rc $?: $(tail -1 $OUT/graphs_py.txt)" >> $LOG
timeout 400 python3 -m pytest -q -rs tests/python -k cuda > $OUT/cuda_py.txt 2>&1
echo "CUDA Python tests rc $? at $SECONDS s: $(tail -1 $OUT/cuda_py.txt)" >> $LOG
