#!/bin/bash
# Session 32, one GPU: dualkv.attention casts q, k, v to the autocast dtype under torch.autocast
# (python/dualkv/_attention.py; the integrations' own cast removed). The extension built here
# from this tree; tests/python/test_op_attention.py, then every CUDA Python test.
cd "$(dirname "$0")/../../../.."
LOG=$OUT/log.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv > $LOG
python3 -m pip install . --no-build-isolation --no-deps -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 -C build.tool-args=-j16 > $OUT/build.log 2>&1
echo "extension build rc $? at $SECONDS s" >> $LOG
timeout 120 python3 -m pytest -q -rs tests/python/test_op_attention.py > $OUT/attention_py.txt 2>&1
echo "attention op tests rc $? at $SECONDS s: $(tail -1 $OUT/attention_py.txt)" >> $LOG
timeout 200 python3 -m pytest -q -rs tests/python -k "cuda and not test_op_attention" > $OUT/cuda_py.txt 2>&1
echo "CUDA Python tests rc $? at $SECONDS s: $(tail -1 $OUT/cuda_py.txt)" >> $LOG
