#!/usr/bin/env bash
# Downloads into .whl-hybrid/ (git-ignored) what the hybrid models (Qwen3.5, Qwen3-Next) need on the
# GPU machine without network access, for Python 3.12 on x86-64 Linux:
#   flash-linear-attention and fla-core 0.6.0   Gated DeltaNet's varlen kernels (pure Python, 1.5 MB)
#   triton 3.7.1                                their gated backward is wrong on Hopper with the
#                                               Triton 3.6 that torch 2.11 ships (docs/recurrent.md)
#
#   scripts/fetch_hybrid_wheels.sh        # on a machine that reaches PyPI; needs xz; several minutes
#
# Triton's wheel is 198 MB, more than one transfer to such a machine may hold where transfers are
# capped (64 MiB): it is compressed with
# scripts/xz_wheel.sh and split into parts of PART_MIB (default 40) MiB,
# .whl-hybrid/triton/<wheel>.xz.partNN, beside the hash of the whole. scripts/run_hybrid_gpu.sh
# stage collects the parts of several transfers on the GPU machine; its install step joins, checks and
# installs them. The folder is rebuilt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.whl-hybrid
part_mib=${PART_MIB:-40}

rm -rf "$dest"
mkdir -p "$dest/triton"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform any -d "$1" "$2"
}
download "$dest" flash-linear-attention==0.6.0
download "$dest" fla-core==0.6.0
download "$tmp" triton==3.7.1

wheel=$(basename "$tmp"/triton-*.whl)
"$root/scripts/xz_wheel.sh" "$tmp/$wheel" "$tmp/$wheel.xz"
split -b "${part_mib}M" -d -a 2 "$tmp/$wheel.xz" "$dest/triton/$wheel.xz.part"
sha256sum "$tmp/$wheel.xz" | awk '{print $1}' >"$dest/triton/$wheel.xz.sha256"
ls -l "$dest" "$dest/triton" >&2
du -sh "$dest" >&2
