#!/usr/bin/env bash
# Downloads into .whl/ (git-ignored) FlashAttention-4 (flash-attn-4, module flash_attn.cute) and the
# CuTe DSL it runs on, so that bench/install_fa4_wheels.sh can install them on a GPU machine without
# network access: Python 3.12 on x86-64 Linux, torch 2.11 for CUDA 13.0, driver 580.
#
#   scripts/fetch_fa4_wheels.sh        # on a machine that reaches PyPI; needs xz; a few minutes
#
# Layout (what install_fa4_wheels.sh expects): .whl/*.whl are the small pure-Python wheels as
# downloaded; each wheel with shared libraries or over 1 MB goes to .whl/big/<wheel>.xz, re-zipped
# uncompressed (zip store mode: deflated members hide their redundancy from xz) and then xz'd.
# That keeps the folder small enough to copy along with the checkout (about 56 MiB): the 92 MB
# nvidia-cutlass-dsl-libs-cu13 wheel alone becomes about 49 MiB. The folder is wiped and rebuilt.
#
# Versions: the newest flash-attn-4 prerelease, and the newest of each dependency that its
# Requires-Dist (and theirs, recursively) allows, read from the wheels' METADATA. Each is fetched
# with --no-deps, so only what the GPU machine lacks is here. Left out on purpose:
#   nvidia-cutlass-dsl-libs-cu12   nvidia-cutlass-dsl requires it unconditionally, but the DSL loads
#                                  whichever _cutlass_ir.cu{N} flavor is installed and the driver
#                                  supports; we carry the cu13 one (its [cu13] extra) instead.
#   torch, einops, typing-extensions, cuda-bindings, protobuf   expected on the GPU machine already.
#   nvidia-cuda-nvdisasm           only for the DSL's optional SASS dumps (its [sass] extra).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.whl

pins=(
  flash-attn-4==4.0.0b36
  quack-kernels==0.6.5                  # flash-attn-4 needs >=0.5.3
  nvidia-cutlass-dsl==4.8.1             # flash-attn-4 >=4.6.2, quack-kernels >=4.7
  nvidia-cutlass-dsl-libs-base==4.8.1   # nvidia-cutlass-dsl pins ==
  nvidia-cutlass-dsl-libs-core==4.8.1   # nvidia-cutlass-dsl-libs-base pins ==
  nvidia-cutlass-dsl-libs-cu13==4.8.1   # nvidia-cutlass-dsl[cu13] pins ==
  apache-tvm-ffi==0.1.15.post2          # flash-attn-4 needs >=0.1.11,<0.2
  torch-c-dlpack-ext==0.1.5             # flash-attn-4, quack-kernels
)

command -v xz >/dev/null || { echo "fetch_fa4_wheels.sh: needs xz (apt-get install xz-utils)" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/big"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for pin in "${pins[@]}"; do
  python3 -m pip download -q --no-deps --pre --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$tmp" "$pin"
done

for whl in "$tmp"/*.whl; do
  name=$(basename "$whl")
  has_so=$(python3 -c 'import re, sys, zipfile
print(int(any(re.search(r"\.so(\.|$)", n) for n in zipfile.ZipFile(sys.argv[1]).namelist())))' "$whl")
  if [ "$(stat -c %s "$whl")" -le 1048576 ] && [ "$has_so" = 0 ]; then
    mv "$whl" "$dest/"
    continue
  fi
  "$root/scripts/xz_wheel.sh" "$whl" "$dest/big/$name.xz"  # re-zipped stored, then xz (it says why)
  rm -f "$whl"
done

ls -l "$dest" "$dest/big" >&2
du -sh "$dest" >&2
