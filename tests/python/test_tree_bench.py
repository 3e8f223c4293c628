"""bench/run_tree_bench.py on a CPU (tiny Qwen3, a tiny agentic workload): the code path the GPU run
takes, its workload and counts, the N-copy batch it builds, and its report."""

import json
import pathlib
import random
import sys

import pytest
import torch

import dualkv

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import run_tree_bench as bench  # noqa: E402
import tree_workload as work  # noqa: E402

TINY = ["--system", "24", "--task", "8", "--trajectories", "4", "--turns", "3", "--turn-tokens", "6",
        "--tool-tokens", "4", "8", "--heads", "4", "--kv-heads", "2", "--head-dim", "16"]


def test_workload_branches_in_pairs_after_the_given_turn():
    trajectories = work.agentic_trajectories(system=20, task=5, trajectories=6, turns=4, turn_tokens=10,
                                             tool_tokens=(3, 6), branch_after=2, vocab=100, seed=3)
    assert len(trajectories) == 6 and all(sum(flag for _, flag in t) == 4 for t in trajectories)
    layout = dualkv.pack_trajectories(trajectories).layout
    # The shared prompt, a pair's first two turns, then each trajectory's own: depth 3, 1 + 3 + 6 segments.
    assert layout.depth == 3 and layout.num_segments == 10


def test_forest_packs_one_root_per_tree():
    shape = dict(system=12, task=4, trajectories=4, turns=3, turn_tokens=5, tool_tokens=(2, 4), branch_after=2,
                 vocab=100)
    forest = work.agentic_forest(3, seed=5, **shape)
    assert forest[4:8] == work.agentic_trajectories(**shape, seed=6)
    layout = dualkv.pack_trajectories(forest).layout
    assert layout.parents.tolist().count(-1) == 3 and layout.num_segments == 3 * 7


def test_trees_below_one_are_refused():
    with pytest.raises(SystemExit):
        bench.main(["--device", "cpu", "--out", "unused", "--trees", "0"])


def test_ncopy_batch_runs_every_trajectory_alone():
    trajectories = work.agentic_trajectories(system=8, task=2, trajectories=3, turns=2, turn_tokens=4,
                                             tool_tokens=(2, 3), branch_after=1, vocab=50, seed=1)
    ncopy, packed = work.ncopy_batch(trajectories), dualkv.pack_trajectories(trajectories)
    assert ncopy.layout.depth == 1 and ncopy.num_tokens == sum(len(t) for t in map(_tokens, trajectories))
    assert torch.equal(ncopy.response_lengths, packed.response_lengths)
    for i in range(len(trajectories)):
        n = int(ncopy.response_lengths[i])
        assert torch.equal(ncopy.input_ids[0, ncopy.token_rows[i, :n]], packed.input_ids[0, packed.token_rows[i, :n]])
        assert torch.equal(ncopy.input_ids[0, ncopy.score_rows[i, :n]], packed.input_ids[0, packed.score_rows[i, :n]])
    assert work.visible_pairs(ncopy.layout) > work.visible_pairs(packed.layout)


def _tokens(trajectory):
    return [t for ids, _ in trajectory for t in ids]


def test_cpu_run_reports_both_parts(tmp_path):
    report = bench.main(["--device", "cpu", "--dtype", "fp32", "--model", "tiny-qwen3", "--repeats", "1",
                         "--methods", "dualkv", "flash_ncopy", "--out", str(tmp_path), *TINY])
    assert report["token_reduction"] == report["ncopy_tokens"] / report["packed_tokens"] > 1
    attention = report["attention"]
    for name in ("dualkv", "flash_ncopy"):
        assert attention[name]["status"] == "ok"
        assert max(attention[name]["relative_errors"].values()) <= 2e-5
    assert attention["flash_ncopy"]["computed_pairs"] > attention["dualkv"]["computed_pairs"]
    assert report["step"]["dualkv"]["status"] == "ok" and report["step"]["dualkv"]["step_s"] > 0
    assert json.loads((tmp_path / "tree_bench.json").read_text())["packed_tokens"] == report["packed_tokens"]
    assert "token reduction" in (tmp_path / "tree_bench.txt").read_text()


def test_cpu_run_on_several_trees(tmp_path):
    one = bench.main(["--device", "cpu", "--dtype", "fp32", "--model", "tiny-qwen3", "--repeats", "1",
                      "--parts", "attention", "--methods", "dualkv", "--out", str(tmp_path / "one"), *TINY])
    two = bench.main(["--device", "cpu", "--dtype", "fp32", "--model", "tiny-qwen3", "--repeats", "1",
                      "--parts", "attention", "--methods", "dualkv", "flash_ncopy", "--trees", "2",
                      "--out", str(tmp_path / "two"), *TINY])
    assert two["workload"]["trees"] == 2 and two["workload"]["segments"] == 2 * one["workload"]["segments"]
    assert two["packed_tokens"] > one["packed_tokens"]
    for name in ("dualkv", "flash_ncopy"):
        assert two["attention"][name]["status"] == "ok"
        assert max(two["attention"][name]["relative_errors"].values()) <= 2e-5


@pytest.mark.parametrize("seed", range(6))
def test_flex_block_mask_is_the_tree_rule(seed):
    """Both forms of the FlexAttention rule (pre-order intervals, the ancestor table otherwise)
    allow exactly the pairs the tree allows."""
    from torch.nn.attention.flex_attention import create_mask

    rng = random.Random(seed)
    segments = rng.randint(1, 24)
    parents = [-1] + [rng.choice([-1, *range(i)]) for i in range(1, segments)]
    if seed % 2:  # pre-order: each segment's parent is an ancestor of (or is) the segment before it
        for s in range(1, segments):
            path = [s - 1]
            while parents[path[-1]] >= 0:
                path.append(parents[path[-1]])
            parents[s] = rng.choice([-1, *path])
    layout = dualkv.Layout.from_tree(parents, [rng.randint(1, 5) for _ in parents])
    if seed % 2:
        assert work.subtree_ends(layout) is not None
    seen, segment = work.ancestors(layout), layout.segment_ids
    q, k = torch.arange(layout.num_tokens)[:, None], torch.arange(layout.num_tokens)[None, :]
    expected = (k <= q) & seen[segment[:, None], segment[None, :]]
    mask = work.flex_tree_block_mask(layout, "cpu").mask_mod
    got = create_mask(mask, None, None, layout.num_tokens, layout.num_tokens, device="cpu")[0, 0]
    assert torch.equal(got, expected)
