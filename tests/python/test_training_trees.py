"""The policy update on groups of multi-turn trajectories (TrajectoryGroup, tree layouts) against
the same update written out on the whole batch packed as one tree layout: one process, then FSDP2
on 2 gloo processes with (dp, sp) = (2, 1) and (1, 2). One tree exceeds the micro-batch budget and
is split with its shared prefix repeated. fp32."""

import copy

import pytest
import torch
from distributed_support import run_ranks
from training_support import LEARNING_RATE, assert_same_update, check_fsdp_updates, models, reference_update
from trees_support import trajectory_groups

import dualkv
from dualkv.training import PackedPolicy, Parallelism, UpdateConfig, policy_update

# The first task's tree exceeds it; the other two fit.
MAX_TOKENS = 30


def config(**overrides):
    return UpdateConfig.grpo(MAX_TOKENS, clip_high=0.28, max_grad_norm=0.5, **overrides)


def _expected(lm, ref_lm, groups, cfg):
    expected_lm = copy.deepcopy(lm)
    trajectories = [t for g in groups for t in g.trajectories]
    group_ids = [i for i, g in enumerate(groups) for _ in g.trajectories]
    packed = dualkv.pack_trajectories(trajectories, group_ids=group_ids)
    loss, norm = reference_update(expected_lm, ref_lm, packed, [r for g in groups for r in g.rewards], cfg)
    return loss, norm, {n: p.detach().clone() for n, p in expected_lm.named_parameters()}


def _check_metrics(metrics, loss, norm, what):
    # The GRPO loss is a sum of O(1) advantage-weighted terms that nearly cancel (here ~1e-3): its
    # rounding is absolute, not relative to the sum.
    assert metrics["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-7), what
    assert metrics["grad_norm"] == pytest.approx(norm, rel=1e-4), what
    assert not metrics["skipped"]
    assert metrics["split_groups"] == [0]
    assert metrics["ncopy_tokens"] > metrics["packed_tokens"]


def test_the_batch_has_a_tree_to_split():
    groups = trajectory_groups(1)
    sizes = [dualkv.pack_trajectories(list(g.trajectories)).num_tokens for g in groups]
    assert sizes[0] > MAX_TOKENS >= max(sizes[1:])


def test_single_process_update_on_trajectories_equals_whole_batch_update():
    lm, ref_lm = models()
    groups, cfg = trajectory_groups(1), config()
    loss, norm, expected = _expected(lm, ref_lm, groups, cfg)
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    policy = PackedPolicy(lm)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=LEARNING_RATE)
    metrics = policy_update(policy, optimizer, groups, cfg, Parallelism.single(), reference=PackedPolicy(ref_lm))
    assert metrics["micro_steps"] > 1
    _check_metrics(metrics, loss, norm, "one process")
    assert_same_update(before, dict(lm.named_parameters()), expected, "one process")


def _fsdp_body(rank, world):
    check_fsdp_updates(rank, world, trajectory_groups(1), config(), _expected, _check_metrics)


def test_fsdp2_update_on_trajectories_on_two_ranks_equals_whole_batch_update(tmp_path):
    run_ranks(2, tmp_path, _fsdp_body)


def test_a_batch_mixing_prompt_groups_and_trajectory_groups_is_refused():
    from training_support import rollouts

    lm, _ = models()
    mixed = [*rollouts()[:1], *trajectory_groups(1)[:1]]
    with pytest.raises(TypeError, match="rollouts: expected RolloutGroups or TrajectoryGroups, one kind"):
        policy_update(PackedPolicy(lm), torch.optim.AdamW(lm.parameters()), mixed, config(kl_coef=0.0),
                      Parallelism.single())
