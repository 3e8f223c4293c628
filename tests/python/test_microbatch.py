"""Group-aware micro-batching: whole groups per micro-batch unless a group exceeds the budget
(then split, and reported), every response exactly once, budgets held, data-parallel ranks
balanced by packed tokens and stepping together."""

import collections
import random

import pytest
import torch

import dualkv
from dualkv.microbatch import (
    pack_microbatch,
    pack_trajectory_microbatch,
    plan_microbatches,
    plan_trajectory_microbatches,
)


def _random_batch(rng):
    groups = rng.randint(1, 8)
    prompts = [rng.randint(1, 40) for _ in range(groups)]
    responses = [[rng.randint(1, 30) for _ in range(rng.randint(1, 9))] for _ in range(groups)]
    return prompts, responses


def _check_plan(plan, prompts, responses, dp_size):
    max_tokens = plan.max_tokens
    assert len(plan.ranks) == dp_size
    seen = collections.Counter()
    slices_of_group = collections.defaultdict(int)
    largest_slice = 0
    for batches in plan.ranks:
        assert batches, "a rank without data"
        # Ranks step together unless a rank's micro-batches cannot be split without splitting a slice.
        assert len(batches) == plan.num_steps or all(len(mb.slices) == 1 for mb in batches)
        for mb in batches:
            assert 0 < mb.tokens <= max_tokens
            groups = [s.group for s in mb.slices]
            assert len(groups) == len(set(groups)), "a group twice in one micro-batch"
            for s in mb.slices:
                assert s.tokens == prompts[s.group] + sum(responses[s.group][i] for i in s.responses)
                assert list(s.responses) == sorted(set(s.responses))
                slices_of_group[s.group] += 1
                largest_slice = max(largest_slice, s.tokens)
            seen.update(mb.responses)
    everything = {(g, i) for g, group in enumerate(responses) for i in range(len(group))}
    assert set(seen) == everything and max(seen.values()) == 1, "not every response exactly once"
    oversize = {g for g in range(len(prompts)) if prompts[g] + sum(responses[g]) > max_tokens}
    assert {g for g, n in slices_of_group.items() if n > 1} == oversize == set(plan.split_groups)
    loads = plan.rank_tokens()
    assert max(loads) - min(loads) <= largest_slice


def test_random_batches_are_covered_exactly_once_within_budget_and_balanced():
    rng = random.Random(12)
    checked = 0
    while checked < 400:
        prompts, responses = _random_batch(rng)
        longest = max(p + max(r) for p, r in zip(prompts, responses))
        max_tokens = rng.randint(longest, longest + sum(prompts) + sum(map(sum, responses)))
        dp_size = rng.randint(1, 4)
        try:
            plan = plan_microbatches(prompts, responses, max_tokens=max_tokens, dp_size=dp_size)
        except ValueError as error:
            assert str(error).startswith("dp_size:")  # more ranks than slices, the only refusal here
            continue
        _check_plan(plan, prompts, responses, dp_size)
        checked += 1


def test_no_divisibility_is_required():
    # 5 groups of N = 3 on 2 ranks with room for 4 responses: nothing divides anything.
    prompts, responses = [10] * 5, [[4, 5, 6]] * 5
    plan = plan_microbatches(prompts, responses, max_tokens=35, dp_size=2)
    _check_plan(plan, prompts, responses, 2)
    assert plan.split_groups == ()
    assert sorted(len(mb.slices) for batches in plan.ranks for mb in batches) == [1, 1, 1, 1, 1]


def test_a_group_is_split_only_when_it_exceeds_the_budget_and_its_slices_never_share_a_micro_batch():
    prompts, responses = [8, 3], [[10, 95, 10, 2], [5, 5]]
    plan = plan_microbatches(prompts, responses, max_tokens=103, dp_size=1)
    _check_plan(plan, prompts, responses, 1)
    assert plan.split_groups == (0,)
    assert sum(1 for mb in plan.ranks[0] for s in mb.slices if s.group == 0) == 2


def test_packed_micro_batch_keeps_each_group_whole_and_separate():
    rng = random.Random(3)
    lengths = [(7, [3, 5, 1]), (2, [4, 2]), (5, [6]), (1, [2, 1, 3, 2])]
    prompts = [[rng.randrange(1, 100) for _ in range(p)] for p, _ in lengths]
    responses = [[[rng.randrange(1, 100) for _ in range(r)] for r in rs] for _, rs in lengths]
    plan = plan_microbatches([p for p, _ in lengths], [rs for _, rs in lengths], max_tokens=20, dp_size=2)
    for mb in (mb for batches in plan.ranks for mb in batches):
        packed = pack_microbatch(mb, prompts, responses)
        layout, ids = packed.layout, packed.input_ids[0].tolist()
        assert layout.num_groups == len(mb.slices)
        segments = layout.cu_seqlens.tolist()
        firsts = layout.cu_groups.tolist()
        for slot, s in enumerate(mb.slices):
            first = firsts[slot]
            assert ids[segments[first] : segments[first + 1]] == prompts[s.group]
            for j, i in enumerate(s.responses):
                assert ids[segments[first + 1 + j] : segments[first + 2 + j]] == responses[s.group][i]
        expected_groups = torch.tensor([slot for slot, s in enumerate(mb.slices) for _ in s.responses])
        assert torch.equal(packed.response_group, expected_groups)
        assert isinstance(packed, dualkv.PackedBatch)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match=r"max_tokens: group 1's prompt \(6 tokens\) with its response 0 \(5 tokens\)"):
        plan_microbatches([2, 6], [[3], [5, 1]], max_tokens=10)
    with pytest.raises(ValueError, match="dp_size: 3 data-parallel ranks need at least as many prompt groups, got 2"):
        plan_microbatches([2, 6], [[3], [1]], max_tokens=10, dp_size=3)
    with pytest.raises(ValueError, match=r"response_lengths\[1\]: expected a non-empty sequence"):
        plan_microbatches([2, 6], [[3], []], max_tokens=10)
    with pytest.raises(ValueError, match=r"response_lengths\[0\]\[1\]: must be >= 1, got 0"):
        plan_microbatches([2], [[3, 0]], max_tokens=10)
    with pytest.raises(ValueError, match=r"prompt_lengths\[0\]: must be >= 1"):
        plan_microbatches([0], [[3]], max_tokens=10)
    with pytest.raises(TypeError, match="max_tokens: expected an int"):
        plan_microbatches([2], [[3]], max_tokens=10.5)
    with pytest.raises(ValueError, match="response_lengths: expected one list per prompt"):
        plan_microbatches([2, 3], [[3]], max_tokens=10)


# --- trajectories of tree layouts ---------------------------------------------------------------


def _random_trajectories(rng):
    """Several tasks, each a tree: a prompt, first answers shared in pairs, tool outputs, second
    answers; some trajectories end early (a prefix of another)."""
    trajectories = []
    for task in range(rng.randint(1, 4)):
        prompt = [100 + task, *(rng.randint(1, 90) for _ in range(rng.randint(1, 12)))]
        for pair in range(rng.randint(1, 3)):
            answer = [rng.randint(1, 90) for _ in range(rng.randint(1, 8))]
            for _ in range(rng.randint(1, 2)):
                trajectory = [(prompt, False), (answer, True)]
                if rng.random() < 0.8:
                    trajectory += [([rng.randint(1, 90) for _ in range(rng.randint(1, 6))], False),
                                   ([rng.randint(1, 90) for _ in range(rng.randint(1, 5))], True)]
                trajectories.append(trajectory)
    return trajectories


def _tokens(trajectory):
    return [t for ids, _ in trajectory for t in ids]


def test_trajectory_plans_keep_trees_whole_unless_too_large_and_cover_every_trajectory_once():
    rng = random.Random(13)
    for _ in range(60):
        trajectories = _random_trajectories(rng)
        longest = max(len(_tokens(t)) for t in trajectories)
        whole = dualkv.pack_trajectories(trajectories).num_tokens
        max_tokens = rng.randint(longest, whole + 5)
        try:
            plan = plan_trajectory_microbatches(trajectories, max_tokens=max_tokens, dp_size=rng.randint(1, 3))
        except ValueError as error:
            assert "dp_size" in str(error)
            continue
        seen = collections.Counter()
        slices_of_tree = collections.Counter()
        for batches in plan.ranks:
            for mb in batches:
                packed = pack_trajectory_microbatch(mb, trajectories)
                assert packed.num_tokens <= mb.tokens <= max_tokens
                for s in mb.slices:
                    assert s.tokens == dualkv.pack_trajectories([trajectories[i] for i in s.responses]).num_tokens
                    slices_of_tree[s.group] += 1
                seen.update(i for _, i in mb.responses)
                # Each trajectory's tokens sit along its path, at its own positions.
                for row, (_, i) in enumerate(mb.responses):
                    count = int(packed.response_lengths[row])
                    trained = [t for ids, flag in trajectories[i] for t in ids if flag]
                    assert packed.input_ids[0, packed.token_rows[row, :count]].tolist() == trained
        assert set(seen) == set(range(len(trajectories))) and max(seen.values()) == 1
        trees = collections.defaultdict(list)
        for i, t in enumerate(trajectories):
            trees[_tokens(t)[0]].append(t)
        too_large = {
            tree for tree, members in enumerate(trees.values()) if dualkv.pack_trajectories(members).num_tokens > max_tokens
        }
        assert {tree for tree, n in slices_of_tree.items() if n > 1} == too_large == set(plan.split_groups)


def test_a_split_tree_repeats_its_shared_prefix_in_each_slice():
    prompt = list(range(1, 11))
    trajectories = [[(prompt, False), ([20 + b, 30, 31, 32], True)] for b in range(4)]
    plan = plan_trajectory_microbatches(trajectories, max_tokens=18)
    assert plan.split_groups == (0,)
    slices = [s for batches in plan.ranks for mb in batches for s in mb.slices]
    assert sorted(len(s.responses) for s in slices) == [2, 2]  # 10 + 4 + 4 each: the prompt twice
    assert all(s.tokens == 18 for s in slices)


def test_a_trajectory_longer_than_the_budget_is_an_error():
    with pytest.raises(ValueError, match=r"max_tokens: trajectories\[1\] alone has 9 tokens"):
        plan_trajectory_microbatches([[([1, 2], False), ([3], True)], [([1, 2, 3, 4, 5], False), ([6] * 4, True)]],
                                     max_tokens=8)
