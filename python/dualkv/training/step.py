"""One GRPO/DAPO policy update over a rollout batch: packed micro-batches, sequence-parallel when
asked, gradient accumulation, global clipping, one optimizer step.

1. Plan group-aware micro-batches for this data-parallel rank (`dualkv.microbatch`: prompt groups,
   or the trees of trajectory groups); advantages are normalised per group over all its
   responses (trajectories) before any split.
2. Old (and, with a KL term, reference) log-probs: forward only, through the same packed path.
3. Per micro-batch: log-probs, per-token loss times a weight that normalises by the WHOLE batch
   (all ranks, all micro-batches), backward; FSDP reduce-scatters every micro-batch's gradients
   into the sharded ones (skipping that until the last micro-batch would hold a whole unsharded
   gradient per GPU meanwhile: 61 GB for Qwen3-30B-A3B).
   The sum of the micro-batch losses over every rank is then exactly the aggregated loss of the
   whole batch, however it was split.
4. Clip the global gradient norm, step the optimizer (skipped when the loss or the norm is not
   finite).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .. import losses
from ..distributed.sequence import shard_sequence
from ..microbatch import (
    MicroBatch,
    pack_microbatch,
    pack_trajectory_microbatch,
    plan_microbatches,
    plan_trajectory_microbatches,
)
from ..packing import PackedBatch
from ..trajectories import flatten_trajectories
from .parallel import Parallelism
from .policy import PackedPolicy
from .rollouts import RolloutGroup, TrajectoryGroup

__all__ = ["UpdateConfig", "policy_update"]


@dataclass(frozen=True)
class UpdateConfig:
    """Loss and optimisation settings of one policy update.

    max_tokens: packed tokens per micro-batch (of the whole stream, before sequence sharding).
    clip_low / clip_high / clip_c, aggregation, kl_coef / kl_estimator: as in `dualkv.losses`.
    max_grad_norm: global gradient-norm clip. scale_advantages_by_std: GRPO's (r - mean) / std.
    """

    max_tokens: int
    clip_low: float = 0.2
    clip_high: float | None = None
    clip_c: float | None = None
    aggregation: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    max_grad_norm: float = 1.0
    scale_advantages_by_std: bool = True

    def __post_init__(self):
        if isinstance(self.kl_coef, bool) or not isinstance(self.kl_coef, (int, float)):
            raise TypeError(f"kl_coef: expected a number, got {type(self.kl_coef).__name__}")
        if not (math.isfinite(self.kl_coef) and self.kl_coef >= 0):
            raise ValueError(f"kl_coef: must be finite and >= 0, got {self.kl_coef}")
        if self.aggregation not in losses.AGGREGATION_MODES:
            raise ValueError(f"aggregation: expected one of {losses.AGGREGATION_MODES}, got {self.aggregation!r}")
        if self.kl_estimator not in losses.KL_ESTIMATORS:
            raise ValueError(f"kl_estimator: expected one of {losses.KL_ESTIMATORS}, got {self.kl_estimator!r}")
        if not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm: must be > 0, got {self.max_grad_norm}")

    @classmethod
    def grpo(cls, max_tokens: int, **overrides) -> UpdateConfig:
        """GRPO: symmetric clip, per-sequence token means, k3 KL to the reference."""
        return cls(max_tokens, **{"aggregation": "seq-mean-token-mean", "kl_coef": 0.04, **overrides})

    @classmethod
    def dapo(cls, max_tokens: int, **overrides) -> UpdateConfig:
        """DAPO: asymmetric clip-higher, token-mean over the batch, no KL."""
        return cls(max_tokens, **{"clip_high": 0.28, "aggregation": "token-mean", "kl_coef": 0.0, **overrides})


def policy_update(
    policy: PackedPolicy,
    optimizer: torch.optim.Optimizer,
    rollouts: Sequence[RolloutGroup] | Sequence[TrajectoryGroup],
    config: UpdateConfig,
    parallel: Parallelism,
    *,
    reference: PackedPolicy | None = None,
) -> dict:
    """One optimizer step of `policy` on the whole rollout batch (every rank passes the same
    batch and takes its share). `reference` is required when config.kl_coef != 0. Returns the
    step's metrics, identical on every rank: loss (the batch's aggregated loss), kl, entropy and
    clip_fraction (token means over the batch; clip_fraction counts tokens whose ratio lies
    outside the clip range), grad_norm (before clipping), skipped (a non-finite loss or gradient
    norm: no step taken), packed_tokens and ncopy_tokens (the N-copy batch's), micro_steps, split_groups
    (split trees, for trajectory groups), time_s.

    rollouts: prompt groups (RolloutGroup), or groups of multi-turn trajectories (TrajectoryGroup),
    packed into tree layouts."""
    if config.kl_coef != 0.0 and reference is None:
        raise ValueError("reference: a reference policy is required when kl_coef != 0")
    if not rollouts:
        raise ValueError("rollouts: the batch needs at least one prompt group")
    start = time.perf_counter()
    batch = _rollout_batch(rollouts, config.scale_advantages_by_std)
    plan = batch.plan(config.max_tokens, parallel.dp_size)
    totals = batch.totals
    schedule = _schedule(plan.ranks[parallel.dp_rank], plan.num_steps)
    packed = [batch.pack(mb).to(parallel.device) for mb, _ in schedule]
    inputs = [shard_sequence(p, parallel.sp_group) if parallel.sp_size > 1 else p for p in packed]

    with torch.no_grad():
        old = [policy(micro_batch)[0] for micro_batch in inputs]
        ref = [reference(micro_batch)[0] for micro_batch in inputs] if config.kl_coef != 0.0 else None

    clip_high = config.clip_low if config.clip_high is None else config.clip_high
    sums = torch.zeros(4, dtype=torch.float64, device=parallel.device)  # loss, kl, entropy, clipped
    optimizer.zero_grad(set_to_none=True)
    for step, ((mb, weight), micro_batch) in enumerate(zip(schedule, inputs)):
        logprobs, entropy = policy(micro_batch)
        mask = packed[step].response_mask
        per_token = losses.clipped_policy_loss(
            logprobs,
            old[step],
            batch.advantages_of(mb).to(mask.device),
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            clip_c=config.clip_c,
        )
        kl = torch.zeros_like(per_token)
        if ref is not None:
            kl = losses.kl_divergence(logprobs, ref[step], config.kl_estimator)
            per_token = per_token + config.kl_coef * kl
        loss = _masked_sum(per_token, totals.weights(mask, config.aggregation), mask) * weight
        # Data-parallel wrappers average over ranks; the batch-normalised losses need the sum.
        (loss * parallel.dp_size).backward()
        ratio = torch.exp(logprobs.detach() - old[step])
        clipped = ((ratio < 1 - config.clip_low) | (ratio > 1 + clip_high)).float()
        token_mean = totals.weights(mask, "token-mean") * weight
        sums += torch.stack(
            [loss.detach(), *(_masked_sum(x.detach(), token_mean, mask) for x in (kl, entropy, clipped))]
        ).double()

    grad_norm = _clip_grad_norm(policy, config.max_grad_norm)
    if parallel.dp_group is not None:
        dist.all_reduce(sums, group=parallel.dp_group)  # SP ranks already agree
    loss, kl, entropy, clipped = sums.tolist()
    # Every rank decides alike: the norm is global and the loss all-reduced.
    skipped = not (math.isfinite(grad_norm) and math.isfinite(loss))
    if not skipped:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {
        "loss": loss,
        "kl": kl,
        "entropy": entropy,
        "clip_fraction": clipped,
        "grad_norm": grad_norm,
        "skipped": skipped,
        "packed_tokens": sum(plan.rank_tokens()),
        "ncopy_tokens": totals.ncopy_tokens,
        "micro_steps": plan.num_steps,
        "split_groups": list(plan.split_groups),
        "time_s": time.perf_counter() - start,
    }


def _masked_sum(values: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum(values * weights) over the masked tokens; the others are selected away, not multiplied
    by a zero weight, so whatever they hold cannot turn the sum into NaN."""
    return torch.where(mask, values * weights, 0.0).sum()


class _BatchTotals:
    """Counts of the whole rollout batch, which every micro-batch's loss is normalised by."""

    def __init__(self, responses: int, tokens: int, ncopy_tokens: int):
        self.responses, self.tokens, self.ncopy_tokens = responses, tokens, ncopy_tokens

    def weights(self, mask: torch.Tensor, aggregation: str) -> torch.Tensor:
        """Per-token weights for a micro-batch's (num_responses, max_R) values such that summing
        weights * values over every micro-batch gives `losses.aggregate_tokens` of the whole batch."""
        mask = mask.float()
        if aggregation == "token-mean":
            return mask / self.tokens
        if aggregation == "seq-mean-token-sum":
            return mask / self.responses
        return mask / (mask.sum(dim=1, keepdim=True) * self.responses)  # seq-mean-token-mean


def _group_advantages(rewards_per_group: list[Sequence[float]], scale_by_std: bool) -> torch.Tensor:
    """Every response's (trajectory's) advantage, normalised over its whole group, flat in order."""
    rewards = torch.tensor([r for group in rewards_per_group for r in group], dtype=torch.float32)
    sizes = torch.tensor([len(group) for group in rewards_per_group])
    groups = torch.repeat_interleave(torch.arange(len(rewards_per_group)), sizes)
    return losses.group_advantages(rewards, groups, scale_by_std=scale_by_std)


class _PromptGroupBatch:
    """A batch of RolloutGroups: micro-batches of whole prompt groups (`plan_microbatches`)."""

    def __init__(self, rollouts: Sequence[RolloutGroup], scale_by_std: bool):
        self.prompts, self.responses = [g.prompt for g in rollouts], [g.responses for g in rollouts]
        flat = _group_advantages([g.rewards for g in rollouts], scale_by_std)
        self.advantages = list(flat.split([len(g.rewards) for g in rollouts]))
        self.totals = _BatchTotals(
            sum(len(g.responses) for g in rollouts),
            sum(len(r) for g in rollouts for r in g.responses),
            sum(len(g.prompt) * len(g.responses) + sum(map(len, g.responses)) for g in rollouts),
        )

    def plan(self, max_tokens: int, dp_size: int):
        lengths = [[len(r) for r in group] for group in self.responses]
        return plan_microbatches([len(p) for p in self.prompts], lengths, max_tokens=max_tokens, dp_size=dp_size)

    def pack(self, mb: MicroBatch) -> PackedBatch:
        return pack_microbatch(mb, self.prompts, self.responses)

    def advantages_of(self, mb: MicroBatch) -> torch.Tensor:
        """(num_responses,) advantages of a micro-batch's responses, in its packed order."""
        return torch.stack([self.advantages[g][i] for g, i in mb.responses])


class _TrajectoryBatch:
    """A batch of TrajectoryGroups: micro-batches of whole trees of their trajectories
    (`plan_trajectory_microbatches`); a trajectory's index is its place in the whole batch."""

    def __init__(self, rollouts: Sequence[TrajectoryGroup], scale_by_std: bool):
        self.trajectories = [t for g in rollouts for t in g.trajectories]
        self.group_of = [g for g, group in enumerate(rollouts) for _ in group.trajectories]
        self.advantages = _group_advantages([g.rewards for g in rollouts], scale_by_std)
        flat = flatten_trajectories(self.trajectories)
        self.totals = _BatchTotals(
            len(flat), sum(sum(trained) for _, trained in flat), sum(len(tokens) for tokens, _ in flat)
        )

    def plan(self, max_tokens: int, dp_size: int):
        return plan_trajectory_microbatches(self.trajectories, max_tokens=max_tokens, dp_size=dp_size)

    def pack(self, mb: MicroBatch) -> PackedBatch:
        return pack_trajectory_microbatch(mb, self.trajectories, group_ids=self.group_of)

    def advantages_of(self, mb: MicroBatch) -> torch.Tensor:
        return self.advantages[torch.tensor([i for _, i in mb.responses])]


def _rollout_batch(rollouts, scale_by_std: bool):
    if all(isinstance(g, RolloutGroup) for g in rollouts):
        return _PromptGroupBatch(rollouts, scale_by_std)
    if all(isinstance(g, TrajectoryGroup) for g in rollouts):
        return _TrajectoryBatch(rollouts, scale_by_std)
    kinds = sorted({type(g).__name__ for g in rollouts})
    raise TypeError(f"rollouts: expected RolloutGroups or TrajectoryGroups, one kind for the whole batch, got {kinds}")


def _schedule(batches: Sequence[MicroBatch], steps: int) -> list[tuple[MicroBatch, float]]:
    """This rank's micro-batches with weight 1, then, if it has fewer than `steps`, its smallest
    one repeated with weight 0: FSDP's collectives need every rank to run every micro-step."""
    filler = min(batches, key=lambda mb: mb.tokens)
    return [(mb, 1.0) for mb in batches] + [(filler, 0.0)] * (steps - len(batches))


def _clip_grad_norm(policy: torch.nn.Module, max_norm: float) -> float:
    """The global gradient norm before clipping (over every rank's shards under FSDP2)."""
    norm = torch.nn.utils.clip_grad_norm_([p for p in policy.parameters() if p.grad is not None], max_norm)
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
