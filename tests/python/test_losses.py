"""dualkv.losses against naive per-sequence, per-token Python loops."""

import math
import random
import zlib

import pytest
import torch

from dualkv import losses

AGGREGATIONS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]


def _ragged_batch(seed, num_responses=7, max_len=9):
    """Per-token tensors with a ragged response mask (one response fully masked)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, max_len + 1, (num_responses,), generator=gen)
    lengths[3] = 0
    mask = torch.arange(max_len)[None, :] < lengths[:, None]
    logprobs = -torch.rand(num_responses, max_len, generator=gen, dtype=torch.float64) * 3
    old = logprobs + torch.randn(num_responses, max_len, generator=gen, dtype=torch.float64) * 0.4
    ref = logprobs + torch.randn(num_responses, max_len, generator=gen, dtype=torch.float64) * 0.3
    advantages = torch.randn(num_responses, generator=gen, dtype=torch.float64)
    return logprobs.float(), old.float(), ref.float(), advantages.float(), mask


def _naive_token_loss(lp, old, adv, clip_low, clip_high, clip_c):
    ratio = math.exp(lp - old)
    clipped_ratio = min(max(ratio, 1 - clip_low), 1 + clip_high)
    loss = max(-adv * ratio, -adv * clipped_ratio)
    if clip_c is not None and adv < 0:
        loss = min(loss, -adv * clip_c)
    return loss


def _naive_kl(lp, ref, estimator):
    if estimator == "k1":
        return lp - ref
    return math.exp(ref - lp) - (ref - lp) - 1


def _naive_aggregate(per_sequence_values, mode):
    """per_sequence_values: list (one per response) of lists of its masked token values."""
    if mode == "token-mean":
        tokens = [v for seq in per_sequence_values for v in seq]
        return sum(tokens) / len(tokens)
    if mode == "seq-mean-token-sum":
        return sum(sum(seq) for seq in per_sequence_values) / len(per_sequence_values)
    return sum(sum(seq) / len(seq) if seq else 0.0 for seq in per_sequence_values) / len(per_sequence_values)


def _naive_policy_loss(lp, old, ref, adv, mask, *, clip_low, clip_high, clip_c, mode, kl_coef, estimator):
    per_sequence = []
    for i in range(lp.shape[0]):
        values = []
        for j in range(lp.shape[1]):
            if not mask[i, j]:
                continue
            value = _naive_token_loss(float(lp[i, j]), float(old[i, j]), float(adv[i]), clip_low, clip_high, clip_c)
            if kl_coef:
                value += kl_coef * _naive_kl(float(lp[i, j]), float(ref[i, j]), estimator)
            values.append(value)
        per_sequence.append(values)
    return _naive_aggregate(per_sequence, mode)


@pytest.mark.parametrize("mode", AGGREGATIONS)
@pytest.mark.parametrize(
    "clip_low, clip_high, clip_c",
    [(0.2, None, None), (0.2, 0.28, None), (0.1, 0.3, 3.0), (0.2, None, 1.5)],
)
@pytest.mark.parametrize("kl_coef, estimator", [(0.0, "k3"), (0.05, "k1"), (0.04, "k3")])
def test_policy_loss_matches_naive_loops(mode, clip_low, clip_high, clip_c, kl_coef, estimator):
    lp, old, ref, adv, mask = _ragged_batch(seed=zlib.crc32(repr((mode, clip_low, clip_c, kl_coef)).encode()))
    got = losses.policy_loss(
        lp,
        old,
        adv,
        mask,
        clip_low=clip_low,
        clip_high=clip_high,
        clip_c=clip_c,
        aggregation=mode,
        ref_logprobs=ref,
        kl_coef=kl_coef,
        kl_estimator=estimator,
    )
    expected = _naive_policy_loss(
        lp,
        old,
        ref,
        adv,
        mask,
        clip_low=clip_low,
        clip_high=clip_low if clip_high is None else clip_high,
        clip_c=clip_c,
        mode=mode,
        kl_coef=kl_coef,
        estimator=estimator,
    )
    assert got.dtype == torch.float32 and got.dim() == 0
    assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_clips_are_active_in_the_test_data():
    # The comparison above only means something if some ratios leave the clip range on both sides
    # and the dual clip binds somewhere.
    lp, old, _, adv, mask = _ragged_batch(seed=0)
    ratio = torch.exp(lp - old)[mask]
    assert (ratio > 1.3).any() and (ratio < 0.9).any()
    loose = losses.clipped_policy_loss(lp, old, adv, clip_low=0.1, clip_high=0.3)
    dual = losses.clipped_policy_loss(lp, old, adv, clip_low=0.1, clip_high=0.3, clip_c=1.2)
    assert (loose[mask] != dual[mask]).any()


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_kl_divergence_per_token(estimator):
    lp, _, ref, _, _ = _ragged_batch(seed=3)
    got = losses.kl_divergence(lp, ref, estimator)
    for i in range(lp.shape[0]):
        for j in range(lp.shape[1]):
            assert float(got[i, j]) == pytest.approx(_naive_kl(float(lp[i, j]), float(ref[i, j]), estimator), abs=1e-6)


def test_per_token_advantages_equal_broadcast_per_response():
    lp, old, _, adv, mask = _ragged_batch(seed=5)
    per_response = losses.clipped_policy_loss(lp, old, adv, clip_high=0.28)
    per_token = losses.clipped_policy_loss(lp, old, adv[:, None].expand_as(lp).clone(), clip_high=0.28)
    torch.testing.assert_close(per_response, per_token)


def _naive_group_advantages(rewards, group_ids, scale_by_std, eps):
    out = []
    for i, reward in enumerate(rewards):
        members = [r for r, g in zip(rewards, group_ids) if g == group_ids[i]]
        mean = sum(members) / len(members)
        if not scale_by_std:
            out.append(reward - mean)
            continue
        var = sum((r - mean) ** 2 for r in members) / (len(members) - 1) if len(members) > 1 else 0.0
        out.append((reward - mean) / (math.sqrt(var) + eps))
    return out


@pytest.mark.parametrize("scale_by_std", [True, False])
def test_group_advantages_match_naive(scale_by_std):
    rng = random.Random(11)
    group_ids = [7, 7, 7, 2, 2, 9, 4, 4, 4, 4, 7]  # unsorted ids, a singleton group, interleaving
    rewards = [rng.choice([0.0, 1.0, 0.5]) + rng.random() for _ in group_ids]
    got = losses.group_advantages(torch.tensor(rewards), torch.tensor(group_ids), scale_by_std=scale_by_std)
    expected = _naive_group_advantages(rewards, group_ids, scale_by_std, eps=1e-6)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-6)
    assert got[group_ids.index(9)] == 0


def test_group_with_equal_rewards_has_zero_advantage():
    got = losses.group_advantages(torch.ones(4), torch.zeros(4, dtype=torch.long))
    assert torch.equal(got, torch.zeros(4))


@pytest.mark.parametrize("eps", [0.0, 1e-6])
@pytest.mark.parametrize("scale_by_std", [True, False])
def test_zero_variance_groups_have_exactly_zero_advantage_whatever_eps(eps, scale_by_std):
    """Three 0.1s average to 0.10000001 in float32: without the equality rule the group would get
    advantages of +-0.58 (eps=0) instead of 0."""
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.3, 0.7, 5.0])
    group_ids = torch.tensor([0, 0, 0, 1, 1, 2])
    got = losses.group_advantages(rewards, group_ids, eps=eps, scale_by_std=scale_by_std)
    assert torch.isfinite(got).all()
    assert torch.equal(got[[0, 1, 2, 5]], torch.zeros(4))
    expected = torch.tensor([-1.0, 1.0]) * (0.2 if not scale_by_std else 1 / (math.sqrt(0.08) + eps) * 0.2)
    torch.testing.assert_close(got[3:5], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rewards_are_refused_naming_the_group_and_response(bad):
    rewards = torch.tensor([0.5, 1.0, 0.0, bad, 0.2])
    group_ids = torch.tensor([4, 7, 4, 7, 4])
    with pytest.raises(ValueError, match=r"rewards\[3\]: .* is not finite \(response 1 of group 1\)"):
        losses.group_advantages(rewards, group_ids)


def test_masked_positions_never_reach_the_loss_or_its_gradient():
    """Trainers fill positions past a response's end with anything, -inf log-probs included."""
    lp, old, ref, adv, mask = _ragged_batch(seed=21)
    poison = torch.tensor([float("-inf"), float("inf"), float("nan")]).repeat(mask.numel())[: mask.numel()]
    poison = poison.view_as(mask)
    results = []
    for fill in (None, poison):
        for mode in losses.AGGREGATION_MODES:
            current = lp.clone().requires_grad_()
            inputs = [t if fill is None else torch.where(mask, t, fill) for t in (current, old, ref)]
            per_token_adv = adv[:, None].expand_as(lp) if fill is None else torch.where(mask, adv[:, None], fill)
            loss = losses.policy_loss(
                inputs[0], inputs[1], per_token_adv, mask, aggregation=mode, ref_logprobs=inputs[2], kl_coef=0.1
            )
            (grad,) = torch.autograd.grad(loss, current)
            results.append((loss.detach(), grad))
    clean, poisoned = results[: len(results) // 2], results[len(results) // 2 :]
    for (loss_a, grad_a), (loss_b, grad_b) in zip(clean, poisoned):
        assert torch.isfinite(loss_b) and torch.isfinite(grad_b).all()
        assert torch.equal(loss_a, loss_b) and torch.equal(grad_a, grad_b)
        assert torch.equal(grad_b[~mask], torch.zeros_like(grad_b[~mask]))
    values = torch.where(mask, lp, float("nan"))
    for mode in losses.AGGREGATION_MODES:
        assert torch.equal(losses.aggregate_tokens(values, mask, mode), losses.aggregate_tokens(lp, mask, mode))


def test_gradient_flows_only_through_unclipped_tokens():
    lp, old, _, adv, mask = _ragged_batch(seed=8)
    lp = lp.clone().requires_grad_()
    losses.policy_loss(lp, old, adv, mask, clip_low=0.2, clip_high=0.28).backward()
    ratio = torch.exp(lp.detach() - old)
    clipped_high = (adv[:, None] > 0) & (ratio > 1.28)
    clipped_low = (adv[:, None] < 0) & (ratio < 0.8)
    assert torch.all(lp.grad[clipped_high | clipped_low | ~mask] == 0)
    assert torch.all(lp.grad[mask & ~clipped_high & ~clipped_low] != 0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda lp, m: losses.aggregate_tokens(lp, m, "mean"), "mode"),
        (lambda lp, m: losses.aggregate_tokens(lp, m[:, :3], "token-mean"), "response_mask"),
        (lambda lp, m: losses.kl_divergence(lp, lp, "k2"), "estimator"),
        (lambda lp, m: losses.policy_loss(lp, lp, torch.zeros(2), m), "advantages"),
        (lambda lp, m: losses.policy_loss(lp, lp, torch.zeros(lp.shape[0]), m, kl_coef=0.1), "ref_logprobs"),
        (lambda lp, m: losses.clipped_policy_loss(lp, lp, torch.zeros(lp.shape[0]), clip_c=0.5), "clip_c"),
        (lambda lp, m: losses.group_advantages(lp[:, 0], lp[:, 0]), "group_ids"),
        # NaN options would make the loss NaN; a negative eps can divide by zero; a mask holding
        # other values than 0 and 1 would weight tokens; a 1-D logprobs is not a response layout.
        (lambda lp, m: losses.clipped_policy_loss(lp, lp, lp[:, 0], clip_high=float("nan")), "clip_high: must be"),
        (lambda lp, m: losses.clipped_policy_loss(lp, lp, lp[:, 0], clip_c=float("nan")), "clip_c: the dual-clip"),
        (lambda lp, m: losses.policy_loss(lp, lp, lp[:, 0], m, ref_logprobs=lp, kl_coef=float("nan")), "kl_coef"),
        (lambda lp, m: losses.policy_loss(lp, lp, lp[:, 0], m, ref_logprobs=lp, kl_coef=-0.1), "kl_coef"),
        (lambda lp, m: losses.group_advantages(lp[:, 0], m[:, 0].long(), eps=float("nan")), "eps: must be"),
        (lambda lp, m: losses.group_advantages(lp[:, 0], m[:, 0].long(), eps=-1e-6), "eps: must be"),
        (lambda lp, m: losses.aggregate_tokens(lp, m.float() * 2), "response_mask: must be boolean or hold only"),
        (lambda lp, m: losses.clipped_policy_loss(lp[0], lp[0], lp[:, 0]), "logprobs: expected a 2-D tensor"),
    ],
)
def test_bad_arguments_name_the_argument(call, message):
    lp, _, _, _, mask = _ragged_batch(seed=1)
    with pytest.raises(ValueError, match=message):
        call(lp, mask)


def test_float_zero_one_mask_equals_bool_mask():
    lp, _, _, _, mask = _ragged_batch(seed=3)
    for mode in losses.AGGREGATION_MODES:
        assert losses.aggregate_tokens(lp, mask.float(), mode) == losses.aggregate_tokens(lp, mask, mode)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda lp, m: losses.group_advantages(lp[:, 0].tolist(), m[:, 0].long()), "rewards"),
        (lambda lp, m: losses.clipped_policy_loss(lp, lp, lp[:, 0], clip_low="0.2"), "clip_low"),
        (lambda lp, m: losses.clipped_policy_loss(lp, lp, lp[:, 0].tolist()), "advantages"),
        (lambda lp, m: losses.kl_divergence(lp, lp.tolist()), "ref_logprobs"),
        (lambda lp, m: losses.policy_loss(lp, lp, lp[:, 0], m, ref_logprobs=lp, kl_coef=True), "kl_coef"),
    ],
)
def test_wrong_types_name_the_argument(call, argument):
    lp, _, _, _, mask = _ragged_batch(seed=1)
    with pytest.raises(TypeError, match=f"^{argument}: expected"):
        call(lp, mask)
