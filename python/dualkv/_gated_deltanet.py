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

Sequence parallelism (a `SequenceParallelLayout`): see `_sequence_parallel_*` below.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import weakref

import torch
from transformers.activations import ACT2FN

from ._layout import Layout
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
    layout = _global_layout(dualkv_layout, layer_name)
    if hidden_states.dim() != 3 or hidden_states.shape[0] != 1:
        raise ValueError(f"{layer_name}: expected one packed sequence (1, C, T), got {tuple(hidden_states.shape)}")
    if hidden_states.shape[2] != layout.num_tokens:
        raise ValueError(
            f"{layer_name}: {hidden_states.shape[2]} tokens for a layout of {layout.num_tokens}; dualkv runs whole "
            "packed batches without a cache (pass use_cache=False)"
        )
    plan = recurrent_plan(layout, hidden_states.device)
    act = ACT2FN[activation] if activation is not None else None
    return causal_conv1d(hidden_states[0], weight, plan, bias=bias, activation=act).unsqueeze(0)


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
    layout = _global_layout(dualkv_layout, layer_name)
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
    if query.dim() != 4 or query.shape[0] != 1 or query.shape[1] != layout.num_tokens:
        raise ValueError(
            f"{layer_name}: expected query (1, T, H, K) with T = {layout.num_tokens} packed tokens, "
            f"got {tuple(query.shape)}"
        )
    plan = recurrent_plan(layout, query.device)
    out = gated_delta_rule(query[0], key[0], value[0], g[0], beta[0], plan)
    return out.unsqueeze(0), None


def _global_layout(dualkv_layout, layer_name: str) -> Layout:
    if isinstance(dualkv_layout, SequenceParallelLayout):
        raise NotImplementedError(
            f"{layer_name}: sequence parallelism is not supported for Gated DeltaNet layers (their recurrent "
            "state and convolution tail would have to cross shard boundaries); run hybrid models with SP 1"
        )
    if not isinstance(dualkv_layout, Layout):
        raise TypeError(
            f"dualkv_layout: expected a dualkv.Layout or SequenceParallelLayout, got {type(dualkv_layout).__name__}"
        )
    return dualkv_layout
