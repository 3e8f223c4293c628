#!/usr/bin/env bash
# Builds the Python package (CPU extension; with the CUDA kernels when a GPU is usable) into
# build/python-site, without touching the user's site-packages, and runs the Python suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/build_env.sh"
site="$root/build/python-site"
if [[ "$(dualkv_pick_preset)" == cuda ]]; then cuda=1; else cuda=0; fi
DUALKV_CUDA=${DUALKV_CUDA:-$cuda} python3 -m pip install -q --no-build-isolation --no-deps --upgrade \
  --target "$site" "$root"
cd "$root"
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q tests/python "$@"
