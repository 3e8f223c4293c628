"""Gated DeltaNet layers of transformers' hybrid models on the packed layout: Qwen3.5, Qwen3.5-MoE
and Qwen3-Next.

Their `GatedDeltaNet.forward` does per-token work (projections, gating, the output norm) around
two token-mixing calls, both to functions of its modeling module: `causal_conv1d_fn(mixed_qkv,
weight, bias, activation=..., **kwargs)` and `torch_chunk_gated_delta_rule(q, k, v, g=..., beta=...,
..., **kwargs)`. The decoder layer's kwargs reach both, and with them `dualkv_layout`. Importing
`dualkv.transformers` replaces those two module functions with ones that, when a call carries
`dualkv_layout`, run dualkv's packed convolution and recurrence (`dualkv.recurrent`) on that
layout, and otherwise call the function they replaced, unchanged. So the layout travels in the
call's own arguments: a recomputation under activation checkpointing, or any replay of the layer's
call, gets the same result; models without a layout run exactly as before.

Sequence parallelism (a `SequenceParallelLayout` as `dualkv_layout`): the inputs are this rank's
rows of the stream; both calls run the Ulysses exchange over the layout's process group
(`dualkv.distributed.ulysses_causal_conv1d` / `ulysses_gated_delta_rule`), exactly.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import weakref

import torch
from transformers.activations import ACT2FN

from ._layout import Layout
from .distributed.recurrent import ulysses_causal_conv1d, ulysses_gated_delta_rule
from .distributed.sequence import SequenceParallelLayout
from .recurrent import RecurrentPlan, causal_conv1d, gated_delta_rule

__all__ = ["GATED_DELTANET_MODULES", "install", "recurrent_plan"]

# modeling module -> its Gated DeltaNet class (the layer whose forward makes the two calls).
GATED_DELTANET_MODULES = {
    "transformers.models.qwen3_next.modeling_qwen3_next": "Qwen3NextGatedDeltaNet",
    "transformers.models.qwen3_5.modeling_qwen3_5": "Qwen3_5GatedDeltaNet",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe": "Qwen3_5MoeGatedDeltaNet",
}
_CONV = "causal_conv1d_fn"
_RULE = "torch_chunk_gated_delta_rule"


def install() -> list[str]:
    """Replaces the two functions in every modeling module above whose layer calls them (once;
    again is a no-op). Returns the layer classes adapted."""
    adapted = []
    for module_name, class_name in GATED_DELTANET_MODULES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        layer = getattr(module, class_name, None)
        called = set(inspect.unwrap(layer.forward).__code__.co_names) if layer is not None else set()
        if not {_CONV, _RULE} <= called or not all(callable(getattr(module, n, None)) for n in (_CONV, _RULE)):
            # Another transformers release, another structure: not adapted, so refused by the model check.
            continue
        for name, packed in ((_CONV, _packed_conv), (_RULE, _packed_rule)):
            original = getattr(module, name)
            if not getattr(original, "_dualkv_packed", False):
                setattr(module, name, _layout_aware(original, packed, class_name))
        adapted.append(class_name)
    return adapted


def _layout_aware(original, packed, layer_name: str):
    @functools.wraps(original)
    def function(*args, **kwargs):
        if kwargs.get("dualkv_layout") is None:
            return original(*args, **kwargs)
        return packed(*args, layer_name=layer_name, **kwargs)

    function._dualkv_packed = True
    return function


# Per layout, its plan on each device: every Gated DeltaNet layer of a forward pass shares it.
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def recurrent_plan(layout: Layout, device: torch.device) -> RecurrentPlan:
    """The (cached) `RecurrentPlan` of `layout` with its index tensors on `device`."""
    by_device = _plans.setdefault(layout, {})
    if device not in by_device:
        by_device[device] = RecurrentPlan.from_layout(layout, device)
    return by_device[device]


def _packed_conv(hidden_states, weight, bias=None, activation=None, *, layer_name, dualkv_layout, **_):
    """causal_conv1d_fn's contract: hidden_states (1, C, T), weight (C, width) -> (1, C, T)."""
    layout, sharded = _global_layout(dualkv_layout)
    _check_rows(hidden_states, 2, "(1, C, T)", layout, sharded, layer_name)
    plan = recurrent_plan(layout, hidden_states.device)
    act = ACT2FN[activation] if activation is not None else None
    x = hidden_states[0]
    if sharded:
        return ulysses_causal_conv1d(x, weight, plan, dualkv_layout.group, bias=bias, activation=act).unsqueeze(0)
    return causal_conv1d(x, weight, plan, bias=bias, activation=act).unsqueeze(0)


def _packed_rule(
    query,
    key,
    value,
    g,
    beta,
    *,
    layer_name,
    dualkv_layout,
    initial_state=None,
    output_final_state=False,
    use_qk_l2norm_in_kernel=False,
    cu_seqlens=None,
    **_,
):
    """torch_chunk_gated_delta_rule's contract: query, key (1, T, H, K), value (1, T, H, V), g, beta
    (1, T, H) -> (o (1, T, H, V), None)."""
    layout, sharded = _global_layout(dualkv_layout)
    if initial_state is not None or output_final_state:
        raise ValueError(
            f"use_cache: must be False with dualkv_layout ({layer_name} got a recurrent cache): a packed batch "
            "has one recurrent state per segment, not one to cache"
        )
    if cu_seqlens is not None:
        raise ValueError(
            f"cu_seq_lens_q: the packed layout defines the sequences; pass dualkv_layout alone ({layer_name})"
        )
    if not use_qk_l2norm_in_kernel:
        raise ValueError(f"{layer_name}: dualkv's Gated DeltaNet normalises q and k (use_qk_l2norm_in_kernel=True)")
    if query.dim() != 4:
        raise ValueError(f"{layer_name}: expected query (1, T, H, K), got {tuple(query.shape)}")
    _check_rows(query, 1, "(1, T, H, K)", layout, sharded, layer_name)
    plan = recurrent_plan(layout, query.device)
    inputs = (query[0], key[0], value[0], g[0], beta[0])
    if sharded:
        return ulysses_gated_delta_rule(*inputs, plan, dualkv_layout.group).unsqueeze(0), None
    return gated_delta_rule(*inputs, plan).unsqueeze(0), None


def _global_layout(dualkv_layout) -> tuple[Layout, bool]:
    """The layout of the whole stream, and whether the inputs are a sequence shard of it."""
    if isinstance(dualkv_layout, SequenceParallelLayout):
        if not isinstance(dualkv_layout.layout, Layout):
            raise TypeError(
                f"dualkv_layout.layout: expected a dualkv.Layout, got {type(dualkv_layout.layout).__name__}"
            )
        return dualkv_layout.layout, True
    if not isinstance(dualkv_layout, Layout):
        raise TypeError(
            f"dualkv_layout: expected a dualkv.Layout or SequenceParallelLayout, got {type(dualkv_layout).__name__}"
        )
    return dualkv_layout, False


def _check_rows(x, dim: int, shape: str, layout: Layout, sharded: bool, layer_name: str) -> None:
    """One packed sequence with the layout's T rows, or under sequence parallelism this rank's
    T_local (the stream padded to W T_local rows)."""
    if x.shape[0] != 1:
        raise ValueError(f"{layer_name}: expected one packed sequence {shape}, got {tuple(x.shape)}")
    rows = x.shape[dim]
    if not sharded and rows != layout.num_tokens:
        raise ValueError(
            f"{layer_name}: {rows} tokens for a layout of {layout.num_tokens}; dualkv runs whole packed batches "
            "without a cache (pass use_cache=False)"
        )
