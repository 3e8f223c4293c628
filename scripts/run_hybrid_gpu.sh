#!/usr/bin/env bash
# On a GPU machine without network: the hybrid models (Qwen3.5, Qwen3.5-MoE, Qwen3-Next) on CUDA,
# their GPU tests and benchmarks, one step per command:
#
#   bash scripts/run_hybrid_gpu.sh install        # unpack .whl-hybrid/hybrid-site.tar.xz into build/hybrid-site
#   bash scripts/run_hybrid_gpu.sh tests          # build dualkv (CUDA, sm_90), run the GPU tests and the check
#   bash scripts/run_hybrid_gpu.sh layer-bench [bench/run_recurrent_bench.py flags]
#   bash scripts/run_hybrid_gpu.sh step-bench  [bench/run_step_bench.py flags]   # default --model qwen3.5-9b
#   bash scripts/run_hybrid_gpu.sh cache-save     # Triton's cache as parts of 15 MiB in the results folder
#   bash scripts/run_hybrid_gpu.sh cache-load DIR # the parts cache-save wrote, copied into DIR
#
# What the machine needs, all git-ignored, copied beside the checkout:
#   .whl-hybrid/   scripts/fetch_hybrid_wheels.sh: Triton 3.7.1 (slimmed), flash-linear-attention
#                  and fla-core as one installed folder, about 37 MB.
#   .cutlass/      the CuTe/CUTLASS headers, for `tests` (the extension's CUDA build).
#   .whl/          optional, scripts/fetch_fa4_wheels.sh: FlashAttention-4 for the fa4_ncopy method.
# Python path: build/hybrid-site (Triton 3.7.1 ahead of the image's 3.6, flash-linear-attention),
# then DUALKV_SITE (default /tmp/pysite, where `tests` builds dualkv; DUALKV_SKIP_BUILD=1 reuses it).
# Triton's kernel and autotuning caches go to build/triton-cache, kept between steps. On a fresh
# cache flash-linear-attention's first call at each new shape compiles and times every candidate
# configuration of each kernel, one after another: more than 8 minutes for the tests and the
# Qwen3.5 step together on an H200. cache-save and cache-load carry the cache to another machine.
# Logs and results go to $OUT when it is set, else build/hybrid-gpu-results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
results=${OUT:-$root/build/hybrid-gpu-results}
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
install)
  archive=.whl-hybrid/hybrid-site.tar.xz
  [[ -f "$archive" ]] || { echo "no $archive: run scripts/fetch_hybrid_wheels.sh where PyPI is reachable" >&2; exit 2; }
  # The CUDA tools left out of the archive, from the Triton torch installed (before the path changes).
  tools=$(cd / && PYTHONPATH= python3 -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin"))')
  rm -rf "$hybrid_site"
  mkdir -p "$hybrid_site"
  python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
    "$archive" "$hybrid_site"
  ln -sf "$tools"/* "$hybrid_site/triton/backends/nvidia/bin/"
  python3 -c 'import torch, triton, fla; print("torch", torch.__version__, "triton", triton.__version__, "fla", fla.__version__)' |
    tee "$results/install.log"
  ;;
cache-save)
  tar cf - -C "$(dirname "$TRITON_CACHE_DIR")" "$(basename "$TRITON_CACHE_DIR")" | xz -1 -T0 |
    split -b 15M -d -a 2 - "$results/triton-cache.tar.xz.part"
  ls -l "$results"/triton-cache.tar.xz.part*
  ;;
cache-load)
  parts=("${1:?cache-load DIR: the folder holding triton-cache.tar.xz.partNN}"/triton-cache.tar.xz.part*)
  mkdir -p "$(dirname "$TRITON_CACHE_DIR")"
  cat "${parts[@]}" | xz -d | tar xf - -C "$(dirname "$TRITON_CACHE_DIR")" --transform "s,^[^/]*,$(basename "$TRITON_CACHE_DIR"),"
  echo "Triton cache: $(find "$TRITON_CACHE_DIR" -type f | wc -l) files in $TRITON_CACHE_DIR"
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
  echo "usage: $0 install | tests | layer-bench [flags] | step-bench [flags] | cache-save | cache-load DIR" >&2
  exit 2
  ;;
esac
