#!/usr/bin/env bash
# Compresses a wheel for copying to a GPU machine without network: SRC.whl -> DEST (xz), which Python's lzma
# decodes there (no xz binary needed on that machine).
#
#   scripts/xz_wheel.sh SRC.whl DEST.xz
#
# The wheel is first re-zipped with the same members, in the same order, with the same metadata
# (permissions included), stored instead of deflated, so that xz sees their redundancy: RECORD's
# hashes are of the member contents, so pip accepts the result as the same wheel. --x86 (BCJ:
# branch targets made absolute, so repeated calls look alike) and a dictionary as large as a
# 193 MB shared library take nvidia-cutlass-dsl-libs-cu13 from 58 to 49 MiB.
set -euo pipefail
src=$1
dest=$2
command -v xz >/dev/null || { echo "xz_wheel.sh: needs xz (apt-get install xz-utils)" >&2; exit 1; }
stored=$(mktemp --suffix=.whl)
trap 'rm -f "$stored"' EXIT
python3 - "$src" "$stored" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as out:
    for info in src.infolist():
        data = src.read(info)
        info.compress_type = zipfile.ZIP_STORED
        out.writestr(info, data)
PY
echo "compressing $(basename "$src") ($(($(stat -c %s "$stored") / 1048576)) MiB stored)" >&2
xz -T1 --x86 --lzma2=preset=9e,dict=256MiB -c "$stored" >"$dest"
