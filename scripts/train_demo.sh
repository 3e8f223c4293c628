#!/usr/bin/env bash
# The main job: a GRPO/DAPO policy update on packed batches against the same update on the N-copy
# batch a standard trainer runs. --help lists the flags and their defaults without loading torch.
#   Without a usable GPU: a tiny random-weight Qwen3 on the CPU, one update packed and N-copy
#   (python -m dualkv.training.compare); prints both losses, the largest gradient difference, the
#   token reduction and EQUAL or DIFFERENT (exit status 1).
#   With a GPU (nvidia-smi lists one and dualkv has, or nvcc can build, its CUDA kernels): the step
#   benchmark, Qwen3-8B with random weights in bf16 (bench/run_step_bench.py).
# First installs what is missing into the interpreter PYTHON (default python3): the user
# requirements (python/requirements.txt, plus python/requirements-cuda.txt for a CUDA build), then
# this checkout's dualkv. DUALKV_NO_INSTALL=1 installs nothing (fails instead); DUALKV_DEVICE=cpu
# forces the CPU path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
# The GPU path's flags when none are given: the README's step benchmark (one prompt of 8K tokens,
# 32 responses, fused elementwise layers; the largest-micro-batch search stops at one group).
gpu_defaults=(--prompt-lengths 8192 --responses 32 --fuse-elementwise --max-fit 32)

usage() {
  cat <<EOF
usage: scripts/train_demo.sh [flags]
One GRPO/DAPO policy update on packed batches against the same update on the N-copy batch.
Installs what is missing first, into $python (set PYTHON to choose; a virtual environment is
recommended: python3 -m venv .venv && . .venv/bin/activate).
Environment: DUALKV_NO_INSTALL=1 installs nothing, DUALKV_DEVICE=cpu forces the CPU path.

With a GPU: python3 bench/run_step_bench.py --device cuda FLAGS, by default
  ${gpu_defaults[*]}
(python3 bench/run_step_bench.py --help lists its flags).

Without a GPU: python -m dualkv.training.compare FLAGS:
EOF
  "$python" "$root/python/dualkv/training/compare_options.py" --help
}

for arg in "$@"; do
  if [[ "$arg" == --help || "$arg" == -h ]]; then
    usage
    exit 0
  fi
done

source "$root/scripts/build_env.sh"

gpu=0
if [[ "${DUALKV_DEVICE:-}" != cpu ]] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
fi

importable() { "$python" -c "$1" >/dev/null 2>&1; }
has_cuda_kernels='import sys, dualkv; sys.exit(0 if dualkv.cuda_compiled() else 1)'
announced=0

install() {
  if [[ "${DUALKV_NO_INSTALL:-0}" == 1 ]]; then
    echo "train_demo.sh: $1 is missing and DUALKV_NO_INSTALL=1; install it: $2" >&2
    exit 1
  fi
  if [[ $announced == 0 ]]; then
    announced=1
    echo "== installing into $("$python" -c 'import sys; print(sys.executable)')"
    if ! importable 'import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)'; then
      echo "   (not a virtual environment: to keep these packages apart, stop here and run"
      echo "    python3 -m venv .venv && . .venv/bin/activate, or set PYTHON=/path/to/venv/bin/python)"
    fi
  fi
  echo "== installing $1: $2"
  (cd "$root" && eval "$2")
}

build=0
cuda=0
if ! importable 'import dualkv.training.compare'; then
  build=1
  if [[ $gpu == 1 && "$(dualkv_pick_preset)" == cuda ]]; then cuda=1; fi
elif [[ $gpu == 1 ]] && ! importable "$has_cuda_kernels" && command -v nvcc >/dev/null 2>&1; then
  build=1
  cuda=1
fi

if [[ $build == 1 ]]; then
  requirements="-r python/requirements.txt"
  needed='import torch, transformers, scikit_build_core'
  if [[ $cuda == 1 ]]; then
    requirements+=" -r python/requirements-cuda.txt"
    needed+=', cutlass_library'
  fi
  if ! importable "$needed"; then
    if [[ $gpu == 0 ]] && ! importable 'import torch'; then
      # PyPI's torch wheel brings about 5 GB of CUDA libraries a CPU does not use. The CPU-only
      # index is optional: where only PyPI is reachable, the requirements below install PyPI's wheel.
      torch_pin=$(grep '^torch==' "$root/python/requirements.txt")
      install "the CPU-only torch wheel" \
        "$python -m pip install $torch_pin --index-url https://download.pytorch.org/whl/cpu" ||
        echo "   (the CPU-only wheel index is not reachable: PyPI's torch wheel comes next)"
    fi
    install "the Python requirements" "$python -m pip install $requirements"
  fi
  install "dualkv" "DUALKV_CUDA=$cuda $python -m pip install . --no-build-isolation"
fi

if [[ $gpu == 1 ]] && ! importable "$has_cuda_kernels"; then
  echo "train_demo.sh: a GPU is present but dualkv has no CUDA kernels (no nvcc to build them): running the CPU path"
  gpu=0
fi
if [[ $gpu == 1 ]]; then
  if [[ $# == 0 ]]; then set -- "${gpu_defaults[@]}"; fi
  exec "$python" "$root/bench/run_step_bench.py" --device cuda "$@"
fi
exec "$python" -m dualkv.training.compare "$@"
