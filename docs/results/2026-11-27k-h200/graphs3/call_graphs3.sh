#!/bin/bash
# Session 32, one GPU: the attention operators tagged cudagraph_unsafe (python/csrc/library_cpu.cpp).
# The extension built here from this tree; tests/python/test_op_cuda_graphs.py (now with
# torch.compile(mode="reduce-overhead") alternating two layouts of the same shapes) and
# tests/python/test_op_registration.py, then the other CUDA Python tests.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
timeout 300 python3 -m pytest -q -rs tests/python/test_op_cuda_graphs.py tests/python/test_op_registration.py > $OUT/graphs_py.txt 2>&1
echo "graph and registration tests rc $? at $SECONDS s: $(tail -1 $OUT/graphs_py.txt)" >> $LOG
timeout 300 python3 -m pytest -q -rs tests/python -k "cuda and not graphs" > $OUT/cuda_py.txt 2>&1
echo "CUDA Python tests rc $? at $SECONDS s: $(tail -1 $OUT/cuda_py.txt)" >> $LOG
