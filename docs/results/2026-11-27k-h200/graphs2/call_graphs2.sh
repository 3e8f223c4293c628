#!/bin/bash
# Session 32, one GPU: tests/python/test_op_cuda_graphs.py after two edits to the test (outputs
# returned detached, the empty-graph warning of the refused capture filtered) and with a new test
# of torch.compile(mode="reduce-overhead"); the extension built here from this tree.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
timeout 400 python3 -m pytest -q -rs -s tests/python/test_op_cuda_graphs.py > $OUT/graphs_py.txt 2>&1
echo "graph tests rc $? at $SECONDS s: $(tail -1 $OUT/graphs_py.txt)" >> $LOG
