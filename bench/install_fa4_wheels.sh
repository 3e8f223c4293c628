#!/usr/bin/env bash
# Installs FlashAttention-4 (flash_attn.cute) and its CuTe DSL from the wheels in .whl/, offline,
# into a private folder, and prints the PYTHONPATH that makes them importable.
#
#   eval "$(bench/install_fa4_wheels.sh)"      # sets PYTHONPATH; messages go to stderr
#
# scripts/fetch_fa4_wheels.sh fills .whl/ (pinned versions; the layout and why it is compressed
# are described there): .whl/*.whl as downloaded, .whl/big/<wheel>.xz for the large ones.
# SITE (default /tmp/site) is replaced.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
site=${SITE:-/tmp/site}
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT

cp "$root"/.whl/*.whl "$wheels"/
for packed in "$root"/.whl/big/*.whl.xz; do  # Python's lzma: no xz binary needed on the machine
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$packed" "$wheels/$(basename "${packed%.xz}")"
done
# One pip call for all: the three nvidia-cutlass-dsl-libs wheels share the nvidia_cutlass_dsl/
# folder, and a second --target install would skip (or, with --upgrade, replace) it.
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl >&2
# nvidia-cutlass-dsl puts its packages on sys.path through a .pth file, which Python reads only
# in site directories, not in PYTHONPATH entries: name that folder explicitly.
echo "export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}"
