#!/usr/bin/env bash
# Prepares in .whl-hybrid/ (git-ignored) what the hybrid models (Qwen3.5, Qwen3-Next) need on a GPU
# machine without network access, for Python 3.12 on x86-64 Linux, as one archive of an installed
# folder, .whl-hybrid/hybrid-site.tar.xz (about 37 MB):
#   flash-linear-attention and fla-core 0.6.0   Gated DeltaNet's varlen kernels (pure Python)
#   triton 3.7.1                                their gated backward is wrong on Hopper with the
#                                               Triton 3.6 that torch 2.11 ships (docs/recurrent.md)
#
#   scripts/fetch_hybrid_wheels.sh        # on a machine that reaches PyPI; needs strip and xz; minutes
#
# Triton's wheel is 198 MB (721 MB installed, more than a 64 MiB transfer holds even compressed).
# What the hybrid kernels do not use is left out: the debug information of libtriton.so (440 MB,
# 180 MB stripped), the profiler (proton, CUPTI) and the CUDA tools Triton bundles (ptxas,
# cuobjdump, nvdisasm). scripts/run_hybrid_gpu.sh install links those tools from the Triton that
# torch installed (or uses TRITON_PTXAS_PATH): Triton picks its PTX version from the ptxas it runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.whl-hybrid
for tool in strip xz; do
  command -v "$tool" >/dev/null || { echo "fetch_hybrid_wheels.sh: needs $tool" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform any -d "$tmp/wheels" flash-linear-attention==0.6.0 fla-core==0.6.0 triton==3.7.1
mkdir -p "$tmp/site"
for wheel in "$tmp"/wheels/*.whl; do  # a wheel is a zip of its installed files
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$tmp/site"
done
triton=$tmp/site/triton
rm -rf "$triton/profiler" "$triton/_C/libproton.so" "$triton/backends/nvidia/lib/cupti" \
  "$triton/instrumentation/libGPUInstrumentationTestLib.so" "$triton/FileCheck" "$triton/plugins/libTritonPluginsTestLib.so"
rm -f "$triton"/backends/nvidia/bin/*
strip --strip-unneeded "$triton/_C/libtriton.so" "$triton"/plugins/*.so*

rm -rf "$dest"
mkdir -p "$dest"
tar cf - -C "$tmp/site" . | xz -9 -T0 >"$dest/hybrid-site.tar.xz"
ls -l "$dest" >&2
