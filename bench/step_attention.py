"""The step benchmark's two baseline attentions as transformers attention functions, driven by the
same `dualkv_layout` keyword PackedPolicy passes to every layer, so the three methods share the
model, the log-prob code and the loss and differ only in attention and in the stream they run on:

  flash_ncopy  the N-copy stream, one [prompt; response] row per response back to back without
               padding (a layout whose every group has one response), through PyTorch's
               FlashAttention varlen kernel (torch.nn.attention.varlen.varlen_attn, causal per
               row, grouped-query attention native): how veRL runs padding-free batches.
  flex_packed  the packed stream with FlexAttention (torch.compile(flex_attention), enable_gqa)
               and a block mask built from the layout's visibility rule.

Both need a GPU. Importing this module registers both names and, for each, a mask builder that
returns None: the layout is the mask, so transformers must not build a (T, T) one.
"""

from __future__ import annotations

import weakref

import torch
from layer_benchmark import build_flex_block_mask
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

import dualkv

# No "flash" in the name: transformers takes such names for its own flash-attention kernels.
FLASH_NCOPY = "step_bench_varlen_ncopy"
FLEX_PACKED = "step_bench_flex_packed"

# Per layout (weakly: a micro-batch's layout dies with it), what every layer of its forward and
# backward reuses: the row offsets and longest row, or the block mask.
_flash_rows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_flex_masks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_compiled_flex_attention = None


def _to_tokens_major(x: torch.Tensor) -> torch.Tensor:
    """(1, heads, T, d) -> (T, heads, d), the varlen kernels' layout."""
    return x[0].transpose(0, 1).contiguous()


def flash_ncopy_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, dualkv_layout=None, **kwargs
):
    from torch.nn.attention.varlen import varlen_attn

    if dualkv_layout is None or any(len(r) != 1 for r in dualkv_layout.response_lengths):
        raise ValueError(
            "dualkv_layout: the flash_ncopy method needs the N-copy layout (one response per group, each group "
            "one [prompt; response] row)"
        )
    if dualkv_layout not in _flash_rows:
        starts = dualkv_layout.cu_seqlens[dualkv_layout.cu_groups.long()]  # each row starts at its prompt
        _flash_rows[dualkv_layout] = (starts.to(query.device, torch.int32), int(starts.diff().max()))
    rows, longest = _flash_rows[dualkv_layout]
    out = varlen_attn(
        _to_tokens_major(query), _to_tokens_major(key), _to_tokens_major(value), rows, rows, longest, longest,
        scale=scaling, window_size=(-1, 0),  # (-1, 0): causal within each row
    )
    return out.unsqueeze(0), None


def flex_packed_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, dualkv_layout=None, **kwargs
):
    global _compiled_flex_attention
    if not isinstance(dualkv_layout, dualkv.Layout):
        raise ValueError("dualkv_layout: the flex_packed method needs the packed layout")
    if _compiled_flex_attention is None:
        from torch.nn.attention.flex_attention import flex_attention

        # Automatic dynamic shapes: a second stream length recompiles once with a symbolic length.
        _compiled_flex_attention = torch.compile(flex_attention)
    if dualkv_layout not in _flex_masks:
        _flex_masks[dualkv_layout] = build_flex_block_mask(dualkv_layout.to(query.device))
    out = _compiled_flex_attention(
        query, key, value, block_mask=_flex_masks[dualkv_layout], scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2), None


def _no_mask(*args, **kwargs) -> None:
    return None


for _name, _function in ((FLASH_NCOPY, flash_ncopy_attention), (FLEX_PACKED, flex_packed_attention)):
    AttentionInterface.register(_name, _function)
    AttentionMaskInterface.register(_name, _no_mask)
