# Shared by the scripts: choose a build (CPU, or CUDA when a GPU is usable) and build targets.
# shellcheck shell=bash

# Prints "cuda" when nvcc is installed and a GPU answers, else "cpu". DUALKV_DEVICE=cpu|cuda forces one.
dualkv_pick_preset() {
  if [[ -n "${DUALKV_DEVICE:-}" ]]; then echo "$DUALKV_DEVICE"; return; fi
  if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo cuda
  else
    echo cpu
  fi
}

# dualkv_build PRESET TARGET...: configures build/PRESET once and builds the targets; sets DUALKV_BUILD_DIR.
# For cuda, the CuTe headers come from DUALKV_CUTLASS_INCLUDE_DIR, else .cutlass/include in the
# checkout, else the nvidia-cutlass Python package; the GPU architecture defaults to the local GPU's.
dualkv_build() {
  local preset=$1; shift
  local extra=()
  if [[ "$preset" == cuda ]]; then
    local cutlass=${DUALKV_CUTLASS_INCLUDE_DIR:-}
    if [[ -z "$cutlass" && -f "$root/.cutlass/include/cute/tensor.hpp" ]]; then cutlass="$root/.cutlass/include"; fi
    [[ -n "$cutlass" ]] && extra+=("-DDUALKV_CUTLASS_INCLUDE_DIR=$cutlass")
    extra+=("-DCMAKE_CUDA_ARCHITECTURES=${DUALKV_CUDA_ARCHITECTURES:-native}")
  fi
  DUALKV_BUILD_DIR="$root/build/$preset"
  cmake -S "$root" --preset "$preset" "${extra[@]}" >/dev/null
  cmake --build "$DUALKV_BUILD_DIR" -j "$(nproc)" --target "$@"
}
