#!/bin/bash
# Session 27, 4 H200s: sequence parallelism on GPUs over NCCL, with K/V head replication (SP above
# Hk), which had run only on CPU processes over gloo. Builds the extension on the device (carry
# .cutlass), then runs the Ulysses op on 2 and 4 GPUs against the single-GPU op (bf16, head_dim 64,
# awkward lengths; tests/python/test_distributed_ulysses.py) and the FSDP2 policy update on 2 GPUs
# (SP 1, 2) and 4 GPUs (SP 2, 4 > Hk = 2) against 1 GPU (tests/python/test_training_cuda.py), then
# the other CUDA Python tests while time is left.
cd "$(dirname "$0")/../../../.."
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv > $OUT/gpu.txt
timeout 200 python3 -m pip install . --no-build-isolation --no-deps \
  -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR=$PWD/.cutlass/include -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -C build.tool-args=-j60 > $OUT/build.log 2>&1
echo "build rc $? at $SECONDS s" > $OUT/log.txt
timeout 300 python3 -m pytest -q -rs tests/python/test_distributed_ulysses.py tests/python/test_training_cuda.py \
  > $OUT/sp_tests.log 2>&1
echo "sp tests rc $? at $SECONDS s" >> $OUT/log.txt
timeout $((560 - SECONDS)) python3 -m pytest -q -rs tests/python -k cuda > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $? at $SECONDS s" >> $OUT/log.txt
for f in sp_tests cuda_tests; do tail -n 3 $OUT/$f.log >> $OUT/log.txt; done
