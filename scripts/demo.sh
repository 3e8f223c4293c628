#!/usr/bin/env bash
# The main job: build dualkv and run dualkv_demo (packed shared-prompt batch vs the N-copy
# layout). Uses the CUDA kernels when nvcc and a GPU are present, the CPU path otherwise.
# Any arguments go to dualkv_demo (see --help), e.g. scripts/demo.sh --n 16 --p 2048 --r 256.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/build_env.sh"
dualkv_build "$(dualkv_pick_preset)" dualkv_demo
exec "$DUALKV_BUILD_DIR/tools/dualkv_demo" "$@"
