#!/bin/bash
# Session 32, one GPU: the backward follows torch.use_deterministic_algorithms(True)
# (python/csrc/attention_ops.cpp). The extension built here from this tree;
# tests/python/test_op_attention.py (the new test among them), then the other CUDA Python tests;
# then, as a control, the new test against the extension rebuilt with main's attention_ops.cpp.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
build() {
  python3 -m pip install . --no-build-isolation --no-deps -C build-dir=build/skbuild -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build$1.log 2>&1
  echo "extension build$1 rc $? at $SECONDS s" >> $LOG
}
build
timeout 300 python3 -m pytest -q -rs tests/python/test_op_attention.py > $OUT/attention_py.txt 2>&1
echo "attention op tests rc $? at $SECONDS s: $(tail -1 $OUT/attention_py.txt)" >> $LOG
timeout 200 python3 -m pytest -q -rs tests/python -k "cuda and not test_op_attention" > $OUT/cuda_py.txt 2>&1
echo "CUDA Python tests rc $? at $SECONDS s: $(tail -1 $OUT/cuda_py.txt)" >> $LOG
cp exp-xz/attention_ops_main.cpp python/csrc/attention_ops.cpp  # main's, carried in the ignored exp-xz/
build _control
timeout 120 python3 -m pytest -q -rs tests/python/test_op_attention.py -k deterministic_algorithms > $OUT/control_py.txt 2>&1
echo "control (main's attention_ops.cpp) rc $?: $(tail -1 $OUT/control_py.txt)" >> $LOG
