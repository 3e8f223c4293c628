#!/usr/bin/env bash
# The main job: a GRPO/DAPO policy update on packed batches against the same update on the N-copy
# batch a standard trainer runs.
#   Without a usable GPU: a tiny random-weight Qwen3 on the CPU, one update packed and N-copy
#   (python -m dualkv.training.compare); prints both losses, the largest gradient difference, the
#   token reduction and EQUAL or DIFFERENT (exit status 1).
#   With a GPU (nvidia-smi lists one and dualkv has, or nvcc can build, its CUDA kernels): the step
#   benchmark's configuration, Qwen3-8B with random weights in bf16 (bench/run_step_bench.py).
# First installs what is missing: python/requirements-ci.txt when torch or transformers cannot be
# imported, then this checkout's dualkv (pip install . --no-build-isolation; DUALKV_CUDA=0 without
# a GPU) when dualkv.training cannot be imported, or lacks its CUDA kernels on a GPU machine.
# DUALKV_NO_INSTALL=1 installs nothing (fails instead); DUALKV_DEVICE=cpu forces the CPU path;
# PYTHON chooses the interpreter (default python3). Arguments go to the Python command (--help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
source "$root/scripts/build_env.sh"

gpu=0
if [[ "${DUALKV_DEVICE:-}" != cpu ]] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
fi

importable() { "$python" -c "$1" >/dev/null 2>&1; }
has_cuda_kernels='import sys, dualkv; sys.exit(0 if dualkv.cuda_compiled() else 1)'

install() {
  if [[ "${DUALKV_NO_INSTALL:-0}" == 1 ]]; then
    echo "train_demo.sh: $1 is missing and DUALKV_NO_INSTALL=1; install it: $2" >&2
    exit 1
  fi
  echo "== installing $1: $2"
  (cd "$root" && eval "$2")
}

if ! importable 'import torch, transformers'; then
  install "the Python requirements" "$python -m pip install -r python/requirements-ci.txt"
fi
if ! importable 'import dualkv.training.compare'; then
  if [[ $gpu == 1 && "$(dualkv_pick_preset)" == cuda ]]; then cuda=1; else cuda=0; fi
  install "dualkv" "DUALKV_CUDA=$cuda $python -m pip install . --no-build-isolation"
elif [[ $gpu == 1 ]] && ! importable "$has_cuda_kernels" && command -v nvcc >/dev/null 2>&1; then
  install "dualkv's CUDA kernels" "DUALKV_CUDA=1 $python -m pip install . --no-build-isolation"
fi

if [[ $gpu == 1 ]] && ! importable "$has_cuda_kernels"; then
  echo "train_demo.sh: a GPU is present but dualkv has no CUDA kernels (no nvcc to build them): running the CPU path"
  gpu=0
fi
if [[ $gpu == 1 ]]; then
  exec "$python" "$root/bench/run_step_bench.py" --device cuda "$@"
fi
exec "$python" -m dualkv.training.compare "$@"
