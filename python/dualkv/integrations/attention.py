"""One attention implementation for both jobs a trainer gives a model: generation and scoring.

A trainer generates with the model's ordinary attention (sdpa, eager, flash) on N-copy rows and
scores packed batches with dualkv. `use_packed_attention(model)` registers and sets the
attention implementation "dualkv_or_<previous>": an attention call that carries a
`dualkv_layout` runs dualkv, any other call runs the previous implementation unchanged.

Why not switch `config._attn_implementation` around the packed forward instead: with gradient
checkpointing, backward re-runs each layer's forward after the switch is undone, and would
recompute it with the wrong attention. The layout travels with the layer's arguments, so the
choice made by its presence is the same in the recompute.

Masks are built once per forward, outside the layers, and never recomputed; a packed forward
runs inside `packed_forward()`, where the mask builder returns None (the layout is the mask)
instead of the previous implementation's (T, T) mask.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .. import transformers as dualkv_transformers
from ..token_mixing import DISPATCH_PREFIX

__all__ = ["PREFIX", "packed_forward", "use_packed_attention"]

PREFIX = DISPATCH_PREFIX

_packed_forward_active = contextvars.ContextVar("dualkv_packed_forward", default=False)


@contextlib.contextmanager
def packed_forward():
    """Marks a forward pass whose attention calls all carry a dualkv_layout (no mask is built)."""
    token = _packed_forward_active.set(True)
    try:
        yield
    finally:
        _packed_forward_active.reset(token)


def use_packed_attention(model: PreTrainedModel) -> str:
    """Sets `model`'s attention to "dualkv_or_<its current implementation>" and returns that name.
    Idempotent. A model already on plain "dualkv" is refused: it cannot generate."""
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"model: expected a transformers PreTrainedModel, got {type(model).__name__}")
    current = model.config._attn_implementation
    if isinstance(current, str) and current.startswith(PREFIX):
        return current
    if current == dualkv_transformers.ATTENTION_NAME:
        raise ValueError(
            "model: loaded with attn_implementation='dualkv', which runs only packed batches, so the trainer "
            "could not generate with it; load it with the attention generation should use (e.g. 'sdpa'): the "
            "packed forward switches to dualkv by itself"
        )
    if not isinstance(current, str) or current.startswith("paged|"):
        raise ValueError(f"model.config._attn_implementation: cannot be combined with dualkv: {current!r}")
    name = PREFIX + current
    if name not in ALL_ATTENTION_FUNCTIONS:
        AttentionInterface.register(name, _dispatching_attention(current))
        AttentionMaskInterface.register(name, _dispatching_mask(current))
    model.set_attn_implementation(name)
    if model.config._attn_implementation != name:  # transformers only warns for models it cannot switch
        raise ValueError(
            f"model: {type(model).__name__} does not let transformers switch its attention implementation, "
            "so dualkv cannot run it"
        )
    return name


def _dispatching_attention(fallback: str):
    def attention(module, query, key, value, attention_mask, *args, dualkv_layout=None, **kwargs):
        if dualkv_layout is not None:
            return dualkv_transformers.dualkv_attention_forward(
                module, query, key, value, attention_mask, *args, dualkv_layout=dualkv_layout, **kwargs
            )
        return _fallback_attention(fallback, module)(module, query, key, value, attention_mask, *args, **kwargs)

    return attention


def _fallback_attention(fallback: str, module: torch.nn.Module):
    if fallback != "eager":
        return ALL_ATTENTION_FUNCTIONS[fallback]
    # "eager" is not in the registry: each model file defines its own eager_attention_forward.
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise ValueError(
            f"{type(module).__name__}: its model file defines no eager_attention_forward to fall back to; load the "
            "model with attn_implementation='sdpa'"
        )
    return eager


def _dispatching_mask(fallback: str):
    def mask(*args, attention_mask=None, **kwargs):
        if _packed_forward_active.get():
            return dualkv_transformers._refuse_padding_mask(*args, attention_mask=attention_mask, **kwargs)
        return ALL_MASK_ATTENTION_FUNCTIONS[fallback](*args, attention_mask=attention_mask, **kwargs)

    return mask
