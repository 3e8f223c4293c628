#!/usr/bin/env bash
# On a GPU machine without network: the hybrid models (Qwen3.5, Qwen3.5-MoE, Qwen3-Next) on CUDA,
# their GPU tests and benchmarks, one step per command (each runs in under 10 minutes):
#
#   bash scripts/run_hybrid_gpu.sh stage          # collect the carried wheel parts (see below)
#   bash scripts/run_hybrid_gpu.sh install        # join and install them into build/hybrid-site
#   bash scripts/run_hybrid_gpu.sh tests          # build dualkv (CUDA, sm_90), run the GPU tests and the check
#   bash scripts/run_hybrid_gpu.sh layer-bench [bench/run_recurrent_bench.py flags]
#   bash scripts/run_hybrid_gpu.sh step-bench  [bench/run_step_bench.py flags]   # default --model qwen3.5-9b
#
# What the machine needs, all git-ignored, copied beside the checkout:
#   .whl-hybrid/   scripts/fetch_hybrid_wheels.sh: flash-linear-attention and fla-core (1.5 MB) and
#                  Triton 3.7.1 split into parts (about 40 MiB each, for transfers capped at 64 MiB).
#                  Copy the parts over and run `stage` after each copy: build/hybrid-wheels
#                  collects them; `install` checks the joined file's hash.
#   .cutlass/      the CuTe/CUTLASS headers, for `tests` (the extension's CUDA build).
#   .whl/          optional, scripts/fetch_fa4_wheels.sh: FlashAttention-4 for the fa4_ncopy method.
# Python path: build/hybrid-site (Triton 3.7.1 ahead of the image's 3.6, flash-linear-attention),
# then DUALKV_SITE (default /tmp/pysite, where `tests` builds dualkv; DUALKV_SKIP_BUILD=1 reuses it).
# Triton's kernel and autotuning caches go to build/triton-cache, kept between steps.
# Logs and results go to $OUT when it is set, else build/hybrid-gpu-results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
results=${OUT:-$root/build/hybrid-gpu-results}
staged=$root/build/hybrid-wheels
hybrid_site=$root/build/hybrid-site
dualkv_site=${DUALKV_SITE:-/tmp/pysite}
mkdir -p "$results"
cd "$root"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$hybrid_site:$dualkv_site${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$root/build/triton-cache}

step=${1:-}
shift || true
case "$step" in
stage)
  mkdir -p "$staged"
  found=$(find .whl-hybrid -type f 2>/dev/null | wc -l)
  if [[ "$found" == 0 ]]; then
    echo "nothing carried in .whl-hybrid (run scripts/fetch_hybrid_wheels.sh where PyPI is reachable)" >&2
    exit 2
  fi
  find .whl-hybrid -type f -exec cp {} "$staged"/ \;
  ls -l "$staged"
  ;;
install)
  shopt -s nullglob
  parts=("$staged"/triton-*.whl.xz.part*)
  fla=("$staged"/fla_core-*.whl "$staged"/flash_linear_attention-*.whl)
  if [[ ${#parts[@]} == 0 || ${#fla[@]} != 2 ]]; then
    echo "build/hybrid-wheels lacks the Triton parts or the two flash-linear-attention wheels: stage them" >&2
    ls -l "$staged" >&2 || true
    exit 2
  fi
  first=$(basename "${parts[0]}")
  wheel=${first%.xz.part*}
  cat "${parts[@]}" >"$staged/$wheel.xz"
  if [[ "$(sha256sum "$staged/$wheel.xz" | awk '{print $1}')" != "$(cat "$staged/$wheel.xz.sha256")" ]]; then
    echo "the joined $wheel.xz does not match its hash: a part is missing or damaged (${#parts[@]} staged)" >&2
    exit 1
  fi
  # Python's lzma: no xz binary needed on the machine.
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$staged/$wheel.xz" "$staged/$wheel"
  rm -rf "$hybrid_site"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$hybrid_site" "$staged/$wheel" "${fla[@]}" \
    2>&1 | tee "$results/install.log"
  python3 -c 'import torch, triton, fla; print("torch", torch.__version__, "triton", triton.__version__, "fla", fla.__version__)' |
    tee -a "$results/install.log"
  ;;
tests)
  if [[ "${DUALKV_SKIP_BUILD:-0}" != 1 ]]; then
    if [[ -f .cutlass/include/cute/tensor.hpp ]]; then cutlass=$root/.cutlass/include; else cutlass=$root/.cutlass; fi
    [[ -f "$cutlass/cute/tensor.hpp" ]] || { echo "no CuTe headers in .cutlass: carry .cutlass" >&2; exit 2; }
    echo "== building dualkv with the CUDA kernels (sm_90) into $dualkv_site"
    DUALKV_CUDA=1 python3 -m pip install --no-build-isolation --no-deps --upgrade --target "$dualkv_site" \
      -C cmake.define.DUALKV_CUTLASS_INCLUDE_DIR="$cutlass" -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      -C build-dir=build/hybrid-gpu -C build.tool-args=-j"$(nproc)" . >"$results/build.log" 2>&1 ||
      { tail -40 "$results/build.log"; exit 1; }
  fi
  status=0
  python3 -m dualkv.check --device cuda 2>&1 | tee "$results/check.log" || status=1
  selected=(tests/python/test_recurrent_cuda.py "tests/python/test_models_cuda.py::test_bf16_packed_model_is_as_accurate_as_the_ncopy_batch")
  if [[ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]]; then
    selected+=(tests/python/test_training_cuda.py)
  fi
  python3 -m pytest -q -rs "${selected[@]}" "$@" --junitxml="$results/junit.xml" 2>&1 | tee "$results/tests.log" ||
    status=1
  exit "$status"
  ;;
layer-bench)
  python3 bench/run_recurrent_bench.py --out "$results/recurrent-bench" "$@" 2>&1 | tee "$results/recurrent-bench.log"
  ;;
step-bench)
  if [[ -d .whl ]] && fa4_env=$(bench/install_fa4_wheels.sh); then
    eval "$fa4_env"
    export PYTHONPATH="$hybrid_site:$PYTHONPATH"  # Triton 3.7.1 stays first
  fi
  python3 bench/run_step_bench.py --model qwen3.5-9b --out "$results/step-bench" "$@" 2>&1 |
    tee "$results/step-bench.log"
  ;;
*)
  echo "usage: $0 stage | install | tests | layer-bench [flags] | step-bench [flags]" >&2
  exit 2
  ;;
esac
