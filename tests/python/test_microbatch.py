"""Group-aware micro-batching: whole groups per micro-batch unless a group exceeds the budget
(then split, and reported), every response exactly once, budgets held, data-parallel ranks
balanced by packed tokens and stepping together."""

import collections
import random

import pytest
import torch

import dualkv
from dualkv.microbatch import pack_microbatch, plan_microbatches


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
