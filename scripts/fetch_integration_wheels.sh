#!/usr/bin/env bash
# Downloads into .whl-integrations/ (git-ignored) the wheels that the trainer integrations' GPU test
# (tests/python/test_integrations_cuda.py) needs on a GPU machine without network access:
# trl and verl with the part of their dependencies that machine lacks, for Python 3.12 on
# x86-64 Linux, each with --no-deps (scripts/run_integrations_gpu.sh installs them offline).
#
#   scripts/fetch_integration_wheels.sh        # on a machine that reaches PyPI; about 5 MB
#
# PY_VERSION=3.11 (default 3.12, the GPU machine's) fetches for another CPython, WHEELS_DIR another
# folder: how the set was checked on a CPU machine without Python 3.12 builds of torch.
#
# What the GPU machine is expected to hold already (docs/gpu_testing.md): torch 2.11, transformers
# 5.17.0, accelerate, huggingface-hub, tokenizers, safetensors, numpy, pandas, pyarrow, fsspec,
# xxhash, pyyaml, jinja2, psutil, requests, httpx, tqdm, pillow, cloudpickle, packaging, pytest.
# Not carried:
#   ray     verl imports it at package import (verl/protocol.py) but never calls it on the engine's
#           micro-batch path; its wheel is 74 MB, so run_integrations_gpu.sh puts
#           scripts/integrations_gpu_shims/ray (import-only, fails on use) on the path instead.
#   importlib_metadata (tensordict), wandb, vllm, torchdata, tensorboard, pylatexenc
#           (verl's metadata): optional or not imported on that path.
# Versions: those of python/requirements-ci.txt and python/requirements-verl-ci.txt (and of what
# pip resolves for them there), so the GPU run imports the code the CPU tests ran against.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${WHEELS_DIR:-$root/.whl-integrations}
py_version=${PY_VERSION:-3.12}
abi=cp${py_version/./}

# Pure-Python wheels (py3-none-any, or multiprocess's per-Python-version wheel, py312).
pure=(
  trl==1.16.0
  datasets==5.2.0            # trl (GRPOTrainer's module) and verl (verl.utils.dataset) import it
  dill==0.4.1                # datasets
  multiprocess==0.70.19      # datasets
  verl==0.9.1
  pyvers==0.1.0              # tensordict
  hydra-core==1.3.8          # verl.workers.config, verl.utils.config
  omegaconf==2.3.1           # hydra-core, verl
  codetiming==1.4.0          # verl.utils.profiler
  peft==0.21.2               # verl.utils.fsdp_utils (the engine) imports it; CI's version over the machine's
)
# Wheels with compiled code, for CPython $py_version on manylinux x86-64.
binary=(
  tensordict==0.10.0         # verl's batches (TensorDict); has a C++ extension
  orjson==3.13.0             # verl.utils.tracking imports it; any version with a cp312 wheel
)
# Published as a source archive only; built here into a pure-Python wheel.
sdist=(
  antlr4-python3-runtime==4.9.3  # omegaconf 2.3 needs exactly 4.9.x
)

rm -rf "$dest"
mkdir -p "$dest"
py=(--python-version "$py_version" --implementation cp --abi "$abi")
python3 -m pip download -q --no-deps --only-binary=:all: "${py[@]}" --platform any -d "$dest" "${pure[@]}"
python3 -m pip download -q --no-deps --only-binary=:all: "${py[@]}" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$dest" "${binary[@]}"
python3 -m pip wheel -q --no-deps --no-binary=:all: -w "$dest" "${sdist[@]}"

ls -l "$dest"
du -sh "$dest"
