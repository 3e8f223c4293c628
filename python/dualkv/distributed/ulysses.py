"""Ulysses sequence parallelism for the packed shared-prompt stream.

Each rank of a group of W ranks holds a contiguous shard of the packed stream (all heads, T/W
rows). Attention needs every row of a group, so around the op an all-to-all trades the sequence
shard for a head shard (all rows, H/W query heads), the op runs on the global layout, and a second
all-to-all trades back. Everything outside attention is per token and runs on the sequence shard.

K/V heads follow the layout's GQA rule: query head h reads kv head h // (H / Hk). Rank r
gets query heads [r H/W, (r+1) H/W). When W divides Hk it gets exactly the Hk/W kv heads those read.
Otherwise (W > Hk, or W not dividing Hk) a rank's query heads straddle or share kv heads, and the
kv heads are replicated before the exchange: see `kv_replication`.

The op between the exchanges is dualkv's by default; `attention_fn` puts another attention there
(the step benchmark's baselines run FlashAttention or FlexAttention under Ulysses this way).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch.distributed.nn.functional import all_to_all_single

from .._attention import attention
from .._layout import Layout

__all__ = ["kv_replication", "ulysses_attention"]


def kv_replication(heads: int, kv_heads: int, world: int) -> int:
    """How many copies of each kv head the head exchange sends (1 when W divides Hk).

    With g = H / Hk query heads per kv head and H / W query heads per rank, let g' = gcd(g, H / W).
    Replicating every kv head g / g' times (copy x of the expanded H / g' heads is kv head
    x // (g / g')) gives a GQA layout in which query head h reads expanded head h // g', still kv
    head h // g (g' divides g), and in which H / g' is a multiple of W, so each rank receives a
    contiguous block of (H / W) / g' expanded heads that is exactly what its query heads read,
    with the same local rule j // g'. g' is the largest such ratio, so the least replication.
    """
    per_kv, per_rank = heads // kv_heads, heads // world
    return per_kv // math.gcd(per_kv, per_rank)


def ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    group: dist.ProcessGroup | None,
    *,
    softmax_scale: float | None = None,
    deterministic: bool = False,
    attention_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Layout, float | None], torch.Tensor]
    | None = None,
) -> torch.Tensor:
    """Shared-prompt attention over a sequence-sharded packed stream; differentiable in q, k, v.

    q: (T_local, H, d), k and v: (T_local, Hk, d), this rank's rows [r T_local, (r+1) T_local) of
    the packed stream padded at its end so that W * T_local >= layout.num_tokens (W = size of
    `group`, r = this rank's index in it; None means the default group). `layout` is the global
    layout, the same on every rank. W must divide H; it need not divide Hk. Returns this rank's
    (T_local, H, d) output, zeros on pad rows. softmax_scale and deterministic as in
    `dualkv.attention`. Collective: every rank of `group` must call it with the same shapes.

    attention_fn: the attention run between the exchanges, None for `dualkv.attention`. It is
    called as attention_fn(q, k, v, layout, softmax_scale) on the whole stream (T = layout.num_tokens
    rows, no pad rows) for this rank's heads: q (T, H/W, d), k and v (T, Hk', d) with Hk' dividing
    H/W (after any kv replication, the GQA rule j // (H/W / Hk') reads the right kv head), and must
    return (T, H/W, d), differentiable in q, k, v. `deterministic` is dualkv's option, so it must
    stay False with an attention_fn.
    """
    world = _check_arguments(q, k, v, layout, group, deterministic, attention_fn)
    replicas = kv_replication(q.shape[1], k.shape[1], world)
    if replicas > 1:
        k, v = (x.repeat_interleave(replicas, dim=1) for x in (k, v))
    tokens = layout.num_tokens
    q_heads, k_heads, v_heads = (_sequence_to_heads(x, world, group)[:tokens] for x in (q, k, v))
    if attention_fn is None:
        out = attention(q_heads, k_heads, v_heads, layout, softmax_scale=softmax_scale, deterministic=deterministic)
    else:
        out = attention_fn(q_heads, k_heads, v_heads, layout, softmax_scale)
        if not isinstance(out, torch.Tensor) or out.shape != q_heads.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"attention_fn: must return q's shape {tuple(q_heads.shape)} (T, H/W, d), got {got}")
    padded = torch.nn.functional.pad(out, (0, 0, 0, 0, 0, world * q.shape[0] - tokens))
    return _heads_to_sequence(padded, world, group)


def _sequence_to_heads(x: torch.Tensor, world: int, group) -> torch.Tensor:
    """(T_local, X, d), this rank's rows, all heads -> (W T_local, X / W, d): every row of the padded
    stream, this rank's block of heads. Chunk s of the exchange carries head block s."""
    rows, heads, dim = x.shape
    send = x.reshape(rows, world, heads // world, dim).transpose(0, 1).contiguous()
    received = all_to_all_single(torch.empty_like(send), send, group=group)
    return received.reshape(world * rows, heads // world, dim)


def _heads_to_sequence(x: torch.Tensor, world: int, group) -> torch.Tensor:
    """The inverse of `_sequence_to_heads`: (W T_local, H / W, d) -> (T_local, H, d)."""
    rows, heads, dim = x.shape[0] // world, x.shape[1], x.shape[2]
    send = x.reshape(world, rows, heads, dim).contiguous()
    received = all_to_all_single(torch.empty_like(send), send, group=group)
    return received.transpose(0, 1).reshape(rows, world * heads, dim)


def _check_arguments(q, k, v, layout, group, deterministic, attention_fn) -> int:
    """Validates what the head exchange relies on and returns the group size W; the op checks the
    rest (dtypes, head dims, H % Hk, the layout) on the exchanged tensors."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != 3:
            raise ValueError(f"{name}: expected (T_local, heads, head_dim), got shape {tuple(tensor.shape)}")
    if not isinstance(layout, Layout):
        raise TypeError(f"layout: expected a dualkv.Layout, got {type(layout).__name__}")
    if attention_fn is not None:
        if not callable(attention_fn):
            raise TypeError(f"attention_fn: expected a callable or None, got {type(attention_fn).__name__}")
        if deterministic:
            raise ValueError(
                "deterministic: selects dualkv's deterministic backward, so it cannot be combined with a custom "
                "attention_fn (pass one or the other)"
            )
    if k.shape != v.shape:
        raise ValueError(f"v: shape {tuple(v.shape)} must equal k's {tuple(k.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(f"k: shape {tuple(k.shape)} must be (T_local, Hk, d) with q's T_local and d {tuple(q.shape)}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads:
        raise ValueError(f"k: kv heads Hk = {kv_heads} must divide the query heads H = {heads}")
    if not dist.is_initialized():
        raise RuntimeError("group: torch.distributed is not initialised (call torch.distributed.init_process_group)")
    world = dist.get_world_size(group)
    if heads % world:
        raise ValueError(f"group: its size W = {world} must divide the query heads H = {heads}")
    if world * q.shape[0] < layout.num_tokens:
        raise ValueError(
            f"q: W * T_local = {world} * {q.shape[0]} rows cannot hold the layout's {layout.num_tokens} tokens; "
            "each rank holds its contiguous shard of the stream padded to a multiple of W"
        )
    return world
