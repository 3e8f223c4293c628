"""GRPO / DAPO losses on the packed response layout.

Every per-token tensor here is (num_responses, max_R): one row per response in packing order
(group-major, as `dualkv.pack` / `dualkv.pack_rows` produce it), token j of the response in
column j, and a `response_mask` that is true only on the tokens that count. Because the packed
log-probs are equal to the N-copy ones, these losses are equal to the N-copy losses.
"""

from __future__ import annotations

import math
import numbers

import torch

AGGREGATION_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_ESTIMATORS = ("k1", "k3")

__all__ = [
    "AGGREGATION_MODES",
    "KL_ESTIMATORS",
    "group_advantages",
    "clipped_policy_loss",
    "kl_divergence",
    "aggregate_tokens",
    "policy_loss",
]


def _real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__}")
    return float(value)


def _check_tensor(name: str, value, dim: int | None = None) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    if dim is not None and value.dim() != dim:
        raise ValueError(f"{name}: expected a {dim}-D tensor, got shape {tuple(value.shape)}")


def _check_mask(response_mask: torch.Tensor) -> None:
    """A mask selects tokens: other values would silently weight them."""
    if response_mask.dtype != torch.bool and not bool(((response_mask == 0) | (response_mask == 1)).all()):
        raise ValueError("response_mask: must be boolean or hold only 0 and 1")


def _check_same_shape(reference_name: str, reference: torch.Tensor, **others: torch.Tensor) -> None:
    for name, tensor in others.items():
        _check_tensor(name, tensor)
        if tensor.shape != reference.shape:
            raise ValueError(
                f"{name}: shape {tuple(tensor.shape)} must equal the shape of {reference_name} {tuple(reference.shape)}"
            )


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO advantages: per group, (r - mean) / (std + eps); (r - mean) when scale_by_std=False.

    rewards: (num_responses,) one finite scalar reward per response (a NaN or infinite one is an
    error naming its group and response). group_ids: (num_responses,) the group of each response
    (`PackedBatch.response_group`). The std is the unbiased sample std, as in the GRPO paper. A
    group whose rewards are all equal (a single response among them) has advantage exactly 0,
    whatever eps, eps=0 included: nothing in it is better than its baseline. Returns
    (num_responses,) float32.
    """
    _check_tensor("rewards", rewards, dim=1)
    _check_same_shape("rewards", rewards, group_ids=group_ids)
    if group_ids.dtype.is_floating_point or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids: expected an integer tensor, got {group_ids.dtype}")
    if not (math.isfinite(_real("eps", eps)) and eps >= 0):
        raise ValueError(f"eps: must be finite and >= 0, got {eps}")
    _, group_of = torch.unique(group_ids, return_inverse=True)
    _check_finite_rewards(rewards, group_of)
    rewards = rewards.float()
    num_groups = int(group_of.max()) + 1 if group_of.numel() else 0
    count = torch.zeros(num_groups, dtype=torch.float32, device=rewards.device)
    count.index_add_(0, group_of, torch.ones_like(rewards))
    total = torch.zeros_like(count).index_add_(0, group_of, rewards)
    mean = total / count
    # The mean of equal rewards need not round to them (three 0.1s average to 0.10000001), so a
    # group of equal rewards is found by comparing them, and given exactly 0.
    highest = torch.full_like(count, -math.inf).scatter_reduce(0, group_of, rewards, "amax")
    lowest = torch.full_like(count, math.inf).scatter_reduce(0, group_of, rewards, "amin")
    spread = (highest > lowest)[group_of]
    centered = torch.where(spread, rewards - mean[group_of], 0.0)
    if not scale_by_std:
        return centered
    squares = torch.zeros_like(count).index_add_(0, group_of, centered * centered)
    std = torch.sqrt(squares / (count - 1).clamp(min=1))[group_of]  # Bessel's correction
    # std is 0 with a spread only when the squares underflow; such a group gets 0 too.
    return torch.where(std > 0, centered / (std + eps), 0.0)


def _check_finite_rewards(rewards: torch.Tensor, group_of: torch.Tensor) -> None:
    """A NaN or infinite reward would make its whole group's advantages NaN."""
    bad = (~torch.isfinite(rewards)).nonzero()
    if bad.numel():
        index = int(bad[0, 0])
        group = int(group_of[index])
        response = int((group_of[:index] == group).sum())
        raise ValueError(
            f"rewards[{index}]: {float(rewards[index])} is not finite (response {response} of group {group}); "
            "every reward must be a finite number"
        )


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    clip_c: float | None = None,
) -> torch.Tensor:
    """Per-token PPO-clip policy loss, with DAPO's asymmetric clip and the dual clip.

    ratio = exp(logprobs - old_logprobs); loss = max(-A * ratio, -A * clip(ratio, 1 - clip_low,
    1 + clip_high)). clip_high defaults to clip_low (symmetric PPO); DAPO's "clip-higher" sets it
    larger. With clip_c (> 1), tokens with A < 0 are additionally bounded by -A * clip_c (dual
    clip), so a huge ratio on a negative-advantage token cannot blow the loss up.
    advantages: (num_responses,) per response or (num_responses, max_R) per token.
    Returns (num_responses, max_R) float32; aggregate it with `aggregate_tokens`.
    """
    _check_tensor("logprobs", logprobs, dim=2)
    _check_same_shape("logprobs", logprobs, old_logprobs=old_logprobs)
    _check_tensor("advantages", advantages)
    if clip_high is None:
        clip_high = clip_low
    # Written so that NaN fails every rule (a NaN bound would make the loss NaN); an infinite
    # clip_high or clip_c means no bound.
    if not (0.0 <= _real("clip_low", clip_low) < 1.0):
        raise ValueError(f"clip_low: must be in [0, 1), got {clip_low}")
    if not _real("clip_high", clip_high) >= 0.0:
        raise ValueError(f"clip_high: must be >= 0, got {clip_high}")
    if clip_c is not None and not _real("clip_c", clip_c) > 1.0:
        raise ValueError(f"clip_c: the dual-clip bound must be > 1, got {clip_c}")
    advantages = _per_token(advantages, logprobs, "advantages")
    ratio = torch.exp(logprobs.float() - old_logprobs.float())
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    if clip_c is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * clip_c), loss)
    return loss


def kl_divergence(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled tokens (Schulman's estimators).

    "k1": logprobs - ref_logprobs (unbiased, high variance, can be negative).
    "k3": exp(ref - logprobs) - (ref - logprobs) - 1 (unbiased, low variance, >= 0; GRPO's choice).
    Returns (num_responses, max_R) float32.
    """
    _check_tensor("logprobs", logprobs)
    _check_same_shape("logprobs", logprobs, ref_logprobs=ref_logprobs)
    log_ratio = ref_logprobs.float() - logprobs.float()
    if estimator == "k1":
        return -log_ratio
    if estimator == "k3":
        return torch.exp(log_ratio) - log_ratio - 1.0
    raise ValueError(f"estimator: expected one of {KL_ESTIMATORS}, got {estimator!r}")


def aggregate_tokens(values: torch.Tensor, response_mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Reduces per-token values (num_responses, max_R) to a scalar over the masked tokens.

    "token-mean": sum over all masked tokens / their count (DAPO; long responses weigh more).
    "seq-mean-token-sum": mean over responses of each response's masked sum (Dr. GRPO style).
    "seq-mean-token-mean": mean over responses of each response's masked mean (original GRPO).
    A response with no masked token contributes 0 to the sequence means; an all-empty mask gives 0.
    Values outside the mask are selected away, never multiplied by 0, so a NaN or inf there does
    not reach the result (nor its gradient's other entries; `policy_loss` also masks its inputs,
    so that a non-finite input there has no non-finite backward of its own).
    """
    _check_tensor("values", values, dim=2)
    _check_same_shape("values", values, response_mask=response_mask)
    _check_mask(response_mask)
    selected = response_mask.bool()
    mask = selected.to(values.dtype)
    masked = torch.where(selected, values, 0.0)
    if mode == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if mode == "seq-mean-token-sum":
        return masked.sum(dim=1).mean()
    if mode == "seq-mean-token-mean":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    raise ValueError(f"mode: expected one of {AGGREGATION_MODES}, got {mode!r}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    clip_c: float | None = None,
    aggregation: str = "token-mean",
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
) -> torch.Tensor:
    """GRPO / DAPO scalar loss: aggregate(clipped policy loss + kl_coef * KL to the reference).

    GRPO: clip_high=None, aggregation="seq-mean-token-mean", ref_logprobs and kl_coef > 0.
    DAPO: clip_low=0.2, clip_high=0.28, aggregation="token-mean", kl_coef=0.
    Aggregation is linear, so this equals aggregating the two terms separately and adding them.
    Positions outside response_mask never contribute, whatever they hold (padding log-probs of
    -inf, say): the inputs are masked before any arithmetic, so the loss and its gradient stay
    finite.
    """
    if not (math.isfinite(_real("kl_coef", kl_coef)) and kl_coef >= 0.0):
        raise ValueError(f"kl_coef: must be finite and >= 0, got {kl_coef}")
    _check_tensor("logprobs", logprobs, dim=2)
    _check_same_shape("logprobs", logprobs, old_logprobs=old_logprobs, response_mask=response_mask)
    _check_mask(response_mask)
    selected = response_mask.bool()

    def masked(values: torch.Tensor) -> torch.Tensor:
        return torch.where(selected, values, torch.zeros((), dtype=values.dtype, device=values.device))

    if isinstance(advantages, torch.Tensor) and advantages.shape == logprobs.shape:
        advantages = masked(advantages)
    loss = clipped_policy_loss(
        masked(logprobs), masked(old_logprobs), advantages, clip_low=clip_low, clip_high=clip_high, clip_c=clip_c
    )
    if kl_coef != 0.0:
        if ref_logprobs is None:
            raise ValueError("ref_logprobs: required when kl_coef != 0")
        _check_same_shape("logprobs", logprobs, ref_logprobs=ref_logprobs)
        loss = loss + kl_coef * kl_divergence(masked(logprobs), masked(ref_logprobs), kl_estimator)
    return aggregate_tokens(loss, response_mask, aggregation)


def _per_token(advantages: torch.Tensor, like: torch.Tensor, name: str) -> torch.Tensor:
    """Broadcasts per-response advantages (num_responses,) to the token layout of `like`."""
    advantages = advantages.float()
    if advantages.dim() == 1 and like.dim() == 2 and advantages.shape[0] == like.shape[0]:
        return advantages[:, None].expand_as(like)
    if advantages.shape == like.shape:
        return advantages
    raise ValueError(f"{name}: expected shape ({like.shape[0]},) or {tuple(like.shape)}, got {tuple(advantages.shape)}")
