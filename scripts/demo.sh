#!/usr/bin/env bash
# The attention operator alone, from C++ (no Python needed): builds dualkv_demo into build/cpu, or
# build/cuda when nvcc and a GPU are present (DUALKV_DEVICE=cpu forces the CPU), and runs it on a
# synthetic shared-prompt batch, packed and as N copies. Flags go to dualkv_demo; --help lists them
# with their defaults, e.g. scripts/demo.sh --n 16 --p 2048 --r 256.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/build_env.sh"
preset=$(dualkv_pick_preset)
demo="$root/build/$preset/tools/dualkv_demo"

for arg in "$@"; do
  if [[ ("$arg" == --help || "$arg" == -h) && -x "$demo" ]]; then
    exec "$demo" --help
  fi
done
dualkv_build "$preset" dualkv_demo
exec "$demo" "$@"
