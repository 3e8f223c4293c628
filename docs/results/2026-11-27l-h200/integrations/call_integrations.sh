#!/bin/bash
# Session 33, one H200: the trainer integrations' GPU test, which had not run since session 32's
# autocast change (dualkv.attention casts q, k, v under torch.autocast; the integrations' own cast
# removed), then the Python GPU tests of the attention op on the same build (head_dim 64's
# backward changed this session). Wheels: scripts/fetch_integration_wheels.sh (.whl-integrations,
# carried with .cutlass).
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/gpu.txt
bash scripts/run_integrations_gpu.sh > $OUT/integrations.txt 2>&1
echo "integrations rc $? at $SECONDS s" > $OUT/log.txt
export PYTHONPATH=/tmp/pysite
timeout 150 python3 -m pytest -q -rs tests/python/test_op_attention.py > $OUT/attention_py.txt 2>&1
echo "test_op_attention rc $? at $SECONDS s: $(tail -1 $OUT/attention_py.txt)" >> $OUT/log.txt
timeout 150 python3 -m pytest -q -rs tests/python -k "cuda and not test_op_attention and not integrations" > $OUT/cuda_py.txt 2>&1
echo "cuda tests rc $? at $SECONDS s: $(tail -1 $OUT/cuda_py.txt)" >> $OUT/log.txt
