"""Ulysses sequence parallelism for the recurrent layers: the state hand-off across shard boundaries.

Under sequence parallelism each rank holds a contiguous shard of the packed stream, so a response's
prompt (its final recurrent state, its last convolution inputs) may live on another rank. Both
token-mixing pieces of Gated DeltaNet are independent per channel (the depthwise convolution) or
per head (the recurrence), so the exchange attention uses works for them too: an all-to-all trades
the sequence shard for a channel or head shard (every row of the stream, 1/W of the channels or
heads), the packed computation runs on the global layout exactly as on one rank, and a second
all-to-all trades back. Nothing is approximated: each rank computes whole paths for its heads.

A count of channels or heads that W does not divide is padded with zero channels or heads: a zero
convolution channel outputs zeros, and a zero head (q = k = 0, beta = 0, g = 0) too.

Gradients follow the convention of `dualkv.distributed.logprobs`: the convolution weight enters
between the exchanges, so rank r's weight gradient covers its channel block (every row of the
stream) with W times the true upstream gradient, zeros elsewhere; their mean over the group is the
whole weight's gradient, as for every parameter outside the exchanges.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..recurrent import RecurrentPlan, causal_conv1d, gated_delta_rule
from .ulysses import _heads_to_sequence, _sequence_to_heads

__all__ = ["ulysses_causal_conv1d", "ulysses_gated_delta_rule"]


def ulysses_causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    plan: RecurrentPlan,
    group: dist.ProcessGroup | None,
    *,
    bias: torch.Tensor | None = None,
    activation: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """`dualkv.recurrent.causal_conv1d` for this rank's rows: x (C, T_local), the rows
    [r T_local, (r+1) T_local) of the stream padded so that W * T_local >= plan.num_tokens.
    Returns (C, T_local), zeros on pad rows. Collective over `group`."""
    world, rank = _world(x.shape[1], plan, group, "x")
    channels = x.shape[0]
    per_rank = -(-channels // world)
    padded = F.pad(x.T, (0, world * per_rank - channels)).unsqueeze(-1)  # (T_local, W * C/W, 1)
    block = _sequence_to_heads(padded, world, group)[: plan.num_tokens, :, 0].T  # (C/W, T)
    rows = slice(rank * per_rank, (rank + 1) * per_rank)
    weight_block = F.pad(weight, (0, 0, 0, world * per_rank - channels))[rows]
    bias_block = None if bias is None else F.pad(bias, (0, world * per_rank - channels))[rows]
    out = causal_conv1d(block, weight_block, plan, bias=bias_block, activation=activation)
    out = F.pad(out.T, (0, 0, 0, world * x.shape[1] - plan.num_tokens)).unsqueeze(-1)
    return _heads_to_sequence(out, world, group)[:, :channels, 0].T


def ulysses_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    plan: RecurrentPlan,
    group: dist.ProcessGroup | None,
    *,
    scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """`dualkv.recurrent.gated_delta_rule` for this rank's rows (q, k (T_local, H, K), v (T_local,
    H, V), g, beta (T_local, H)); returns (T_local, H, V), zeros on pad rows. Collective."""
    world, _ = _world(q.shape[0], plan, group, "q")
    heads = q.shape[1]
    extra = -heads % world

    def to_heads(x: torch.Tensor) -> torch.Tensor:
        x = x if x.dim() == 3 else x.unsqueeze(-1)
        x = F.pad(x, (0, 0, 0, extra))
        return _sequence_to_heads(x, world, group)[: plan.num_tokens]

    q_h, k_h, v_h = (to_heads(x) for x in (q, k, v))
    g_h, beta_h = (to_heads(x)[..., 0] for x in (g, beta))
    out = gated_delta_rule(q_h, k_h, v_h, g_h, beta_h, plan, scale=scale, backend=backend)
    out = F.pad(out, (0, 0, 0, 0, 0, world * q.shape[0] - plan.num_tokens))
    return _heads_to_sequence(out, world, group)[:, :heads]


def _world(local_rows: int, plan: RecurrentPlan, group, name: str) -> tuple[int, int]:
    if not dist.is_initialized():
        raise RuntimeError("group: torch.distributed is not initialised (call torch.distributed.init_process_group)")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if world * local_rows < plan.num_tokens:
        raise ValueError(
            f"{name}: W * T_local = {world} * {local_rows} rows cannot hold the layout's {plan.num_tokens} tokens"
        )
    return world, rank
