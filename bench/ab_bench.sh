#!/usr/bin/env bash
# A/B of dualkv's CUDA kernels: dualkv_bench built from another revision and from the working tree,
# run alternately in one process sequence on one GPU, then the ratio of their medians per
# configuration. The same binary moves 1-2% between machines and runs, two binaries alternated in
# one run stay within 0.1-0.5% of each other (docs/performance.md), so this is how a kernel change
# is measured.
#
#   bench/ab_bench.sh REV [dualkv_bench flags]      e.g. bench/ab_bench.sh main --configs 28x32768 --dtype bf16
#
# REV is built in a git worktree under build/ab/REV (kept, so a second run rebuilds nothing), the
# working tree in build/cuda-sm90 (DUALKV_BUILD_DIR), both with the cuda-sm90 preset and the CuTe
# headers of the installed nvidia-cutlass (DUALKV_CUTLASS_INCLUDE_DIR overrides). ROUNDS (default
# 2) alternations; JSON results and logs go to OUT (default build/ab-results). With NCU=1, each
# binary's kernels of one forward + backward also go through ncu (duration, cycles, DRAM bytes, L2
# hit rate, instructions) at the first configuration, clock unlocked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 ]] || { sed -n '2,16p' "$0" >&2; exit 2; }
rev=$1
shift
rounds=${ROUNDS:-2}
out=${OUT:-$root/build/ab-results}
current_build=${DUALKV_BUILD_DIR:-$root/build/cuda-sm90}
cutlass=${DUALKV_CUTLASS_INCLUDE_DIR:-$(python3 -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))")}
mkdir -p "$out"

build_bench() {  # SOURCE_DIR BUILD_DIR LOG
  if ! { cmake -S "$1" -B "$2" --preset cuda-sm90 -DDUALKV_CUTLASS_INCLUDE_DIR="$cutlass" &&
    cmake --build "$2" -j "$(nproc)" --target dualkv_bench; } >"$3" 2>&1; then
    tail -20 "$3" >&2
    exit 1
  fi
}

worktree=$root/build/ab/$(echo "$rev" | tr '/' '_')
if [[ ! -d "$worktree" ]]; then
  git -C "$root" worktree add --detach "$worktree" "$rev" >/dev/null
fi
echo "== building $rev in $worktree and the working tree in $current_build"
build_bench "$worktree" "$worktree/build/cuda-sm90" "$out/build_base.log"
build_bench "$root" "$current_build" "$out/build_current.log"
declare -A bench=([base]="$worktree/build/cuda-sm90/bench/dualkv_bench" [current]="$current_build/bench/dualkv_bench")

for ((round = 1; round <= rounds; ++round)); do
  for side in base current; do
    echo "== round $round: $side"
    "${bench[$side]}" "$@" --json "$out/${side}_$round.json" | { grep -E "^N" || true; }
  done
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {side: [json.load(open(f"{out}/{side}_{r}.json"))["results"] for r in range(1, rounds + 1)] for side in ("base", "current")}
print(f"{'config':28} {'dtype':9} {'fwd current/base':>17} {'bwd current/base':>17}  (time ratios: above 1 is slower)")
for index, row in enumerate(runs["base"][0]):
    def median(side, key):
        return statistics.median(run[index][key] for run in runs[side])
    fwd = median("current", "forward_ms") / median("base", "forward_ms")
    bwd = median("current", "backward_ms") / median("base", "backward_ms")
    print(f"{row['config']:28} {row['dtype']:9} {fwd:17.3f} {bwd:17.3f}")
EOF

if [[ "${NCU:-0}" == 1 ]]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  metrics=gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum
  for side in base current; do
    echo "== ncu: $side"
    # Skip the warm-up launches; 8 launches cover a forward and a backward (preprocess, KV, convert).
    "$ncu" --clock-control none --launch-skip 12 --launch-count 8 --metrics "$metrics" \
      "${bench[$side]}" "$@" --repeats 10 --warmups 1 >"$out/ncu_$side.txt" 2>&1 || true
    grep -E '^  [a-z_].*\(|duration|cycles|dram__bytes|hit_rate|inst_executed' "$out/ncu_$side.txt" || true
  done
fi
